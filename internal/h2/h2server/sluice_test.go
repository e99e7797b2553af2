package h2server

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// frameRecorder is a writeContext that keeps the frames written.
type frameRecorder struct {
	buf  bytes.Buffer
	fr   *Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

func newFrameRecorder() *frameRecorder {
	r := &frameRecorder{}
	r.fr = NewFramer(&r.buf, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	return r
}

func (r *frameRecorder) Framer() *Framer                                { return r.fr }
func (r *frameRecorder) Flush() error                                   { return nil }
func (r *frameRecorder) CloseConn() error                               { return nil }
func (r *frameRecorder) HeaderEncoder() (*hpack.Encoder, *bytes.Buffer) { return r.enc, &r.hbuf }

// TestSizeBound: what writeResHeaders writes (HEADERS and CONTINUATION
// frames) never exceeds its sizeBound, for fixed and random headers,
// with and without the encoder's dynamic table already holding them.
func TestSizeBound(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	// randStr gives n bytes of alphabet (whose first bytes the encoder
	// codes shortest); encodeHeaders drops fields that are not valid.
	randStr := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(b)
	}
	const token = "abcdefghijklmnopqrstuvwxyz0123456789-"
	var printable string
	for c := byte(0x20); c < 0x7f; c++ {
		printable += string(c)
	}
	cases := []*writeResHeaders{
		{streamID: 1, httpResCode: 200},
		{streamID: 1, httpResCode: 200, contentType: "text/plain", contentLength: "100", date: "Fri, 27 Nov 2026 02:50:00 GMT"},
		{streamID: 1, httpResCode: 404, h: http.Header{"X-A": {"1", "2"}, "Set-Cookie": {strings.Repeat("c", 100)}}},
		{streamID: 1, httpResCode: 200, h: http.Header{"X-Big": {strings.Repeat("v", 40000)}}}, // CONTINUATION frames
		{streamID: 1, h: http.Header{"Grpc-Status": {"0"}, "Grpc-Message": {""}}, trailers: []string{"Grpc-Status", "Grpc-Message"}, endStream: true},
	}
	for range 200 {
		h := http.Header{}
		for range rnd.IntN(20) {
			h[http.CanonicalHeaderKey(randStr(1+rnd.IntN(8), token))] = []string{randStr(rnd.IntN(3000), printable)}
		}
		cases = append(cases, &writeResHeaders{streamID: 1, httpResCode: 100 + rnd.IntN(500), h: h, date: randStr(rnd.IntN(40), printable)})
	}
	// Many short fields: the most overhead per byte of names and values.
	short := http.Header{}
	for _, a := range token[:26] {
		for _, b := range token[:26] {
			short[http.CanonicalHeaderKey(string(a)+string(b))] = []string{"", randStr(1, "~^|")}
		}
	}
	cases = append(cases, &writeResHeaders{streamID: 1, httpResCode: 200, h: short})
	for i, w := range cases {
		r := newFrameRecorder()
		for round := range 2 { // the second finds the fields indexed
			r.buf.Reset()
			if err := w.writeFrame(r); err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if got, bound := r.buf.Len(), w.sizeBound(); got > bound {
				t.Errorf("case %d round %d: wrote %d bytes, bound %d", i, round, got, bound)
			}
		}
	}
}

// roomConn is a connection below the server with a fixed room.
type roomConn struct {
	net.Conn
	room int
	asks []int
}

func (c *roomConn) Room(n int) bool { c.asks = append(c.asks, n); return n <= c.room }

// TestWritesWithoutBlocking: response headers and flushes go on the
// server's goroutine only over a connection that reports room for them
// and for what the server buffered; other frames, and every frame over a
// connection that does not tell, keep upstream's rule.
func TestWritesWithoutBlocking(t *testing.T) {
	hdr := &writeResHeaders{streamID: 1, httpResCode: 200, h: http.Header{"X-A": {"b"}}}
	for _, tc := range []struct {
		name     string
		conn     net.Conn
		buffered int
		w        writeFramer
		want     bool
		ask      int // the bytes asked for; -1: not asked
	}{
		{"headers, room", &roomConn{room: 1 << 20}, 0, hdr, true, hdr.sizeBound()},
		{"headers, buffered counts", &roomConn{room: 1 << 20}, 100, hdr, true, 100 + hdr.sizeBound()},
		{"headers, no room", &roomConn{room: 10}, 0, hdr, false, hdr.sizeBound()},
		{"flush, room", &roomConn{room: 4096}, 4000, flushFrameWriter{}, true, 4000},
		{"flush, no room", &roomConn{room: 100}, 4000, flushFrameWriter{}, false, 4000},
		{"other frames keep upstream's rule", &roomConn{room: 1 << 20}, 0, &writeGoAway{maxStreamID: 1, code: ErrCodeNo}, false, -1},
		{"connection that does not tell", &net.TCPConn{}, 0, hdr, false, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &serverConn{conn: tc.conn, bw: newBufferedWriter(tc.conn, 0)}
			if tc.buffered > 0 {
				sc.bw.Write(make([]byte, tc.buffered)) // stays in the buffer
			}
			if got := sc.writesWithoutBlocking(tc.w); got != tc.want {
				t.Errorf("writesWithoutBlocking = %v, want %v", got, tc.want)
			}
			rc, _ := tc.conn.(*roomConn)
			switch {
			case tc.ask < 0 && rc != nil && len(rc.asks) > 0:
				t.Errorf("asked the connection for %v, want no question", rc.asks)
			case tc.ask >= 0 && (len(rc.asks) != 1 || rc.asks[0] != tc.ask):
				t.Errorf("asked the connection for %v, want [%d]", rc.asks, tc.ask)
			}
		})
	}
}
