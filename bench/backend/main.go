// Command backend is the upstream every proxy in `make bench` forwards to: a
// minimal HTTP/1.1 server answering every request with the same fixed
// response (100-byte body by default) on keep-alive connections. It parses
// only what it must (request line, Content-Length, Connection) and writes a
// canned response with one write, so it costs the shared load core as little
// as possible and the benchmark measures the proxy, not the application.
//
// Data flow: load generator → proxy under test → backend (here).
//
//	backend --listen 127.0.0.1:24080 --size 100
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:24080", "address to listen on (loopback only)")
	size := flag.Int("size", 100, "response body size in bytes")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*listen, *size, log); err != nil {
		log.Error("backend failed", "error", err)
		os.Exit(1)
	}
}

func run(listen string, size int, log *slog.Logger) error {
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
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	resp := response(size)
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("accepting: %w", err)
		}
		go func() {
			if err := serve(c, resp); err != nil && !errors.Is(err, io.EOF) {
				log.Debug("connection ended", "error", err)
			}
		}()
	}
}

// response is the canned answer: status line, headers and body.
func response(size int) []byte {
	body := append(bytes.Repeat([]byte("x"), size-1), '\n')
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	return append([]byte(head), body...)
}

// serve answers requests on c until the client closes it or asks to.
func serve(c net.Conn, resp []byte) error {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	for {
		keepAlive, err := readRequest(br)
		if err != nil {
			return err
		}
		if _, err := c.Write(resp); err != nil {
			return fmt.Errorf("writing response: %w", err)
		}
		if !keepAlive {
			return nil
		}
	}
}

// readRequest consumes one request (head and a Content-Length body) and
// reports whether the connection stays open afterwards.
func readRequest(br *bufio.Reader) (keepAlive bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return false, err
	}
	keepAlive = !bytes.Contains(line, []byte("HTTP/1.0"))
	var length int64
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return false, fmt.Errorf("reading request header: %w", err)
		}
		if len(line) <= 2 { // "\r\n" ends the head
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return false, errors.New("chunked request bodies are not supported")
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keepAlive = false
			} else if bytes.EqualFold(value, []byte("keep-alive")) {
				keepAlive = true
			}
		}
	}
	if length > 0 {
		if _, err := io.CopyN(io.Discard, br, length); err != nil {
			return false, fmt.Errorf("reading request body: %w", err)
		}
	}
	return keepAlive, nil
}
