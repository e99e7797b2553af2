package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

const twoRuns = "==== 2026-11-26T23:00:00.5Z starting /bin/app\nfirst 1\nfirst 2\n" +
	"==== 2026-11-26T23:00:10Z starting /bin/app\nsecond 1\nsecond 2\nsecond 3\n"

func TestSplitRuns(t *testing.T) {
	runs := splitRuns([]byte("before\n" + twoRuns + "partial"))
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3 (output before any marker, two runs)", len(runs))
	}
	if got := string(runs[1].data); got != "first 1\nfirst 2\n" {
		t.Errorf("first run %q", got)
	}
	if got := string(runs[2].data); got != "second 1\nsecond 2\nsecond 3\npartial" {
		t.Errorf("second run %q", got)
	}
	if want := time.Date(2026, 11, 26, 23, 0, 10, 0, time.UTC); !runs[2].start.Equal(want) {
		t.Errorf("second run started %v, want %v", runs[2].start, want)
	}
	if _, ok := runMarker([]byte("==== not a time starting x\n")); ok {
		t.Error("a line that merely starts with ==== read as a marker")
	}
}

// logKubelet is a kubelet with one live pod ns/p whose container app has
// the log text and the process proc.
func logKubelet(t *testing.T, text string, proc *process) (*kubelet, string) {
	t.Helper()
	pods := t.TempDir()
	dir := filepath.Join(pods, "ns_p_12345678")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "app.log")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	k := newKubelet(kubeletOptions{log: slog.New(slog.DiscardHandler), podsDir: pods})
	w := &podWorker{k: k, ns: "ns", nm: "p", dir: dir}
	if proc != nil {
		w.procs = map[string]*process{"app": proc}
	}
	k.workers[types.UID("12345678")] = w
	return k, path
}

func getLogs(t *testing.T, k *kubelet, query string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/containerLogs/ns/p/app?"+query, nil)
	req.SetPathValue("namespace", "ns")
	req.SetPathValue("pod", "p")
	req.SetPathValue("container", "app")
	rec := httptest.NewRecorder()
	k.containerLogs(context.Background(), rec, req)
	return rec.Code, rec.Body.String()
}

func TestContainerLogs(t *testing.T) {
	k, _ := logKubelet(t, twoRuns, nil)
	for _, c := range []struct {
		query, want string
		code        int
	}{
		{"", "second 1\nsecond 2\nsecond 3\n", 200},
		{"tailLines=2", "second 2\nsecond 3\n", 200},
		{"tailLines=0", "", 200},
		{"previous=true", "first 1\nfirst 2\n", 200},
		{"previous=true&timestamps=true", "2026-11-26T23:00:00.5Z first 1\n2026-11-26T23:00:00.5Z first 2\n", 200},
		{"limitBytes=12", "second 1\nsec", 200},
		{"follow=true", "second 1\nsecond 2\nsecond 3\n", 200}, // no live process: nothing to follow
		{"tailLines=x", "", 400},
		{"sinceSeconds=60", "", 200}, // unstamped lines have their run's start, long ago
		{"sinceTime=2026-11-26T23:00:09Z", "second 1\nsecond 2\nsecond 3\n", 200},
		{"sinceTime=2026-11-26T23:00:11Z", "", 200},
	} {
		code, body := getLogs(t, k, c.query)
		if code != c.code || (c.code == 200 && body != c.want) {
			t.Errorf("?%s: %d %q, want %d %q", c.query, code, body, c.code, c.want)
		}
	}
	k1, _ := logKubelet(t, "==== 2026-11-26T23:00:00Z starting /bin/app\nonly\n", nil)
	if code, _ := getLogs(t, k1, "previous=true"); code != http.StatusBadRequest {
		t.Errorf("previous of a container that ran once: %d, want 400", code)
	}
	req := httptest.NewRequest(http.MethodGet, "/containerLogs/ns/p/other", nil)
	req.SetPathValue("namespace", "ns")
	req.SetPathValue("pod", "p")
	req.SetPathValue("container", "other")
	rec := httptest.NewRecorder()
	k.containerLogs(context.Background(), rec, req)
	if rec.Code != http.StatusNotFound {
		t.Errorf("a container without a log: %d, want 404", rec.Code)
	}
}

// TestContainerLogsFollow: lines appended while following arrive, and the
// stream ends once the run's process has exited and its output is read.
func TestContainerLogsFollow(t *testing.T) {
	proc := &process{done: make(chan struct{})}
	k, path := logKubelet(t, twoRuns, proc)
	next, more := followLogs(t, k, "follow=true&tailLines=1")
	if got := next(); got != "second 3" {
		t.Fatalf("first line %q, want the tail", got)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, l := range []string{"later 1\n", "later 2\nlater "} {
		if _, err := f.WriteString(l); err != nil {
			t.Fatal(err)
		}
		if got, want := next(), []string{"later 1", "later 2"}[i]; got != want {
			t.Fatalf("followed line %q, want %q", got, want)
		}
	}
	if _, err := f.WriteString("3\n"); err != nil {
		t.Fatal(err)
	}
	close(proc.done) // the run ends: what it wrote is sent, then the stream ends
	if got := next(); got != "later 3" {
		t.Fatalf("last line %q", got)
	}
	if l, ok := more(); ok {
		t.Fatalf("line after the run ended: %q", l)
	}
}

func chain(cn string) *tls.ConnectionState {
	return &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: cn}}}}}
}

// TestKubeletAPIAuthorized: only the API server's client certificate gets
// through.
func TestKubeletAPIAuthorized(t *testing.T) {
	h := authorized(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for _, c := range []struct {
		state *tls.ConnectionState
		want  int
	}{
		{nil, http.StatusForbidden},
		{&tls.ConnectionState{}, http.StatusForbidden},
		{chain("someone-else"), http.StatusForbidden},
		{chain(kubeletClientCN), http.StatusTeapot},
	} {
		req := httptest.NewRequest(http.MethodGet, "/containerLogs/a/b/c", nil)
		req.TLS = c.state
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want || (c.want == http.StatusForbidden && !strings.Contains(rec.Body.String(), "forbidden")) {
			t.Errorf("%v: %d, want %d", c.state, rec.Code, c.want)
		}
	}
}

// followLogs starts following k's log of ns/p/app with query and returns
// next, which reads the stream's next line (failing the test when the
// stream ends first), and more, which reads one if there is one. The
// stream closes with the test.
func followLogs(t *testing.T, k *kubelet, query string) (next func() string, more func() (string, bool)) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.SetPathValue("namespace", "ns")
		r.SetPathValue("pod", "p")
		r.SetPathValue("container", "app")
		k.containerLogs(context.Background(), w, r)
	}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/containerLogs/ns/p/app?" + query)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	more = func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return sc.Text(), true
	}
	next = func() string {
		t.Helper()
		l, ok := more()
		if !ok {
			t.Fatalf("stream ended early: %v", sc.Err())
		}
		return l
	}
	return next, more
}
