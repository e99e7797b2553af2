package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clock returns a now() that starts at t0 and moves one second per call.
func clock(t0 time.Time) func() time.Time {
	n := -1
	return func() time.Time { n++; return t0.Add(time.Duration(n) * time.Second) }
}

// TestStampLines: every line gets one entry with its time; a line longer
// than maxLogEntry is split into P entries and read back whole; output
// ending without a newline is a line.
func TestStampLines(t *testing.T) {
	long := strings.Repeat("x", maxLogEntry+10)
	in := "one\n\n" + long + "\nlast"
	var file strings.Builder
	t0 := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	if err := stampLines(strings.NewReader(in), &file, clock(t0)); err != nil {
		t.Fatal(err)
	}
	entries := splitLines([]byte(file.String()))
	if len(entries) != 5 {
		t.Fatalf("%d entries, want 5 (one, empty, two pieces, last): %.200q", len(entries), file.String())
	}
	if got, want := string(entries[0]), "2026-11-27T01:00:00Z F one\n"; got != want {
		t.Errorf("first entry %q, want %q", got, want)
	}
	if got := string(entries[2][:23]); got != "2026-11-27T01:00:02Z P " {
		t.Errorf("a long line's first piece %q", got)
	}
	var a lineAssembler
	lines := runLines(&a, []byte(file.String()))
	var got strings.Builder
	for _, l := range lines {
		got.Write(l.text)
	}
	if got.String() != in+"\n" {
		t.Errorf("read back %.80q..., want the input with a final newline", got.String())
	}
	if len(lines) != 4 || !lines[2].at.Equal(t0.Add(2*time.Second)) {
		t.Errorf("%d lines; the long one at %v, want its first piece's time", len(lines), lines[2].at)
	}
	for _, bad := range []string{"", "no stamp\n", "2026-11-27T01:00:00Z X y\n", "2026-11-27T01:00:00Z F", "yesterday F x\n"} {
		if _, _, _, ok := parseEntry([]byte(bad)); ok {
			t.Errorf("%q parsed as an entry", bad)
		}
	}
}

// stamped is a log file of two runs whose lines are stamped a second apart
// from 01:00:00 (first run) and 02:00:00 (second run).
func stamped(lines1, lines2 []string) string {
	var b strings.Builder
	for i, run := range [][]string{lines1, lines2} {
		t0 := time.Date(2026, 11, 27, 1+i, 0, 0, 0, time.UTC)
		fmt.Fprintf(&b, "==== %s starting /bin/app\n", t0.Add(-time.Second).Format(time.RFC3339Nano))
		_ = stampLines(strings.NewReader(strings.Join(run, "\n")+"\n"), &b, clock(t0))
	}
	return b.String()
}

// TestContainerLogsSince: sinceTime and sinceSeconds leave out older lines,
// after tailLines and before limitBytes, as the kubelet does; the stamps
// are stripped unless timestamps is asked.
func TestContainerLogsSince(t *testing.T) {
	k, _ := logKubelet(t, stamped([]string{"a0", "a1", "a2"}, []string{"b0", "b1", "b2", "b3"}), nil)
	for _, c := range []struct {
		query, want string
		code        int
	}{
		{"", "b0\nb1\nb2\nb3\n", 200},
		{"timestamps=true&tailLines=2", "2026-11-27T02:00:02Z b2\n2026-11-27T02:00:03Z b3\n", 200},
		{"sinceTime=2026-11-27T02:00:02Z", "b2\nb3\n", 200},
		{"sinceTime=2026-11-27T02:00:01.5Z", "b2\nb3\n", 200},
		{"sinceTime=2026-11-27T03:00:00%2B01:00", "b0\nb1\nb2\nb3\n", 200}, // an offset
		{"sinceTime=2026-11-27T02:00:01Z&tailLines=2", "b2\nb3\n", 200},
		{"sinceTime=2026-11-27T02:00:02Z&tailLines=3", "b2\nb3\n", 200},
		{"sinceTime=2026-11-27T02:00:02Z&tailLines=1", "b3\n", 200},
		{"sinceTime=2026-11-27T02:00:01Z&limitBytes=4", "b1\nb", 200},
		{"sinceTime=2026-11-27T01:00:01Z&previous=true", "a1\na2\n", 200},
		{"sinceTime=2026-11-27T01:00:01Z&previous=true&timestamps=true", "2026-11-27T01:00:01Z a1\n2026-11-27T01:00:02Z a2\n", 200},
		{"sinceTime=2026-11-28T00:00:00Z", "", 200},
		{"sinceSeconds=1", "", 200}, // the lines are hours old
		// since now-N, N rounded up: after 02:00:01, not after 02:00:02
		{"sinceSeconds=" + strconv.Itoa(int(time.Since(time.Date(2026, 11, 27, 2, 0, 2, 0, time.UTC)).Seconds())+1), "b2\nb3\n", 200},
		{"sinceSeconds=0", "", 400},
		{"sinceSeconds=-5", "", 400},
		{"sinceSeconds=99999999999999", "", 400},
		{"sinceTime=yesterday", "", 400},
		{"sinceTime=2026-11-27T02:00:00Z&sinceSeconds=5", "", 400},
	} {
		code, body := getLogs(t, k, c.query)
		if code != c.code || (c.code == 200 && body != c.want) {
			t.Errorf("?%s: %d %q, want %d %q", c.query, code, body, c.code, c.want)
		}
	}
}

// TestContainerLogsFollowStamped: a followed stream leaves out lines older
// than sinceTime, joins a long line's pieces, and shows the stamps.
func TestContainerLogsFollowStamped(t *testing.T) {
	proc := &process{done: make(chan struct{})}
	k, path := logKubelet(t, stamped([]string{"a0"}, []string{"b0", "b1"}), proc)
	next, more := followLogs(t, k, "follow=true&timestamps=true&sinceTime="+url.QueryEscape("2026-11-27T02:00:01Z"))
	if got := next(); got != "2026-11-27T02:00:01Z b1" {
		t.Fatalf("first line %q, want b1 (b0 is older than sinceTime)", got)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, entry := range []string{
		"2026-11-27T02:00:00.5Z F old\n", // older than sinceTime: left out
		"2026-11-27T02:00:05Z P new \n",
		"2026-11-27T02:00:06Z F line\n",
		"2026-11-27T02:00:07Z P unended\n",
	} {
		if _, err := f.WriteString(entry); err != nil {
			t.Fatal(err)
		}
	}
	if got := next(); got != "2026-11-27T02:00:05Z new line" {
		t.Fatalf("followed line %q", got)
	}
	close(proc.done) // the run ends: its unended line is sent, then the stream ends
	if got := next(); got != "2026-11-27T02:00:07Z unended" {
		t.Fatalf("last line %q", got)
	}
	if l, ok := more(); ok {
		t.Fatalf("line after the run ended: %q", l)
	}
}

// TestStartProcessStamps: a stamped process's output lands in its log as
// entries, all of it by the time done is closed, and what its process
// group left behind is killed.
func TestStartProcessStamps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	before := time.Now().Add(-time.Second)
	p, err := startProcess(procSpec{name: "app", path: "/bin/sh", args: []string{"-c", "sleep 60 & echo $!; echo one; printf two"}, logPath: path, stamp: true})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
		t.Fatal("the process's exit was not seen (its background child held the output open)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	runs := splitRuns(b)
	if len(runs) != 1 || runs[0].start.Before(before) {
		t.Fatalf("runs %+v, want one started now", runs)
	}
	var a lineAssembler
	lines := runLines(&a, runs[0].data)
	if len(lines) != 3 || string(lines[1].text) != "one\n" || string(lines[2].text) != "two\n" {
		t.Fatalf("lines %q, want the pid, one, two", b)
	}
	for _, l := range lines {
		if l.at.Before(before) || l.at.After(time.Now()) {
			t.Errorf("line %q stamped %v, not when it was written", l.text, l.at)
		}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(lines[0].text)))
	if err != nil {
		t.Fatal(err)
	}
	// Its end closed the pipe; /proc may show it a little longer while it
	// finishes exiting (it would stay 60 s had it been spared).
	deadline := time.Now().Add(20 * time.Second)
	for _, err := procStartTime(pid); err == nil; _, err = procStartTime(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the background child %d outlived its container", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestContainerLogsLiveRun: while the container runs, an entry being
// written (no newline yet) and a long line not ended are left for later;
// the previous run's unended line is shown, as that run is over.
func TestContainerLogsLiveRun(t *testing.T) {
	text := "==== 2026-11-27T00:59:59Z starting /bin/app\n" +
		"2026-11-27T01:00:00Z F a0\n2026-11-27T01:00:01Z P cut\n" +
		"==== 2026-11-27T01:59:59Z starting /bin/app\n" +
		"2026-11-27T02:00:00Z F b0\n2026-11-27T02:00:01Z P long \n2026-11-27T02:00:02Z F li"
	k, _ := logKubelet(t, text, &process{done: make(chan struct{})})
	for _, c := range []struct{ query, want string }{
		{"", "b0\n"},
		{"previous=true", "a0\ncut\n"},
	} {
		if code, body := getLogs(t, k, c.query); code != 200 || body != c.want {
			t.Errorf("?%s: %d %q, want %q", c.query, code, body, c.want)
		}
	}
}

// FuzzLogEntries: whatever a container writes comes back line for line
// from its stamped entries (a final line without a newline gets one), and
// whatever a log file holds is served without a panic.
func FuzzLogEntries(f *testing.F) {
	f.Add([]byte("one\ntwo\n"), "")
	f.Add([]byte("no newline"), "tailLines=1&timestamps=true")
	f.Add([]byte(strings.Repeat("x", maxLogEntry+1)+"\n\n"), "sinceTime=2026-11-27T01:00:00Z")
	f.Add([]byte("2026-11-27T01:00:00Z P a\n==== x starting\n"), "limitBytes=3&previous=true")
	f.Fuzz(func(t *testing.T, out []byte, query string) {
		var file strings.Builder
		if err := stampLines(strings.NewReader(string(out)), &file, clock(time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC))); err != nil {
			t.Fatal(err)
		}
		var a lineAssembler
		var got []byte
		for _, l := range runLines(&a, []byte(file.String())) {
			got = append(got, l.text...)
		}
		if l, ok := a.flush(); ok {
			got = append(got, l.text...)
		}
		want := string(out)
		if want != "" && !strings.HasSuffix(want, "\n") {
			want += "\n"
		}
		if string(got) != want {
			t.Fatalf("read back %q, want %q", got, want)
		}
		// The raw output as a log file (markers, entries and garbage).
		k, _ := logKubelet(t, string(out), nil)
		req := httptest.NewRequest(http.MethodGet, "/containerLogs/ns/p/app", nil)
		req.URL.RawQuery = query
		req.SetPathValue("namespace", "ns")
		req.SetPathValue("pod", "p")
		req.SetPathValue("container", "app")
		k.containerLogs(context.Background(), httptest.NewRecorder(), req)
	})
}
