package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// From draining on, a keep-alive connection's next response carries
// Connection: close and the server closes the connection after it.
func TestKeepAliveGetsConnectionCloseWhileDraining(t *testing.T) {
	ts := start(t, nil)
	c := dialRaw(t, ts.httpAddr)
	req := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	if resp := c.do(t, req); resp.Close || resp.StatusCode != http.StatusOK {
		t.Fatalf("serving: status %d, Connection: close %v", resp.StatusCode, resp.Close)
	}
	ts.signal()
	ts.waitState(StateDraining)
	// The idle keep-alive connection was not closed under the client's
	// feet: the next request on it is answered.
	resp := c.do(t, req)
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Fatalf("draining: status %d, Connection: close %v", resp.StatusCode, resp.Close)
	}
	if !c.closedByServer() {
		t.Fatal("connection still open after a Connection: close response")
	}
	close(ts.drained)
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if v := ts.metric("sluice_connections_closed_total", "reason", reasonDrain); v < 1 {
		t.Errorf("connections closed while draining: %v", v)
	}
}

// h2Conn is a raw HTTP/2 client connection, to see the frames the server
// sends.
type h2Conn struct {
	*tls.Conn
	fr *http2.Framer
}

func dialH2(t *testing.T, addr, sni string) *h2Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return &h2Conn{Conn: c, fr: fr}
}

func (c *h2Conn) get(t *testing.T, stream uint32, sni string) {
	t.Helper()
	c.getPath(t, stream, sni, "/")
}

func (c *h2Conn) getPath(t *testing.T, stream uint32, sni, path string) {
	t.Helper()
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", sni}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: b.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// h2Events is what a raw connection saw.
type h2Events struct {
	ended  map[uint32]bool // streams whose response ended
	goAway *http2.GoAwayFrame
	eof    bool
}

// read reads frames until done says so, acknowledging SETTINGS.
func (c *h2Conn) read(t *testing.T, ev *h2Events, done func(*h2Events) bool) {
	t.Helper()
	if ev.ended == nil {
		ev.ended = map[uint32]bool{}
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for !done(ev) {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) {
				ev.eof = true
				continue
			}
			t.Fatalf("reading frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				ev.ended[f.StreamID] = true
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				ev.ended[f.StreamID] = true
			}
		case *http2.GoAwayFrame:
			g := *f
			ev.goAway = &g
		}
	}
}

func tlsOptions(c *certs) func(*Options) {
	return func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = c.get
	}
}

// An HTTP/2 connection that carries a request while draining gets GOAWAY
// (NO_ERROR) with that request's response; an idle one gets it when
// stopping starts. Both are then closed by the server.
func TestHTTP2GoAway(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	ts := start(t, tlsOptions(&cs))

	busy := dialH2(t, ts.httpsAddr, "a.test")
	busy.get(t, 1, "a.test")
	var busyEv h2Events
	busy.read(t, &busyEv, func(e *h2Events) bool { return e.ended[1] })
	if busyEv.goAway != nil {
		t.Fatalf("GOAWAY while serving: %v", busyEv.goAway)
	}
	idle := dialH2(t, ts.httpsAddr, "a.test")

	ts.signal()
	ts.waitState(StateDraining)
	busy.get(t, 3, "a.test")
	busy.read(t, &busyEv, func(e *h2Events) bool { return e.ended[3] && e.goAway != nil })
	if g := busyEv.goAway; g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 3 {
		t.Errorf("draining: GOAWAY %v last stream %d, want NO_ERROR 3", g.ErrCode, g.LastStreamID)
	}
	busy.read(t, &busyEv, func(e *h2Events) bool { return e.eof })

	close(ts.drained)
	var idleEv h2Events
	idle.read(t, &idleEv, func(e *h2Events) bool { return e.eof })
	if g := idleEv.goAway; g == nil || g.ErrCode != http2.ErrCodeNo {
		t.Errorf("stopping: idle connection closed with GOAWAY %v, want NO_ERROR", g)
	}
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if v := ts.metric("sluice_connections_closed_total", "reason", reasonShutdownDeadline); v != 0 {
		t.Errorf("connections closed at the deadline: %v", v)
	}
}

// A connection whose streams overlap never becomes idle, so GOAWAY must
// come with a response, not when the last stream ends.
func TestHTTP2GoAwayOnBusyConnection(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	release := make(chan struct{})
	ts := start(t, func(o *Options) {
		tlsOptions(&cs)(o)
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				<-release
			}
		})
	})
	c := dialH2(t, ts.httpsAddr, "a.test")
	c.getPath(t, 1, "a.test", "/hold")
	ts.signal()
	ts.waitState(StateDraining)
	c.get(t, 3, "a.test")
	var ev h2Events
	c.read(t, &ev, func(e *h2Events) bool { return e.ended[3] && e.goAway != nil })
	if ev.ended[1] {
		t.Fatal("held stream ended early")
	}
	if g := ev.goAway; g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 3 {
		t.Errorf("GOAWAY %v last stream %d, want NO_ERROR 3", g.ErrCode, g.LastStreamID)
	}
	close(release)
	c.read(t, &ev, func(e *h2Events) bool { return e.eof })
	if !ev.ended[1] {
		t.Error("held stream did not complete before the connection closed")
	}
	close(ts.drained)
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// With Go's HTTP/2 client: the request after the one that got GOAWAY goes
// on a new connection, and nothing fails.
func TestHTTP2ClientReconnectsWhileDraining(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	ts := start(t, tlsOptions(&cs))
	client := tlsClient("a.test", false)
	do := func() string {
		t.Helper()
		resp, err := client.Get("https://" + ts.httpsAddr + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("proto %s", resp.Proto)
		}
		b, _ := io.ReadAll(resp.Body)
		return string(b) // the client address the server saw
	}
	first := do()
	ts.signal()
	ts.waitState(StateDraining)
	if second := do(); second != first {
		t.Errorf("draining: first request went on a new connection (%s, was %s)", second, first)
	}
	if third := do(); third == first {
		t.Errorf("draining: connection %s reused after GOAWAY", third)
	}
	close(ts.drained)
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestTLSCertificateBySNI(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	cs.set("b.test", newCert(t, "b.test", "b"))
	ts := start(t, tlsOptions(&cs))
	for _, tt := range []struct {
		sni, cn string
		h1      bool
	}{{"a.test", "a", false}, {"b.test", "b", true}, {"unknown.test", "", false}, {"a.test", "a", true}} {
		resp, err := tlsClient(tt.sni, tt.h1).Get("https://" + ts.httpsAddr + "/")
		if tt.cn == "" {
			if err == nil {
				resp.Body.Close()
				t.Errorf("%s: handshake succeeded without a certificate", tt.sni)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.sni, err)
		}
		resp.Body.Close()
		wantProto := 2
		if tt.h1 {
			wantProto = 1
		}
		if got := peerCN(resp); got != tt.cn || resp.ProtoMajor != wantProto {
			t.Errorf("%s: certificate %q over %s, want %q over HTTP/%d", tt.sni, got, resp.Proto, tt.cn, wantProto)
		}
	}
}

// A rotated certificate applies to new connections; established ones keep
// working.
func TestCertificateRotationKeepsConnections(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "old"))
	ts := start(t, tlsOptions(&cs))
	for _, h1 := range []bool{false, true} {
		cs.set("a.test", newCert(t, "a.test", "old"))
		client := tlsClient("a.test", h1)
		do := func(c *http.Client) (cn, remote string) {
			t.Helper()
			resp, err := c.Get("https://" + ts.httpsAddr + "/")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return peerCN(resp), string(b)
		}
		cn1, remote1 := do(client)
		cs.set("a.test", newCert(t, "a.test", "new"))
		cn2, remote2 := do(client)
		if cn1 != "old" || cn2 != "old" || remote2 != remote1 {
			t.Errorf("h1=%v: established connection: %s %s then %s %s", h1, cn1, remote1, cn2, remote2)
		}
		if cn3, _ := do(tlsClient("a.test", h1)); cn3 != "new" {
			t.Errorf("h1=%v: new connection got certificate %q, want new", h1, cn3)
		}
	}
}

func proxyOptions(trusted string) func(*Options) {
	return func(o *Options) {
		o.ProxyProtocol = true
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(trusted)}
	}
}

func v2Header(src netip.AddrPort) string {
	b := []byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c")
	a := src.Addr().As4()
	b = append(b, a[:]...)
	b = append(b, 192, 0, 2, 8)
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, 443)
	return string(b)
}

func TestProxyProtocolFromTrustedPeer(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	ts := start(t, func(o *Options) {
		proxyOptions("127.0.0.0/8")(o)
		tlsOptions(&cs)(o)
	})
	req := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tt := range []struct{ name, header, want string }{
		{"v1", "PROXY TCP4 192.0.2.7 192.0.2.8 4242 80\r\n", "192.0.2.7:4242"},
		{"v1 tcp6", "PROXY TCP6 2001:db8::7 2001:db8::8 4242 80\r\n", "[2001:db8::7]:4242"},
		{"v2", v2Header(netip.MustParseAddrPort("198.51.100.9:999")), "198.51.100.9:999"},
		{"none", "", "127.0.0.1:"},
	} {
		c := dialRaw(t, ts.httpAddr)
		io.WriteString(c, tt.header)
		resp := c.do(t, req)
		if got := body(t, resp); !strings.HasPrefix(got, tt.want) {
			t.Errorf("http %s: handler saw %q, want %q", tt.name, got, tt.want)
		}
	}

	// Over HTTPS the header comes before the TLS handshake.
	raw, err := net.Dial("tcp", ts.httpsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	io.WriteString(raw, v2Header(netip.MustParseAddrPort("198.51.100.9:999")))
	tc := tls.Client(raw, &tls.Config{ServerName: "a.test", InsecureSkipVerify: true})
	c := &rawConn{Conn: tc}
	c.r = bufio.NewReader(tc)
	if got := body(t, c.do(t, req)); got != "198.51.100.9:999" {
		t.Errorf("https v2: handler saw %q", got)
	}
}

func TestProxyProtocolFromUntrustedPeerIgnored(t *testing.T) {
	ts := start(t, proxyOptions("10.0.0.0/8"))
	c := dialRaw(t, ts.httpAddr)
	io.WriteString(c, "PROXY TCP4 192.0.2.7 192.0.2.8 4242 80\r\n")
	if resp := c.do(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("untrusted PROXY header: status %d, want 400", resp.StatusCode)
	}
	if code, got := get(t, "http://"+ts.httpAddr+"/"); code != http.StatusOK || !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("untrusted plain request: %d %q", code, got)
	}
}

// TestFastHTTP1ServesAndHandsOff checks which HTTP/1.x connections the
// fast loop keeps and which it hands to net/http, and that both are
// served, with the lifecycle's Connection: close on each path.
func TestFastHTTP1ServesAndHandsOff(t *testing.T) {
	if !*fastHTTP1 {
		t.Skip("-fast-http1=false")
	}
	ts := start(t, func(o *Options) {
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, r.Proto+" "+r.Host)
		})
	})
	for _, tc := range []struct {
		name, req, reason, want string
	}{
		{"keep-alive HTTP/1.1", "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", "", "HTTP/1.1 a.example"},
		{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: b.example\r\n\r\n", "version", "HTTP/1.0 b.example"},
		{"Expect", "POST / HTTP/1.1\r\nHost: c.example\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nok", "expect", "HTTP/1.1 c.example"},
		{"chunked body", "POST / HTTP/1.1\r\nHost: d.example\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "transfer_encoding", "HTTP/1.1 d.example"},
		{"absolute-form", "GET http://e.example/ HTTP/1.1\r\nHost: e.example\r\n\r\n", "target", "HTTP/1.1 e.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.metric("sluice_http1_handoffs_total", "reason", tc.reason)
			c := dialRaw(t, ts.httpAddr)
			for i := 0; i < 2; i++ { // the second request: on the same path
				resp := c.do(t, tc.req)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: status %d", i, resp.StatusCode)
				}
				if got := body(t, resp); !strings.HasPrefix(got, tc.want) {
					t.Errorf("request %d: body %q, want %q", i, got, tc.want)
				}
				if tc.reason == "version" || tc.reason == "expect" {
					break // not kept alive (net/http closes after an unread Expect body)
				}
			}
			got := ts.metric("sluice_http1_handoffs_total", "reason", tc.reason) - before
			want := 1.0
			if tc.reason == "" {
				want = 0
			}
			if got != want {
				t.Errorf("hand-offs for %q: %v, want %v", tc.reason, got, want)
			}
		})
	}

	// Draining: both paths ask the client to close.
	fast, slow := dialRaw(t, ts.httpAddr), dialRaw(t, ts.httpAddr)
	slow.do(t, "GET http://x.example/ HTTP/1.1\r\nHost: x.example\r\n\r\n")
	ts.signal()
	ts.waitState(StateDraining)
	for name, c := range map[string]*rawConn{"fast": fast, "handed-off": slow} {
		resp := c.do(t, "GET / HTTP/1.1\r\nHost: x.example\r\n\r\n")
		if !resp.Close {
			t.Errorf("%s connection: no Connection: close while draining", name)
		}
		if !c.closedByServer() {
			t.Errorf("%s connection still open after its response while draining", name)
		}
	}
}
