package manifests

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice.dev/sluice/internal/translate"
)

// waitTimeout bounds waits for the poller; a deadlock guard, not a latency
// assertion.
const waitTimeout = 30 * time.Second

func svcDoc(name string, port int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec: {ports: [{port: %d}]}\n", name, port)
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testLogger logs into the test output; lines written after the test ended
// are dropped (t.Log would panic).
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func newSource(t *testing.T, dir string) *Source {
	t.Helper()
	s, err := New(Options{Dir: dir, Interval: 10 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// settle polls until a pending change is loaded: a changed file is read on
// the second poll that sees it unchanged. It reports whether either poll
// changed the objects.
func settle(s *Source) bool {
	a := s.poll(false)
	b := s.poll(false)
	return a || b
}

func serviceNames(in translate.Input) string {
	var n []string
	for _, s := range in.Services {
		n = append(n, fmt.Sprintf("%s:%d", s.Name, s.Spec.Ports[0].Port))
	}
	return strings.Join(n, ",")
}

func TestNewWithoutDir(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without Dir: no error")
	}
}

func TestRunMissingDir(t *testing.T) {
	s := newSource(t, filepath.Join(t.TempDir(), "missing"))
	if err := s.Run(context.Background(), func() {}); err == nil {
		t.Fatal("Run on a missing directory: no error")
	}
	file := filepath.Join(t.TempDir(), "file.yaml")
	write(t, file, "")
	if err := newSource(t, file).Run(context.Background(), func() {}); err == nil {
		t.Fatal("Run on a file: no error")
	}
}

// run runs s until the test ends and returns its notifications (one
// pending at most, as the rebuild loop coalesces them).
func run(t *testing.T, s *Source) <-chan struct{} {
	t.Helper()
	notes := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, func() {
			select {
			case notes <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return notes
}

// TestRun exercises the real polling loop: first load, add, change, remove.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), svcDoc("a", 1))
	s := newSource(t, dir)
	if s.Synced() {
		t.Fatal("Synced before Run")
	}
	notes := run(t, s)
	wait := func(what, want string) {
		t.Helper()
		deadline := time.After(waitTimeout)
		for {
			select {
			case <-notes:
				if got := serviceNames(s.Snapshot()); got == want {
					return
				}
			case <-deadline:
				t.Fatalf("%s: services = %q; want %q", what, serviceNames(s.Snapshot()), want)
			}
		}
	}
	wait("first load", "a:1")
	if !s.Synced() {
		t.Error("notified before Synced")
	}
	write(t, filepath.Join(dir, "b.yml"), svcDoc("b", 2))
	wait("add", "a:1,b:2")
	write(t, filepath.Join(dir, "a.yaml"), svcDoc("a", 3))
	wait("change", "a:3,b:2")
	if err := os.Remove(filepath.Join(dir, "b.yml")); err != nil {
		t.Fatal(err)
	}
	wait("remove", "a:3")
	if err := s.Run(context.Background(), func() {}); err == nil {
		t.Error("second Run: no error")
	}
}

// TestWatchStartsPoll: on Linux a write wakes the source at once. With an
// interval of an hour, only the watch can start the poll that sees the new
// file (and leaves it waiting to be read, as every first sight does).
func TestWatchStartsPoll(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("watching is Linux only")
	}
	if w, err := newWatcher(); err != nil {
		t.Skipf("this machine cannot watch files: %v", err) // e.g. out of inotify instances
	} else {
		w.close()
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), svcDoc("a", 1))
	s, err := New(Options{Dir: dir, Interval: time.Hour, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	polls := make(chan bool, 100)
	s.polled = func(settling bool) {
		select {
		case polls <- settling:
		default:
		}
	}
	select {
	case <-run(t, s):
	case <-time.After(waitTimeout):
		t.Fatal("no first load")
	}
	// A write right after a poll is left to the tick (minWakeGap), so
	// write until a poll comes.
	deadline := time.After(waitTimeout)
	for i := 0; ; i++ {
		write(t, filepath.Join(dir, "sub", "b.yaml"), svcDoc("b", 2+i))
		select {
		case settling := <-polls:
			if !settling {
				t.Fatal("the poll after a write left nothing waiting to be read")
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no poll after writes, with an interval of an hour")
		}
	}
}

func TestPollChanges(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	write(t, a, svcDoc("a", 1))
	s := newSource(t, dir)
	if !s.poll(true) {
		t.Fatal("first poll reported no change")
	}
	if got := serviceNames(s.Snapshot()); got != "a:1" {
		t.Fatalf("first load = %q", got)
	}
	if settle(s) {
		t.Error("nothing changed, but a poll reported a change")
	}

	// A new file is read on the second poll that sees it unchanged.
	write(t, filepath.Join(dir, "b.yaml"), svcDoc("b", 2))
	if s.poll(false) {
		t.Error("a new file was loaded on the first poll that saw it")
	}
	if !s.poll(false) {
		t.Error("a new file was not loaded on the second poll")
	}
	if got := serviceNames(s.Snapshot()); got != "a:1,b:2" {
		t.Errorf("after add = %q", got)
	}

	// Rewriting the same objects with other comments and layout is no change.
	write(t, a, "# same service\napiVersion: v1\nkind: Service\nmetadata:\n  name: a\nspec:\n  ports:\n  - port: 1\n")
	if settle(s) {
		t.Error("a formatting-only edit reported a change")
	}

	write(t, a, svcDoc("a", 5))
	if !settle(s) {
		t.Error("a content edit reported no change")
	}
	if got := serviceNames(s.Snapshot()); got != "a:5,b:2" {
		t.Errorf("after change = %q", got)
	}

	// An empty file adds no objects: no change.
	write(t, filepath.Join(dir, "empty.yaml"), "# nothing yet\n")
	if settle(s) {
		t.Error("adding an empty file reported a change")
	}

	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if !s.poll(false) {
		t.Error("removing a file was not seen on the next poll")
	}
	if got := serviceNames(s.Snapshot()); got != "b:2" {
		t.Errorf("after remove = %q", got)
	}
}

// TestPollReplaceSameSizeAndTime replaces a file by rename with content of
// the same size and the same mtime: only the inode tells.
func TestPollReplaceSameSizeAndTime(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	write(t, a, svcDoc("a", 1))
	s := newSource(t, dir)
	s.poll(true)
	fi, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".a.tmp")
	write(t, tmp, svcDoc("a", 2))
	if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, a); err != nil {
		t.Fatal(err)
	}
	if !settle(s) {
		t.Fatal("replacement not seen")
	}
	if got := serviceNames(s.Snapshot()); got != "a:2" {
		t.Errorf("after replace = %q", got)
	}
}

// TestPollHalfWritten checks a file caught mid-write is not loaded while it
// keeps changing.
func TestPollHalfWritten(t *testing.T) {
	dir := t.TempDir()
	s := newSource(t, dir)
	s.poll(true)
	a := filepath.Join(dir, "a.yaml")
	full := svcDoc("a", 1) + "---\n" + svcDoc("b", 2)
	write(t, a, full[:len(full)/2])
	if s.poll(false) {
		t.Error("half a file loaded on first sight")
	}
	write(t, a, full) // grew before the next poll
	if s.poll(false) {
		t.Error("a file that changed since the last poll was loaded")
	}
	if !s.poll(false) {
		t.Error("the settled file was not loaded")
	}
	if got := serviceNames(s.Snapshot()); got != "a:1,b:2" {
		t.Errorf("services = %q", got)
	}
}

func TestInvalidFileDoesNotBlockOthers(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), svcDoc("a", 1)+"---\nkind: [broken\n---\n"+svcDoc("c", 3))
	write(t, filepath.Join(dir, "b.yaml"), "\x00\x01 not yaml: [\n")
	write(t, filepath.Join(dir, "d.yaml"), svcDoc("d", 4))
	s := newSource(t, dir)
	s.poll(true)
	if got := serviceNames(s.Snapshot()); got != "a:1,c:3,d:4" {
		t.Errorf("services = %q; want a:1,c:3,d:4", got)
	}
	in, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "a.yaml: document 2 (line 6)") || !strings.Contains(err.Error(), "b.yaml: document 1") {
		t.Errorf("Load error = %v; want both broken documents named", err)
	}
	if got := serviceNames(in); got != "a:1,c:3,d:4" {
		t.Errorf("Load services = %q", got)
	}
}

func TestDirectoryLayout(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "top.yaml"), svcDoc("top", 1))
	write(t, filepath.Join(dir, "UPPER.YML"), svcDoc("upper", 2))
	write(t, filepath.Join(dir, "sub", "one.yaml"), svcDoc("one", 3))
	write(t, filepath.Join(dir, "sub", "deeper", "two.yaml"), svcDoc("two", 4))
	write(t, filepath.Join(dir, ".hidden.yaml"), svcDoc("hidden", 5))
	write(t, filepath.Join(dir, ".hiddendir", "h.yaml"), svcDoc("hiddendir", 6))
	write(t, filepath.Join(dir, "notes.txt"), svcDoc("txt", 7))
	// A ConfigMap volume: files are symlinks into a hidden ..data dir.
	write(t, filepath.Join(dir, "cm", "..2024_01_01", "routes.yaml"), svcDoc("cm", 8))
	if err := os.Symlink("..2024_01_01", filepath.Join(dir, "cm", "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "routes.yaml"), filepath.Join(dir, "cm", "routes.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing.yaml", filepath.Join(dir, "dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	in, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "upper:2,cm:8,one:3,top:1" // path order: UPPER.YML, cm/, sub/, top.yaml
	if got := serviceNames(in); got != want {
		t.Errorf("services = %q; want %q", got, want)
	}

	// The ConfigMap update: a new timestamped dir and an atomic ..data swap.
	s := newSource(t, dir)
	s.poll(true)
	write(t, filepath.Join(dir, "cm", "..2024_01_02", "routes.yaml"), svcDoc("cm", 9))
	if err := os.Symlink("..2024_01_02", filepath.Join(dir, "cm", "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "cm", "..data_tmp"), filepath.Join(dir, "cm", "..data")); err != nil {
		t.Fatal(err)
	}
	if !settle(s) {
		t.Fatal("ConfigMap volume update not seen")
	}
	if got := serviceNames(s.Snapshot()); !strings.Contains(got, "cm:9") {
		t.Errorf("services = %q; want cm:9", got)
	}
}

func TestDirRemovedKeepsObjects(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	write(t, filepath.Join(dir, "a.yaml"), svcDoc("a", 1))
	s := newSource(t, dir)
	s.poll(true)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if settle(s) {
		t.Error("a vanished directory reported a change")
	}
	if got := serviceNames(s.Snapshot()); got != "a:1" {
		t.Errorf("services = %q; want the last loaded a:1", got)
	}
	write(t, filepath.Join(dir, "b.yaml"), svcDoc("b", 2))
	if !settle(s) {
		t.Error("the directory coming back was not seen")
	}
	if got := serviceNames(s.Snapshot()); got != "b:2" {
		t.Errorf("services = %q; want b:2", got)
	}
}

func TestDuplicatesAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), svcDoc("web", 1))
	write(t, filepath.Join(dir, "b.yaml"), svcDoc("web", 2))
	s := newSource(t, dir)
	s.poll(true)
	if got := serviceNames(s.Snapshot()); got != "web:1" {
		t.Errorf("services = %q; want web:1 (first in path order)", got)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	in, err := Decode("x", []byte(svcDoc("a", 1)))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a.yaml")
	if err := WriteFile(path, in.Services[0]); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if serviceNames(got) != "a:1" {
		t.Errorf("services = %q", serviceNames(got))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries; want only a.yaml", len(entries))
	}
}

func hasService(in translate.Input, name string) bool {
	for _, s := range in.Services {
		if s.Name == name {
			return true
		}
	}
	return false
}

// TestPollMoveNeverDropsObject moves Service x from old.yaml to new.yaml
// in the ways people and tools do it. A new file is read two polls after
// it appears while a removal is seen at once, so without holding removals
// back the snapshot would lack x for a poll.
func TestPollMoveNeverDropsObject(t *testing.T) {
	half := svcDoc("x", 2)[:20]
	tests := []struct {
		name string
		// steps run in order; a poll follows each one.
		steps []func(dir string) error
		want  string
	}{
		{
			name: "new file written, old removed before the next poll",
			steps: []func(string) error{func(dir string) error {
				write(t, filepath.Join(dir, "new.yaml"), svcDoc("x", 2))
				return os.Remove(filepath.Join(dir, "old.yaml"))
			}},
			want: "keep:1,x:2",
		},
		{
			name: "old removed, new file written before the next poll",
			steps: []func(string) error{func(dir string) error {
				if err := os.Remove(filepath.Join(dir, "old.yaml")); err != nil {
					return err
				}
				write(t, filepath.Join(dir, "new.yaml"), svcDoc("x", 2))
				return nil
			}},
			want: "keep:1,x:2",
		},
		{
			name: "old edited to drop x a poll before the new file appears",
			steps: []func(string) error{
				func(dir string) error {
					write(t, filepath.Join(dir, "old.yaml"), svcDoc("other", 3))
					return nil
				},
				func(dir string) error {
					write(t, filepath.Join(dir, "new.yaml"), svcDoc("x", 2))
					return nil
				},
			},
			want: "keep:1,x:2,other:3",
		},
		{
			name: "new file written over several polls, old removed at the start",
			steps: []func(string) error{
				func(dir string) error {
					write(t, filepath.Join(dir, "new.yaml"), half)
					return os.Remove(filepath.Join(dir, "old.yaml"))
				},
				func(dir string) error {
					write(t, filepath.Join(dir, "new.yaml"), half+"\n")
					return nil
				},
				func(dir string) error {
					write(t, filepath.Join(dir, "new.yaml"), svcDoc("x", 2))
					return nil
				},
			},
			want: "keep:1,x:2",
		},
		{
			name: "old removed a poll after the new file appeared",
			steps: []func(string) error{
				func(dir string) error {
					write(t, filepath.Join(dir, "new.yaml"), svcDoc("x", 2))
					return nil
				},
				func(dir string) error { return os.Remove(filepath.Join(dir, "old.yaml")) },
			},
			want: "keep:1,x:2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "keep.yaml"), svcDoc("keep", 1))
			write(t, filepath.Join(dir, "old.yaml"), svcDoc("x", 1))
			s := newSource(t, dir)
			s.poll(true)
			check := func(when string) {
				t.Helper()
				if got := s.Snapshot(); !hasService(got, "x") {
					t.Errorf("%s: snapshot lacks x: services = %q", when, serviceNames(got))
				}
			}
			for i, step := range tt.steps {
				if err := step(dir); err != nil {
					t.Fatal(err)
				}
				s.poll(false)
				check(fmt.Sprintf("after step %d", i+1))
			}
			for i := range 3 {
				s.poll(false)
				check(fmt.Sprintf("poll %d after the last step", i+1))
			}
			if got := serviceNames(s.Snapshot()); got != tt.want {
				t.Errorf("settled services = %q; want %q", got, tt.want)
			}
		})
	}
}

// TestPollHeldRemovalBounded checks a file that never holds still delays a
// removal elsewhere for MaxHoldPolls polls, not for good, and that an
// unrelated settling file only delays it.
func TestPollHeldRemovalBounded(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), svcDoc("a", 1))
	write(t, filepath.Join(dir, "b.yaml"), svcDoc("b", 2))
	s := newSource(t, dir)
	s.poll(true)

	// Settles two polls after it appears: b is held for those polls only.
	write(t, filepath.Join(dir, "c.yaml"), svcDoc("c", 3))
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	if s.poll(false) {
		t.Error("a removal held back while c.yaml settles reported a change")
	}
	if !s.poll(false) {
		t.Error("c.yaml loading reported no change")
	}
	if got := serviceNames(s.Snapshot()); got != "a:1,c:3" {
		t.Errorf("after c.yaml settled = %q; want a:1,c:3", got)
	}

	// A file rewritten before every poll never settles.
	churn := filepath.Join(dir, "churn.yaml")
	if err := os.Remove(filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	polls := 0
	for ; polls < 3*MaxHoldPolls && hasService(s.Snapshot(), "c"); polls++ {
		write(t, churn, strings.Repeat("#", polls+1)+"\n"+svcDoc("churn", 9))
		s.poll(false)
	}
	if polls != MaxHoldPolls+1 {
		t.Errorf("removal applied after %d polls while churn.yaml kept changing; want %d", polls, MaxHoldPolls+1)
	}
	if got := serviceNames(s.Snapshot()); got != "a:1" {
		t.Errorf("services = %q; want a:1", got)
	}
}
