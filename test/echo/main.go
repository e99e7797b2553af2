// Command echo is the small HTTP server sluice's tests, `make run` and
// benchmarks use as a backend: the local cluster maps the image name "echo"
// to it. It answers every request with its own identity and what it saw, so a
// test can tell which pod served a request.
//
//	echo --listen :8080 --name pod-a [--reuse-port]
//
// GET /healthz answers 200 until SIGTERM, then 503 for --shutdown-delay
// before the server shuts down gracefully (in-flight requests finish).
// With --close-grace D the listener closes at once on SIGTERM (new
// connections are refused) while open keep-alive connections are served
// for D more, each answer saying Connection: close, before the shutdown
// closes the idle ones: a careful server's stop, which lets the proxies
// drop the endpoint (and close their idle connections to it) before it
// closes any connection a request may be on its way to.
// GET /bytes/N answers N bytes. Any other path answers with a short text body
// "name method host path\n"; with ?json=1 a JSON document. ?delay=D (a Go
// duration, at most 10s) holds the answer for D first, so a test can keep
// requests in flight.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	listen := flag.String("listen", envOr("ECHO_LISTEN", ":8080"), "address to listen on")
	name := flag.String("name", envOr("POD_NAME", hostname()), "name reported in responses")
	shutdownDelay := flag.Duration("shutdown-delay", 0, "after SIGTERM, fail /healthz for this long before shutting down")
	closeGrace := flag.Duration("close-grace", 0, "after SIGTERM, close the listener at once but serve open connections (with Connection: close) for this long before shutting down")
	reusePort := flag.Bool("reuse-port", false, "set SO_REUSEPORT so several echo processes share --listen (hostNetwork pods on one node)")
	flag.Parse()

	var stopping atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() {
			http.Error(w, "stopping", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/bytes/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo-Name", *name)
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/bytes/"))
		if err != nil || n < 0 || n > 64<<20 {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		buf := make([]byte, min(n, 32<<10))
		for i := range buf {
			buf[i] = 'x'
		}
		for n > 0 {
			k := min(n, len(buf))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if d := r.URL.Query().Get("delay"); d != "" {
			if err := hold(r.Context(), d); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		w.Header().Set("X-Echo-Name", *name)
		if r.URL.Query().Get("json") != "" {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{
				"name": *name, "method": r.Method, "host": r.Host, "path": r.URL.Path,
				"remote": r.RemoteAddr, "headers": r.Header,
			})
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s %s %s\n", *name, r.Method, r.Host, r.URL.Path)
	})

	var closing atomic.Bool
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if closing.Load() {
			w.Header().Set("Connection", "close")
		}
		mux.ServeHTTP(w, r)
	})
	srv := &http.Server{Addr: *listen, Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	var lc net.ListenConfig
	if *reusePort {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	ln, err := lc.Listen(context.Background(), "tcp", *listen)
	if err != nil {
		slog.Error("echo failed", "error", err)
		os.Exit(1)
	}
	go func() { errc <- srv.Serve(ln) }()
	slog.Info("echo listening", "address", *listen, "name", *name)
	select {
	case err := <-errc:
		slog.Error("echo failed", "error", err)
		os.Exit(1)
	case <-ctx.Done():
	}
	stopping.Store(true)
	time.Sleep(*shutdownDelay)
	if *closeGrace > 0 {
		closing.Store(true)
		ln.Close() // Serve returns; the open connections stay
		time.Sleep(*closeGrace)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Error("echo shutdown", "error", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// maxDelay bounds ?delay=.
const maxDelay = 10 * time.Second

// hold waits for the duration d names, or until ctx ends.
func hold(ctx context.Context, d string) error {
	delay, err := time.ParseDuration(d)
	if err != nil || delay < 0 || delay > maxDelay {
		return fmt.Errorf("delay: want a duration from 0 to %s, got %q", maxDelay, d)
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}
