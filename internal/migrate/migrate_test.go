package migrate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/internal/translate"
)

var update = flag.Bool("update", false, "rewrite the golden files and the migration guide's table")

// golden compares got with testdata/name, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (rerun with -update and review the diff):\n%s", name, got)
	}
}

// TestGolden: the report on a directory of realistic Ingresses (35 of
// ingress-nginx classes, each another combination of annotations, in
// YAML multi-document files, a JSON List, a typed IngressList in a
// subdirectory; a hidden directory, other classes and a removed
// apiVersion) in text and JSON.
func TestGolden(t *testing.T) {
	in, err := ReadDir("testdata/manifests")
	if err != nil {
		t.Fatal(err)
	}
	rep := Analyze(in)
	if n := len(rep.Ingresses); n < 30 {
		t.Fatalf("%d Ingresses reported, want at least 30", n)
	}
	golden(t, "report.txt", []byte(rep.String()))
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", append(js, '\n'))
	for _, ir := range rep.Ingresses {
		if ir.Namespace == "x" {
			t.Errorf("a hidden directory was read: %s/%s", ir.Namespace, ir.Name)
		}
	}
	if len(rep.Skipped) != 2 || rep.Totals.ReadErrors != 1 || rep.Totals.Findings() == 0 {
		t.Errorf("skipped %v, totals %+v", rep.Skipped, rep.Totals)
	}
}

// TestLookup: every status, by the rules the translation applies.
func TestLookup(t *testing.T) {
	p := translate.NginxAnnotationPrefix
	for _, tc := range []struct {
		name   string
		status Status
		native string
	}{
		{"limit-rps", Supported, translate.AnnotationLimitRPS},
		{"whitelist-source-range", Supported, translate.AnnotationAllowSourceRange},
		{"allowlist-source-range", Supported, translate.AnnotationAllowSourceRange},
		{"rewrite-target", Different, translate.AnnotationRewriteTarget},
		{"canary", Supported, translate.AnnotationCanary},
		{"auth-secret-type", Different, ""},
		{"canary-by-header-pattern", Unsupported, ""},
		{"ssl-redirect", Unsupported, ""},
		{"server-snippet", Refused, ""},
		{"some-future-snippet", Refused, ""},
		{"lua-resty-waf", Refused, ""},
		{"Limit-RPS", Unsupported, ""}, // annotation keys are case-sensitive
	} {
		got := Lookup(p + tc.name)
		if got.Status != tc.status || got.Native != tc.native || got.Name != p+tc.name {
			t.Errorf("%s: %+v, want %s %q", tc.name, got, tc.status, tc.native)
		}
		if got.Status != Supported && got.Note == "" {
			t.Errorf("%s: %s without a note", tc.name, got.Status)
		}
		if got.Status.Finding() != (tc.status == Unsupported || tc.status == Refused) {
			t.Errorf("%s: Finding() = %v", tc.name, got.Status.Finding())
		}
	}
}

// TestAnalyzeClasses: only Ingresses that --ingress-nginx-compat serves
// as ingress-nginx's are reported: the configured class, classes of
// ingress-nginx's controller (and class-less Ingresses when one is the
// default), by spec or the legacy annotation.
func TestAnalyzeClasses(t *testing.T) {
	ing := func(name string, class *string, legacy string) *networkingv1.Ingress {
		i := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: name, Annotations: map[string]string{
			translate.NginxAnnotationPrefix + "server-snippet": "x",
		}}}
		i.Spec.IngressClassName = class
		if legacy != "" {
			i.Annotations["kubernetes.io/ingress.class"] = legacy
		}
		return i
	}
	s := func(v string) *string { return &v }
	classes := []*networkingv1.IngressClass{{
		ObjectMeta: metav1.ObjectMeta{Name: "internal", Annotations: map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: translate.IngressNginxController},
	}}
	in := Input{Classes: classes, NginxClass: "ext", Ingresses: []*networkingv1.Ingress{
		ing("by-flag", s("ext"), ""), ing("by-controller", s("internal"), ""), ing("legacy", nil, "ext"),
		ing("default", nil, ""), ing("nginx-not-configured", s("nginx"), ""), ing("other", s("sluice"), ""), nil,
	}}
	rep := Analyze(in)
	var got []string
	for _, ir := range rep.Ingresses {
		got = append(got, ir.Name)
	}
	if strings.Join(got, ",") != "by-controller,by-flag,default,legacy" || strings.Join(rep.Skipped, ",") != "n/nginx-not-configured,n/other" {
		t.Errorf("reported %v, skipped %v", got, rep.Skipped)
	}
	if rep.Totals.Refused != 4 || rep.Totals.Findings() != 4 {
		t.Errorf("totals %+v", rep.Totals)
	}
	if clean := Analyze(Input{}); clean.Totals.Findings() != 0 || !strings.Contains(clean.String(), "result: every annotation in use is served") {
		t.Errorf("empty input: %+v\n%s", clean.Totals, clean.String())
	}
}

// TestReadFormats: YAML multi-document, JSON, kind List and typed lists;
// invalid documents are reported and the rest is read.
func TestReadFormats(t *testing.T) {
	const ingYAML = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: %s, namespace: shop}\nspec: {ingressClassName: nginx}\n"
	for _, tc := range []struct {
		name, data     string
		ings, problems int
	}{
		{"multi.yaml", "---\n" + strings.ReplaceAll(ingYAML, "%s", "a") + "---\n# only a comment\n---\n" + strings.ReplaceAll(ingYAML, "%s", "b"), 2, 0},
		{"one.json", `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"j","namespace":"n"}}`, 1, 0},
		{"list.json", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"a"}},{"apiVersion":"networking.k8s.io/v1","kind":"IngressClass","metadata":{"name":"c"},"spec":{"controller":"k8s.io/ingress-nginx"}}]}`, 1, 0},
		{"typed.yaml", "apiVersion: networking.k8s.io/v1\nkind: IngressList\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n", 2, 0},
		{"bad.yaml", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: [}\n---\n" + strings.ReplaceAll(ingYAML, "%s", "ok"), 1, 1},
		{"nameless.yaml", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {namespace: n}\n", 0, 1},
		{"other.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", 0, 0},
	} {
		ings, _, problems := Read(tc.name, []byte(tc.data))
		if len(ings) != tc.ings || len(problems) != tc.problems {
			t.Errorf("%s: %d Ingresses, problems %q; want %d, %d", tc.name, len(ings), problems, tc.ings, tc.problems)
		}
	}
	if _, err := ReadDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("ReadDir of a missing directory: no error")
	}
	one, err := ReadDir("testdata/manifests/classes.yml")
	if err != nil || len(one.Classes) != 2 || len(one.Ingresses) != 0 {
		t.Errorf("ReadDir of one file: %d classes, err %v", len(one.Classes), err)
	}
}

// TestSafeNames: names a terminal could interpret are quoted.
func TestSafeNames(t *testing.T) {
	if got := safe("a\x1b[2Jb"); got != `"a\x1b[2Jb"` {
		t.Errorf("safe = %s", got)
	}
	if got := safe("shop/web"); got != "shop/web" {
		t.Errorf("safe = %s", got)
	}
}

// TestGuideTable: the migration guide's annotation table is the one
// GuideTable renders from translate's tables (-update rewrites it).
func TestGuideTable(t *testing.T) {
	const path = "../../docs/migrating-from-ingress-nginx.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, TableBegin), strings.Index(s, TableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: the table markers are missing", path)
	}
	body := s[i+len(TableBegin) : j]
	want := "\n" + GuideTable()
	if body == want {
		return
	}
	if !*update {
		t.Fatalf("%s: the annotation table is stale; run go test ./internal/migrate -run TestGuideTable -update", path)
	}
	if err := os.WriteFile(path, []byte(s[:i+len(TableBegin)]+want+s[j:]), 0o644); err != nil {
		t.Fatal(err)
	}
}
