//go:build image

// Package image tests the sluice container image that `make image` builds
// (scripts/image.sh: buildah, FROM scratch, an OCI archive in bin/): it
// runs it with podman, `version` and `proxy --manifests` serving one
// request. It sits outside the data flow. Where podman cannot run
// containers (storage, cgroups, rlimits in a sandbox), the test skips and
// says why; it never fakes a run.
//
//	go test -tags image ./test/image/   (make image-test)
package image

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/test/testenv"
)

const root = "../.."

func podman(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cache := os.Getenv("SLUICE_CACHE")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".cache/sluice")
	}
	store := []string{"--storage-driver", "vfs", "--root", filepath.Join(cache, "containers/storage"), "--runroot", filepath.Join(cache, "containers/run")}
	out, err := exec.Command("podman", append(store, args...)...).CombinedOutput()
	return string(out), err
}

func TestImage(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman not installed (scripts/install-deps.sh image)")
	}
	archive, _ := filepath.Abs(filepath.Join(root, "bin/sluice-image.tar"))
	build := exec.Command(filepath.Join(root, "scripts/image.sh"))
	build.Env = append(os.Environ(), "IMAGE=localhost/sluice:test")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}
	fi, err := os.Stat(archive)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image archive: %.1f MiB", float64(fi.Size())/(1<<20))

	out, err := podman(t, "run", "--rm", "--network", "none", "oci-archive:"+archive, "version")
	if err != nil {
		if strings.Contains(out, "OCI permission denied") || strings.Contains(out, "OCI runtime error") || strings.Contains(out, "cgroup") {
			t.Skipf("podman cannot run containers on this machine: %s", lastLine(out))
		}
		t.Fatalf("podman run version: %v\n%s", err, out)
	}
	if !strings.Contains(out, "sluice ") {
		t.Fatalf("podman run version printed %q", out)
	}

	// proxy --manifests: the example manifests route echo.localhost to
	// 127.0.0.1:9001; the container shares the host network (loopback).
	echo := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "echo-a") })}
	l, err := net.Listen("tcp", "127.0.0.1:9001")
	if err != nil {
		t.Skipf("127.0.0.1:9001 (the example manifests' endpoint) is busy: %v", err)
	}
	go func() { _ = echo.Serve(l) }()
	t.Cleanup(func() { _ = echo.Close() })
	port := testenv.FreePort(t, "127.0.0.1")
	manifests, _ := filepath.Abs(filepath.Join(root, "examples/manifests"))
	name := fmt.Sprintf("sluice-image-test-%d", os.Getpid())
	if out, err := podman(t, "run", "-d", "--name", name, "--network", "host", "-v", manifests+":/manifests:ro",
		"oci-archive:"+archive, "proxy", "--manifests", "/manifests", "--allow-loopback-endpoints", "--http-address", fmt.Sprintf("127.0.0.1:%d", port),
		"--https-address", "", "--admin-address", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t, "127.0.0.1"))); err != nil {
		t.Fatalf("podman run proxy: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = podman(t, "rm", "-f", "-t", "5", name) })
	deadline := time.Now().Add(time.Minute)
	for {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
		req.Host = "echo.localhost"
		resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			logs, _ := podman(t, "logs", name)
			t.Fatalf("no answer through the containerized proxy: %v\n%s", err, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
