// Command backend is the upstream every proxy in `make bench` forwards to: a
// minimal HTTP/1.1 server answering every request with a fixed body (100
// bytes by default) on keep-alive connections. It stands in for a pod so the
// benchmark measures the proxy, not the application.
//
// Data flow: load generator → proxy under test → backend (here).
//
//	backend --listen 127.0.0.1:24080 --size 100
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:24080", "address to listen on (loopback only)")
	size := flag.Int("size", 100, "response body size in bytes")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*listen, *size); err != nil {
		log.Error("backend failed", "error", err)
		os.Exit(1)
	}
}

func run(listen string, size int) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("parsing --listen: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %q: only loopback addresses are allowed", listen)
	}
	if size < 1 {
		return fmt.Errorf("--size must be at least 1, not %d", size)
	}
	body := bytes.Repeat([]byte("x"), size-1)
	body = append(body, '\n')
	length := strconv.Itoa(len(body))
	srv := &http.Server{
		Addr: listen,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h["Content-Type"] = []string{"text/plain"}
			h["Content-Length"] = []string{length}
			w.Write(body)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       10 * time.Minute,
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	return srv.Serve(ln)
}
