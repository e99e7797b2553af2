package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Slow and hostile HTTP/1.1 clients, for the tests of sluice proxy's client
// limits (integration TestClientLimits, e2e TestTenancy's limits-* cases).
// Each attacker reports whether the proxy closed its connection (EOF or a
// reset, read on the attacker's side); a connection still open after
// AttackerDeadline counts as not closed.

// AttackerDeadline bounds each attacker's connection: a failsafe, long
// against the limits the tests set (about a second).
const AttackerDeadline = 30 * time.Second

// DialAttacker connects to addr with the failsafe deadline set; the
// connection is closed when the test ends. nil (and a test error) if the
// dial failed.
func DialAttacker(t testing.TB, addr string) net.Conn {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Errorf("dialing %s: %v", addr, err)
		return nil
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(AttackerDeadline))
	return conn
}

// Drain reads conn to its end: the bytes read, and whether the peer
// closed it (EOF or reset); false on the failsafe deadline.
func Drain(conn net.Conn) (int64, bool) {
	n, err := io.Copy(io.Discard, conn)
	return n, err == nil || errors.Is(err, syscall.ECONNRESET)
}

// Slowloris sends a request header for host to addr a byte every 100 ms
// and never ends it, and reports whether the proxy closed the connection
// (--read-header-timeout).
func Slowloris(t testing.TB, addr, host string) bool {
	conn := DialAttacker(t, addr)
	if conn == nil {
		return false
	}
	_, _ = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: "+host+"\r\n")
	go func() {
		for _, b := range []byte("X-Slow: 1\r\nX-Slow: 2\r\nX-Slow: 3\r\nX-Slow: 4\r\n") {
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	_, closed := Drain(conn)
	return closed
}

// SlowBody sends a POST to host at addr announcing a megabyte and stops
// after ten bytes; it reports whether the proxy answered 408 and closed
// the connection (--body-idle-timeout). Another answer is a test error.
func SlowBody(t testing.TB, addr, host string) bool {
	conn := DialAttacker(t, addr)
	if conn == nil {
		return false
	}
	_, _ = io.WriteString(conn, "POST / HTTP/1.1\r\nHost: "+host+"\r\nContent-Length: 1000000\r\n\r\n0123456789")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a stalled body: %v %v, want 408", resp, err)
		return false
	}
	_, err = io.Copy(io.Discard, br)
	return err == nil || errors.Is(err, syscall.ECONNRESET)
}

// SlowReader asks host at addr for path and returns the connection
// without reading from it (nil if the dial failed). The caller waits for
// the proxy's write timeout, then judges the response with Drain: cut
// short means the proxy closed it (--write-idle-timeout). Use a path with
// more bytes than the kernel buffers hold (tens of MiB), and keep the
// default receive buffer: a tiny one makes the kernel deliver the rest,
// once read, by slow zero-window probes.
func SlowReader(t testing.TB, addr, host, path string) net.Conn {
	conn := DialAttacker(t, addr)
	if conn != nil {
		_, _ = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)
	}
	return conn
}

// IdleConn connects to addr and sends nothing; it reports whether the
// proxy closed the connection: at accept beyond --max-connections (maybe
// before the dial returns), else by the header timeout.
func IdleConn(t testing.TB, addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return errors.Is(err, syscall.ECONNRESET)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(AttackerDeadline))
	_, closed := Drain(conn)
	return closed
}

// ScrapeSum fetches the Prometheus text exposition at url (a /metrics
// endpoint) and sums the samples of name whose labels contain label, as
// MetricSum does.
func ScrapeSum(url, name, label string) (float64, error) {
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", url, err)
	}
	return MetricSum(string(b), name, label)
}

// MetricSum sums the samples of metric name in a Prometheus text
// exposition whose labels contain label (as written, e.g.
// `timeout="write_idle"`; "" for any).
func MetricSum(text, name, label string) (float64, error) {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") || !strings.Contains(line, label) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("parsing %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
