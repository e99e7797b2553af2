//go:build integration

package integration

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/test/testenv"
)

// logDir is where a test's process logs go: SLUICE_TEST_LOGS/<test name>
// when that variable is set (kept after the run), otherwise a temp dir that
// outlives the processes (t.TempDir's removal runs after their cleanups).
func logDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "logs")
	if keep := os.Getenv("SLUICE_TEST_LOGS"); keep != "" {
		d = filepath.Join(keep, t.Name())
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatalf("creating log dir: %v", err)
	}
	return d
}

// start runs path with args, stdout and stderr going to dir/name.log
// (testenv.Start: killed by PID when the test ends, the log's end shown if
// it failed).
func start(t *testing.T, dir, name, path string, args ...string) *testenv.Process {
	t.Helper()
	// A proxy that finds POD_NAME would watch a Pod through an API server;
	// SLUICE_ variables of the test run (SLUICE_KUBECONFIG) would be read
	// as flags.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "POD_NAME=") && !strings.HasPrefix(kv, "POD_NAMESPACE=") && !strings.HasPrefix(kv, "SLUICE_") {
			env = append(env, kv)
		}
	}
	return testenv.Start(t, testenv.Spec{Name: name, Path: path, Args: args, LogDir: dir, Env: env})
}

// waitHTTP polls url until it answers status want, or fails the test.
func waitHTTP(t *testing.T, url string, want int, timeout time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			err = errors.New(resp.Status)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("waiting for %s to answer %d: %v", url, want, last)
}

// report prints a test's one-line summary both to the test log and to
// stdout, so it shows without -v too.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	fmt.Println(line)
}
