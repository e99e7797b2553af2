//go:build integration || e2e

package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestClaimSlotCleansStale leaves behind what a crashed run leaves (a
// network namespace, a link, a recorded process) in a free slot and checks
// that claiming a slot removes all of it, and that two live claims get
// different slots.
func TestClaimSlotCleansStale(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const prefix = "slct"
	stale := prefix + "2"
	t.Cleanup(func() {
		_ = ipCmd("netns", "del", stale+"-stale")
		_ = ipCmd("link", "del", stale+"-x")
	})
	if err := ipBatch(
		[]string{"netns", "add", stale + "-stale"},
		[]string{"link", "add", stale + "-x", "type", "bridge"},
	); err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "300")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	start, err := procStartTime(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	pids := filepath.Join(runDir, stale, "pids")
	if err := os.MkdirAll(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pids, "sleep.pid"), fmt.Appendf(nil, "%d %d\n", sleep.Process.Pid, start), 0o644); err != nil {
		t.Fatal(err)
	}

	logf := func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) }
	a, err := claimSlot(prefix, logf)
	if err != nil {
		t.Fatal(err)
	}
	defer a.release()
	b, err := claimSlot(prefix, logf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.release()
	if a.name == b.name {
		t.Errorf("two live claims share slot %s", a.name)
	}
	if alive(sleep.Process.Pid, start) {
		t.Error("recorded process of the stale slot still runs")
	}
	if slices.Contains(listNetns(), stale+"-stale") {
		t.Error("stale network namespace not removed")
	}
	if slices.Contains(listLinks(), stale+"-x") {
		t.Error("stale link not removed")
	}
	if _, err := os.Stat(filepath.Join(runDir, stale)); err == nil {
		t.Error("stale slot state not removed")
	}
}
