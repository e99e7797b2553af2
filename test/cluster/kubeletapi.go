package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// kubeletPort is where each node serves the kubelet API (the real
// kubelet's default), on its InternalIP inside its network namespace; the
// Node's status.daemonEndpoints.kubeletEndpoint says so to the API server.
const kubeletPort = 10250

// followPoll is how often a followed log is read for new lines.
const followPoll = 100 * time.Millisecond

// serveAPI starts, for every node, the part of the kubelet API that
// kubectl reaches through the API server: /containerLogs (kubectl logs,
// with follow, tailLines, timestamps, previous, limitBytes, sinceSeconds
// and sinceTime). Each server listens in the node's network namespace with a certificate of
// the cluster CA for the node's address, and answers only the API
// server's client certificate. They stop when ctx ends.
func (k *kubelet) serveAPI(ctx context.Context) {
	if k.pki == nil {
		return
	}
	for _, spec := range k.nodes {
		nn := k.net.nodes[spec.Name]
		if err := k.serveNode(ctx, spec.Name, nn); err != nil {
			// kubectl logs then fails for this node; pods still run.
			k.log.Warn("kubelet API not served", "node", spec.Name, "error", err)
		}
	}
}

func (k *kubelet) serveNode(ctx context.Context, node string, nn *nodeNet) error {
	certPEM, keyPEM, err := k.pki.issue("system:node:"+node, []net.IP{nn.ip.AsSlice()}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	clients := x509.NewCertPool()
	clients.AddCert(k.pki.ca)
	l, err := listenInNetns(nn.netns, net.JoinHostPort(nn.ip.String(), strconv.Itoa(kubeletPort)))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
		k.containerLogs(ctx, w, r)
	})
	srv := &http.Server{
		Handler: authorized(mux),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clients,
			MinVersion:   tls.VersionTLS12,
		},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	k.wg.Add(2)
	go func() {
		defer k.wg.Done()
		if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			k.log.Warn("kubelet API stopped", "node", node, "error", err)
		}
	}()
	go func() {
		defer k.wg.Done()
		<-ctx.Done()
		_ = srv.Close()
	}()
	k.log.Info("serving the kubelet API", "node", node, "address", l.Addr().String())
	return nil
}

// authorized lets through only the API server's client certificate.
func authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || r.TLS.VerifiedChains[0][0].Subject.CommonName != kubeletClientCN {
			http.Error(w, "forbidden: only the API server may call the kubelet API", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// listenInNetns opens a TCP listener inside the named network namespace
// (the socket stays in it). It switches a locked OS thread into the
// namespace and back; a thread that cannot switch back is not reused
// (its goroutine ends locked, so the runtime discards it).
func listenInNetns(netns, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("opening this thread's network namespace: %w", err)}
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/run/netns", netns))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("opening network namespace %s: %w", netns, err)}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("entering network namespace %s: %w", netns, err)}
			return
		}
		l, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it ends with this goroutine.
			if l != nil {
				l.Close()
			}
			ch <- result{err: fmt.Errorf("leaving network namespace %s: %w", netns, err)}
			return
		}
		runtime.UnlockOSThread()
		if lerr != nil {
			lerr = fmt.Errorf("listening on %s in %s: %w", addr, netns, lerr)
		}
		ch <- result{l, lerr}
	}()
	r := <-ch
	return r.l, r.err
}

// logRun is one run of a container in its log file: the file holds every
// run, each after a line "==== <RFC3339Nano> starting <argv>" (startProcess).
type logRun struct {
	start time.Time
	data  []byte // the run's output, marker excluded
}

// splitRuns cuts a container's log file into its runs.
func splitRuns(b []byte) []logRun {
	var runs []logRun
	cur := -1
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i+1]
		}
		b = b[len(line):]
		if t, ok := runMarker(line); ok {
			runs = append(runs, logRun{start: t})
			cur = len(runs) - 1
			continue
		}
		if cur < 0 { // output before any marker: a run of unknown start
			runs = append(runs, logRun{})
			cur = 0
		}
		runs[cur].data = append(runs[cur].data, line...)
	}
	return runs
}

// runMarker parses startProcess's marker line.
func runMarker(line []byte) (time.Time, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("==== "))
	if !ok {
		return time.Time{}, false
	}
	ts, rest, ok := bytes.Cut(rest, []byte(" "))
	if !ok || !bytes.HasPrefix(rest, []byte("starting ")) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	return t, err == nil
}

// logRequest is the query of a /containerLogs call.
type logRequest struct {
	follow, previous, timestamps bool
	tail                         int       // -1: all
	limit                        int64     // 0: none
	since                        time.Time // zero: from the run's start
}

// parseLogRequest reads the query as the kubelet does: sinceSeconds counts
// back from now, sinceTime is RFC 3339 (the API server allows only one).
func parseLogRequest(r *http.Request, now time.Time) (logRequest, error) {
	q := r.URL.Query()
	lr := logRequest{tail: -1}
	var err error
	boolean := func(name string) bool {
		v := q.Get(name)
		if v == "" {
			return false
		}
		b, perr := strconv.ParseBool(v)
		if perr != nil && err == nil {
			err = fmt.Errorf("%s: %w", name, perr)
		}
		return b
	}
	lr.follow, lr.previous, lr.timestamps = boolean("follow"), boolean("previous"), boolean("timestamps")
	secs, at := q.Get("sinceSeconds"), q.Get("sinceTime")
	switch {
	case secs != "" && at != "":
		return lr, errors.New("at most one of sinceSeconds and sinceTime may be given")
	case secs != "":
		n, perr := strconv.ParseInt(secs, 10, 64)
		if perr != nil || n <= 0 || n > math.MaxInt64/int64(time.Second) {
			return lr, fmt.Errorf("sinceSeconds: %q is not a positive count of seconds", secs)
		}
		lr.since = now.Add(-time.Duration(n) * time.Second)
	case at != "":
		t, perr := time.Parse(time.RFC3339Nano, at)
		if perr != nil {
			return lr, fmt.Errorf("sinceTime: %q is not an RFC 3339 time", at)
		}
		lr.since = t
	}
	if v := q.Get("tailLines"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 {
			return lr, fmt.Errorf("tailLines: %q is not a count", v)
		}
		lr.tail = n
	}
	if v := q.Get("limitBytes"); v != "" {
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n <= 0 {
			return lr, fmt.Errorf("limitBytes: %q is not a positive count", v)
		}
		lr.limit = n
	}
	return lr, err
}

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}.
// As the kubelet does, tailLines picks the run's last lines, of which
// those older than since are left out, and limitBytes ends the stream.
// Each line has the time the process kubelet read it (logfile.go).
func (k *kubelet) containerLogs(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	ns, pod, name := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	lr, err := parseLogRequest(r, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	dir, proc := k.podLogs(ns, pod, name)
	if dir == "" {
		http.Error(w, fmt.Sprintf("pod %s/%s has not run on this node", ns, pod), http.StatusNotFound)
		return
	}
	path := filepath.Join(dir, name+".log")
	b, err := os.ReadFile(path)
	if err != nil {
		http.Error(w, fmt.Sprintf("container %q of pod %s/%s has no log yet", name, ns, pod), http.StatusNotFound)
		return
	}
	live := proc != nil && !proc.exited()
	if live { // an entry being written is read by follow once complete
		b = b[:bytes.LastIndexByte(b, '\n')+1]
	}
	offset := int64(len(b))
	runs := splitRuns(b)
	var run logRun
	switch {
	case lr.previous && len(runs) < 2:
		http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", name, pod), http.StatusBadRequest)
		return
	case lr.previous:
		run = runs[len(runs)-2]
	case len(runs) > 0:
		run = runs[len(runs)-1]
	}
	out := &logWriter{w: w, limit: lr.limit, timestamps: lr.timestamps, since: lr.since}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	asm := &lineAssembler{legacy: run.start}
	lines := runLines(asm, run.data)
	following := lr.follow && !lr.previous && proc != nil
	if !live || lr.previous {
		if l, ok := asm.flush(); ok { // the run is over: its last line too
			lines = append(lines, l)
		}
	}
	if lr.tail >= 0 && len(lines) > lr.tail {
		lines = lines[len(lines)-lr.tail:]
	}
	for _, l := range lines {
		if !out.line(l) {
			return
		}
	}
	out.flush()
	if !following {
		return
	}
	asm.legacy = time.Time{} // an unstamped followed line: the time it is read
	k.follow(ctx, r.Context(), path, offset, proc, asm, out)
}

// podLogs returns the folder of a pod's logs on this kubelet (the live
// pod's, else the latest one's) and the container's latest process, nil
// when the pod no longer runs here.
func (k *kubelet) podLogs(ns, pod, container string) (string, *process) {
	k.mu.Lock()
	var w *podWorker
	for _, cand := range k.workers {
		if cand.ns == ns && cand.nm == pod {
			w = cand
		}
	}
	k.mu.Unlock()
	if w != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.dir, w.procs[container]
	}
	matches, _ := filepath.Glob(filepath.Join(k.podsDir, ns+"_"+pod+"_*"))
	latest, latestAt := "", time.Time{}
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && (latest == "" || st.ModTime().After(latestAt)) {
			latest, latestAt = m, st.ModTime()
		}
	}
	return latest, nil
}

// follow writes the lines appended to path after offset until the run of
// proc has ended and its output is read, the container restarts (a new
// run's marker), the client goes, or the kubelet stops.
func (k *kubelet) follow(kctx, rctx context.Context, path string, offset int64, proc *process, asm *lineAssembler, out *logWriter) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return
	}
	rd := bufio.NewReader(f)
	var partial []byte
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		ended := proc.exited() // before reading: what it wrote by now is read below
		for {
			chunk, err := rd.ReadBytes('\n')
			partial = append(partial, chunk...)
			if err != nil {
				break // EOF: the rest of the line comes later
			}
			if _, ok := runMarker(partial); ok {
				return // the container restarted: this run is over
			}
			l, ok := asm.add(partial)
			partial = nil
			if ok && !out.line(l) {
				return
			}
		}
		out.flush()
		if ended {
			if len(partial) > 0 {
				if l, ok := asm.add(partial); ok {
					out.line(l)
				}
			}
			if l, ok := asm.flush(); ok {
				out.line(l)
			}
			out.flush()
			return
		}
		select {
		case <-kctx.Done():
			return
		case <-rctx.Done():
			return
		case <-tick.C:
		}
	}
}

// splitLines cuts b into lines, each with its newline (the last may lack
// one).
func splitLines(b []byte) [][]byte {
	var lines [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			lines = append(lines, b)
			break
		}
		lines = append(lines, b[:i+1])
		b = b[i+1:]
	}
	return lines
}

// logWriter writes log lines to the client, those since since, with
// timestamps if asked, until limitBytes.
type logWriter struct {
	w          http.ResponseWriter
	limit      int64
	written    int64
	timestamps bool
	since      time.Time
}

// line writes one line (or leaves it out if older than since); false once
// the client is gone or the limit is reached.
func (o *logWriter) line(ll logLine) bool {
	if ll.at.Before(o.since) {
		return true
	}
	l := ll.text
	if o.timestamps {
		l = append(ll.at.UTC().AppendFormat(nil, time.RFC3339Nano), ' ')
		l = append(l, ll.text...)
	}
	if o.limit > 0 {
		room := o.limit - o.written
		if room <= 0 {
			return false
		}
		l = l[:min(int64(len(l)), room)]
	}
	n, err := o.w.Write(l)
	o.written += int64(n)
	return err == nil && (o.limit == 0 || o.written < o.limit)
}

func (o *logWriter) flush() {
	if f, ok := o.w.(http.Flusher); ok {
		f.Flush()
	}
}
