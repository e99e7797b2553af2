//go:build integration || e2e

package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestClaimSlotCleansStale leaves behind what a crashed run with another
// prefix leaves (a network namespace, a link, a recorded process) in a free
// slot and checks that claiming slots removes all of it, and that two live
// claims get different slots.
func TestClaimSlotCleansStale(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	// Find a free slot and hold it while faking the crashed run's state.
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	k := -1
	var lock *os.File
	for i := maxSlots - 1; i >= 0 && k < 0; i-- {
		f, err := os.OpenFile(filepath.Join(runDir, fmt.Sprintf("slot-%d.lock", i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			k, lock = i, f
		} else {
			f.Close()
		}
	}
	if k < 0 {
		t.Skip("no free slot")
	}
	stale := fmt.Sprintf("slct%d", k)
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
	dir := filepath.Join(runDir, fmt.Sprintf("slot-%d", k))
	if err := os.MkdirAll(filepath.Join(dir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prefix"), []byte("slct\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids", "sleep.pid"), fmt.Appendf(nil, "%d %d\n", sleep.Process.Pid, start), 0o644); err != nil {
		t.Fatal(err)
	}
	lock.Close() // the "crash"

	logf := func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) }
	a, err := claimSlot("slcu", logf)
	if err != nil {
		t.Fatal(err)
	}
	defer a.release()
	b, err := claimSlot("slcu", logf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.release()
	if a.index == b.index {
		t.Errorf("two live claims share slot %d", a.index)
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
	if a.index != k && b.index != k {
		if _, err := os.Stat(dir); err == nil {
			t.Error("stale slot state not removed")
		}
	}
}
