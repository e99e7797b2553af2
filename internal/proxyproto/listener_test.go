package proxyproto

import (
	"cmp"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func listen(t *testing.T, o Options) net.Listener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(inner, o)
	t.Cleanup(func() { l.Close() })
	return l
}

// dial connects to l, writes data and returns the client side.
func dial(t *testing.T, l net.Listener, data string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if data != "" {
		if _, err := io.WriteString(c, data); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func accept(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return string(b)
}

func TestListenerTrusted(t *testing.T) {
	l := listen(t, Options{Trusted: loopback})
	tests := []struct{ name, header, remote, local string }{
		{"v1", "PROXY TCP4 192.0.2.7 192.0.2.8 4242 443\r\n", "192.0.2.7:4242", "192.0.2.8:443"},
		{"v1 tcp6", "PROXY TCP6 2001:db8::7 2001:db8::8 4242 443\r\n", "[2001:db8::7]:4242", "[2001:db8::8]:443"},
		{"v2", string(v2(0x21, 0x11, inet4("198.51.100.9", "192.0.2.8", 999, 443))), "198.51.100.9:999", "192.0.2.8:443"},
		{"v2 local", string(v2(0x20, 0x00, nil)), "", ""},
		{"v1 unknown", "PROXY UNKNOWN\r\n", "", ""},
		{"none", "", "", ""},
	}
	for _, tt := range tests {
		cl := dial(t, l, tt.header+"hello")
		c := accept(t, l)
		want := tt.remote
		if want == "" {
			want = cl.LocalAddr().String() // the real peer
		}
		if got := c.RemoteAddr().String(); got != want {
			t.Errorf("%s: RemoteAddr %s, want %s", tt.name, got, want)
		}
		if got := readN(t, c, 5); got != "hello" {
			t.Errorf("%s: payload %q", tt.name, got)
		}
		// LocalAddr: the header's destination (the address the client
		// reached), else the listener's own.
		wantLocal := cmp.Or(tt.local, l.Addr().String())
		if c.LocalAddr().String() != wantLocal {
			t.Errorf("%s: LocalAddr %s, want %s", tt.name, c.LocalAddr(), wantLocal)
		}
	}
}

func TestListenerUntrustedPassesHeaderThrough(t *testing.T) {
	l := listen(t, Options{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	header := "PROXY TCP4 192.0.2.7 192.0.2.8 4242 443\r\n"
	cl := dial(t, l, header)
	c := accept(t, l)
	if _, ok := c.(*Conn); ok {
		t.Fatal("untrusted connection was wrapped")
	}
	if got := c.RemoteAddr().String(); got != cl.LocalAddr().String() {
		t.Errorf("RemoteAddr %s, want the real peer %s", got, cl.LocalAddr())
	}
	if got := readN(t, c, len(header)); got != header {
		t.Errorf("payload %q, want the header untouched", got)
	}
}

func TestListenerInvalidHeaderFailsReads(t *testing.T) {
	l := listen(t, Options{Trusted: loopback})
	cl := dial(t, l, "PROXY TCP4 300.0.0.1 192.0.2.8 1 2\r\nGET /")
	c := accept(t, l)
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Read error %v, want ErrInvalid", err)
	}
	if got := c.RemoteAddr().String(); got != cl.LocalAddr().String() {
		t.Errorf("RemoteAddr %s, want the real peer %s", got, cl.LocalAddr())
	}
}

func TestListenerRequired(t *testing.T) {
	l := listen(t, Options{Trusted: loopback, Required: true})
	dial(t, l, "GET / HTTP/1.1\r\n\r\n")
	c := accept(t, l)
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, ErrMissing) {
		t.Fatalf("Read error %v, want ErrMissing", err)
	}
}

// Accept must return a trusted connection before its header arrives, so one
// silent client cannot hold up the others.
func TestAcceptDoesNotWaitForHeader(t *testing.T) {
	l := listen(t, Options{Trusted: loopback, HeaderTimeout: time.Hour})
	silent := dial(t, l, "")
	first := accept(t, l)
	dial(t, l, "PROXY TCP4 192.0.2.7 192.0.2.8 4242 443\r\nx")
	second := accept(t, l) // would hang if Accept read the first header
	if got := second.RemoteAddr().String(); got != "192.0.2.7:4242" {
		t.Errorf("second RemoteAddr %s", got)
	}
	// The silent client finally speaks: its bytes arrive intact.
	io.WriteString(silent, "PROXY TCP4 192.0.2.9 192.0.2.8 1 443\r\ny")
	if got := first.RemoteAddr().String(); got != "192.0.2.9:1" {
		t.Errorf("first RemoteAddr %s", got)
	}
	if got := readN(t, first, 1); got != "y" {
		t.Errorf("first payload %q", got)
	}
}

func TestHeaderTimeout(t *testing.T) {
	l := listen(t, Options{Trusted: loopback, HeaderTimeout: 50 * time.Millisecond})

	// A partial header that never completes is an error.
	dial(t, l, "PROXY TCP4 192.0.2.7")
	c := accept(t, l)
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("partial header: Read error %v, want ErrInvalid", err)
	}

	// A trusted peer that sends nothing within the timeout is a plain
	// connection, and the timeout does not stick.
	cl := dial(t, l, "")
	c = accept(t, l)
	if got := c.RemoteAddr().String(); got != cl.LocalAddr().String() {
		t.Errorf("silent peer: RemoteAddr %s, want %s", got, cl.LocalAddr())
	}
	io.WriteString(cl, "late")
	if got := readN(t, c, 4); got != "late" {
		t.Errorf("silent peer: payload %q", got)
	}
}

// The consumer's read deadline survives the header read.
func TestConsumerDeadline(t *testing.T) {
	l := listen(t, Options{Trusted: loopback, HeaderTimeout: time.Hour})
	dial(t, l, "PROXY TCP4 192.0.2.7 192.0.2.8 4242 443\r\n")
	c := accept(t, l)
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read error %v, want the consumer's deadline", err)
	}
	if got := c.RemoteAddr().String(); got != "192.0.2.7:4242" {
		t.Errorf("RemoteAddr %s", got)
	}
}

// TestReached: the address and port a connection reached for routing: a
// header's destination with its port, a connection without one with its
// local address and port 0 (the proxy's own port is not the load
// balancer's).
func TestReached(t *testing.T) {
	l := listen(t, Options{Trusted: loopback})
	dial(t, l, "PROXY TCP4 192.0.2.7 192.0.2.8 4242 8080\r\n")
	c := accept(t, l)
	if got := Reached(c.LocalAddr()).String(); got != "192.0.2.8:8080" {
		t.Errorf("with a header: %s, want 192.0.2.8:8080", got)
	}
	dial(t, l, "GET / HTTP/1.1\r\n\r\n")
	c = accept(t, l)
	local := c.LocalAddr().(*net.TCPAddr)
	if got, want := Reached(c.LocalAddr()), netip.AddrPortFrom(local.AddrPort().Addr().Unmap(), 0); got != want {
		t.Errorf("without a header: %s, want %s", got, want)
	}
	if Reached(nil).IsValid() {
		t.Error("nil address reached something")
	}
}
