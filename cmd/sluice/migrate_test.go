package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/migrate"
)

// TestRunMigrate: exit 0 when every annotation in use is served, 1 with
// findings, 2 for usage and read errors; --output json is a Report.
func TestRunMigrate(t *testing.T) {
	dir := t.TempDir()
	clean := "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\n  namespace: shop\n  annotations:\n    nginx.ingress.kubernetes.io/limit-rps: \"5\"\nspec:\n  ingressClassName: nginx\n"
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(clean), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := dispatch(append([]string{"migrate"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run("--dir", dir); code != 0 || !strings.Contains(out, "ingresses=1 ") || !strings.Contains(out, "supported") {
		t.Errorf("clean: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := run("--dir", "../../internal/migrate/testdata/manifests", "--output", "json")
	var rep migrate.Report
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Totals.Refused == 0 || rep.Totals.Unsupported == 0 {
		t.Errorf("findings: exit %d, totals %+v\n%s", code, rep.Totals, errs)
	}
	// The proxies' class name decides what is ingress-nginx's.
	if code, out, _ := run("--dir", dir, "--ingress-nginx-class", "other"); code != 0 || !strings.Contains(out, "ingresses=0 skipped=1") {
		t.Errorf("other class: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"--dir", filepath.Join(dir, "missing")}, {"--output", "yaml", "--dir", dir}, {"extra"}, {"--nope"}} {
		if code, _, _ := run(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestControllerForwardAuthAnyURL: the controller takes the proxies'
// --forward-auth-any-url, so its Events agree with what they serve.
func TestControllerForwardAuthAnyURL(t *testing.T) {
	for _, on := range []bool{false, true} {
		args := []string{"--kubeconfig", "k", "--leader-election-namespace", "ns"}
		if on {
			args = append(args, "--forward-auth-any-url")
		}
		c, err := parseControllerFlags(args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if c.anyAuthURL != on {
			t.Errorf("%v: anyAuthURL %v", args, c.anyAuthURL)
		}
	}
}
