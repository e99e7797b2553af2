//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sluice.dev/sluice/test/testenv"
)

// binaries are built once per test binary by TestMain and only read after.
type binaries struct {
	sluice, echo string
}

var bin binaries

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating build dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = binaries{sluice: filepath.Join(dir, "sluice"), echo: filepath.Join(dir, "echo")}
	build := map[string]string{"sluice.dev/sluice/cmd/sluice": bin.sluice, "sluice.dev/sluice/test/echo": bin.echo}
	// SLUICE_BIN names a sluice binary built elsewhere (e.g. with -race).
	if p := os.Getenv("SLUICE_BIN"); p != "" {
		bin.sluice = p
		delete(build, "sluice.dev/sluice/cmd/sluice")
	}
	for pkg, out := range build {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", pkg, err)
			return 1
		}
	}
	if _, err := testenv.HAProxyBin(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
