package chart

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReleaseChart packages the chart as `make release VERSION=...` does
// (scripts/release.sh, chart part) and renders the package: its version
// and appVersion are the release's, every sluice container runs the image
// tagged with it unless image.tag says otherwise, and SHA256SUMS matches.
func TestReleaseChart(t *testing.T) {
	helm(t) // installs helm before the script asks for it
	const version = "9.8.7-rc.1"
	dist := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts/release.sh"))
	cmd.Env = append(os.Environ(), "VERSION="+version, "SLUICE_RELEASE_PARTS=chart", "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", err, out)
	}
	pkg := filepath.Join(dist, "sluice-"+version+".tgz")

	out, err := run(t, helm(t), "show", "chart", pkg)
	if err != nil {
		t.Fatalf("helm show chart: %v\n%s", err, out)
	}
	var meta struct{ Version, AppVersion string }
	if err := yaml.Unmarshal([]byte(out), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != version || meta.AppVersion != version {
		t.Errorf("packaged chart: version %q appVersion %q, want %q", meta.Version, meta.AppVersion, version)
	}

	images := func(args ...string) []string {
		out, err := run(t, helm(t), append([]string{"template", "sluice", pkg, "--namespace", "sluice-system", "--kube-version", kubeVersion}, args...)...)
		if err != nil {
			t.Fatalf("helm template %s: %v\n%s", pkg, err, out)
		}
		var found []string
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
				found = append(found, strings.Trim(v, `"`))
			}
		}
		return found
	}
	// The default values and the uninstall hook's path (bindings).
	for _, args := range [][]string{nil, {"-f", filepath.Join(root, "deploy/helm/examples/values-haproxy.yaml")}} {
		got := images(args...)
		if len(got) < 2 {
			t.Fatalf("helm template %v: images %q, want the controller's and the proxy's at least", args, got)
		}
		for _, img := range got {
			if img != "ghcr.io/sluice-dev/sluice:"+version {
				t.Errorf("helm template %v: image %q, want the release's tag %s", args, img, version)
			}
		}
	}
	for _, img := range images("--set", "image.tag=custom") {
		if !strings.HasSuffix(img, ":custom") {
			t.Errorf("image.tag=custom: image %q", img)
		}
	}

	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pkg)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if want := hex.EncodeToString(sum[:]) + "  sluice-" + version + ".tgz\n"; string(sums) != want {
		t.Errorf("SHA256SUMS = %q, want %q", sums, want)
	}
}

// TestReleaseRefusesBadVersions: only semantic versions make a release.
func TestReleaseRefusesBadVersions(t *testing.T) {
	for _, v := range []string{"", "v0.2.0", "0.2", "0.2.0.1", "01.2.3", "0.2.0-", "latest"} {
		cmd := exec.Command(filepath.Join(root, "scripts/release.sh"))
		cmd.Env = append(os.Environ(), "VERSION="+v, "SLUICE_RELEASE_PARTS=chart", "DIST="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "semantic version") {
			t.Errorf("VERSION=%q: %v\n%s", v, err, out)
		}
	}
}
