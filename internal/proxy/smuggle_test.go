package proxy

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRequestSmuggling sends ambiguous requests through sluice behind a
// real net/http server. Whatever the front server makes of them (reject,
// or read them one way), the upstream must see exactly the requests the
// proxy handled, in order: never a second request hidden in a body.
func TestRequestSmuggling(t *testing.T) {
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	n := strconv.Itoa(len(smuggled))
	n4 := strconv.Itoa(len(smuggled) + 4)
	n5 := strconv.Itoa(len(smuggled) + 5)
	for _, tc := range []struct {
		name   string
		raw    string
		reject bool // the request must be refused with a 4xx/5xx, never forwarded
	}{
		{name: "CL and TE", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled},
		{name: "TE and CL", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: " + strconv.Itoa(len(smuggled)+5) + "\r\n\r\n0\r\n\r\n" + smuggled},
		{name: "CL hides request", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + n4 + "\r\n\r\n" + smuggled + "xxxx"},
		{name: "differing CLs", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: " + n5 + "\r\n\r\nhello" + smuggled, reject: true},
		{name: "CL list", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, " + n5 + "\r\n\r\nhello" + smuggled, reject: true},
		{name: "chunked identity", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\nContent-Length: 5\r\n\r\nhello" + smuggled, reject: true},
		{name: "xchunked", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\nContent-Length: 5\r\n\r\nhello" + smuggled, reject: true},
		{name: "space before colon", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\nhello" + smuggled, reject: true},
		{name: "folded TE", raw: "POST / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello" + smuggled},
		{name: "smuggled CL", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + n + "\r\n\r\n" + smuggled},
		{name: "leading space TE", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:  chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" + smuggled},
		{name: "bare LF", raw: "POST / HTTP/1.1\nHost: x\nContent-Length: 5\n\nhello" + smuggled},
		{name: "bare LF in chunks", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n" + smuggled},
		{name: "chunk size overflow", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n" + smuggled},
		{name: "oversized header", raw: "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", reject: true},
		{name: "NUL in header", raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", reject: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var handled, seen []string
			up := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Method+" "+r.URL.Path)
				mu.Unlock()
			})
			p := New(Options{StdTransport: stdMode})
			p.Update(tableOf(backendOf("ns/s", defaults(), up.addr())))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				handled = append(handled, r.Method+" "+r.URL.Path)
				mu.Unlock()
				p.ServeHTTP(w, r)
			}))
			defer srv.Close()

			statuses := exchangeRaw(t, srv.Listener.Addr().String(), tc.raw)
			mu.Lock()
			defer mu.Unlock()
			// A request whose body turns out malformed reaches the
			// upstream incomplete, and is not seen there.
			if !subsequence(seen, handled) {
				t.Errorf("upstream saw %q, the proxy handled %q", seen, handled)
			}
			if len(seen) > 2 {
				t.Errorf("upstream saw %d requests", len(seen))
			}
			if tc.reject {
				if len(seen) != 0 {
					t.Errorf("forwarded %q, want rejected", seen)
				}
				if len(statuses) > 0 && statuses[0] < 400 {
					t.Errorf("statuses %v, want a refusal", statuses)
				}
			}
			t.Logf("statuses %v, upstream saw %q", statuses, seen)
		})
	}
}

// subsequence reports whether a's elements appear in b in order.
func subsequence(a, b []string) bool {
	for _, x := range b {
		if len(a) > 0 && a[0] == x {
			a = a[1:]
		}
	}
	return len(a) == 0
}

// exchangeRaw writes raw on a new connection and returns the statuses of
// the responses read until the server closes it or goes quiet.
func exchangeRaw(t *testing.T, addr, raw string) []int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A server that refuses early may not read it all.
	go conn.Write([]byte(raw))
	br := bufio.NewReader(conn)
	var statuses []int
	for {
		// Every response comes within milliseconds; a quiet connection
		// means the server waits for more.
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return statuses
		}
		statuses = append(statuses, res.StatusCode)
		buf := make([]byte, 4096)
		for {
			if _, err := res.Body.Read(buf); err != nil {
				break
			}
		}
		res.Body.Close()
	}
}
