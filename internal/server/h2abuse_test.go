package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Frames reads frames from c until stop returns true for one or the
// connection ends (io.EOF, reported as a nil frame), acknowledging
// SETTINGS under mu; it fails the test on other read errors.
func h2Frames(t *testing.T, c *h2Conn, mu *sync.Mutex, stop func(http2.Frame) bool) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		f, err := c.fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			stop(nil)
			return
		}
		if err != nil {
			t.Fatalf("reading frames: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			mu.Lock()
			c.fr.WriteSettingsAck()
			mu.Unlock()
		}
		if stop(f) {
			return
		}
	}
}

// awaitGoAway reads frames from c (see h2Frames) until a GOAWAY or the
// end of the connection: the GOAWAY, or nil if there was none.
func awaitGoAway(t *testing.T, c *h2Conn, mu *sync.Mutex) *http2.GoAwayFrame {
	t.Helper()
	var goAway *http2.GoAwayFrame
	h2Frames(t, c, mu, func(f http2.Frame) bool {
		goAway, _ = f.(*http2.GoAwayFrame)
		return f == nil || goAway != nil
	})
	return goAway
}

// requestBlock is the HPACK block of a GET with extra fields.
func requestBlock(sni string, extra ...hpack.HeaderField) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", sni}, {":path", "/"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, f := range extra {
		enc.WriteField(f)
	}
	return b.Bytes()
}

// TestHTTP2Abuse: the forked server keeps upstream's protections. Rapid
// reset (CVE-2023-44487): streams reset at once while their handlers
// still run end the connection with ENHANCE_YOUR_CALM once four times the
// stream limit wait. A header block that goes on in CONTINUATION frames
// far beyond the header limit (CVE-2023-45288) ends the connection with
// PROTOCOL_ERROR before it is all read. A stream over the advertised
// limit is refused.
func TestHTTP2Abuse(t *testing.T) {
	const streams = 4
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	release := make(chan struct{})
	defer close(release)
	ts := start(t, func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = cs.get
		o.MaxConcurrentStreams = streams
		o.MaxHeaderBytes = 8 << 10
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release // a handler that ignores the stream's end
		})
	})

	t.Run("rapid reset", func(t *testing.T) {
		h := dialH2(t, ts.httpsAddr, "a.test")
		var mu sync.Mutex
		go func() {
			mu.Lock()
			defer mu.Unlock()
			for id := uint32(1); id < 2*100; id += 2 {
				if h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: requestBlock("a.test"), EndStream: true, EndHeaders: true}) != nil ||
					h.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
					return
				}
			}
		}()
		goAway := awaitGoAway(t, h, &mu)
		if goAway == nil || goAway.ErrCode != http2.ErrCodeEnhanceYourCalm {
			t.Fatalf("100 streams reset at once: GOAWAY %v, want ENHANCE_YOUR_CALM", goAway)
		}
		// The handlers of the first streams ran; the queue behind them
		// is what tripped.
		if last := goAway.LastStreamID; last < 2*streams || last > 2*6*streams+1 {
			t.Errorf("GOAWAY after stream %d, want between %d and %d", last, 2*streams, 2*6*streams+1)
		}
	})

	t.Run("continuation flood", func(t *testing.T) {
		h := dialH2(t, ts.httpsAddr, "a.test")
		var mu sync.Mutex
		// 16 MiB of header block: fields of 4 KiB, in 16 KiB frames.
		pad := make([]hpack.HeaderField, 4<<10)
		for i := range pad {
			pad[i] = hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("p", 4<<10)}
		}
		block := requestBlock("a.test", pad...)
		written := make(chan int, 1)
		go func() {
			n := 0
			defer func() { written <- n }()
			mu.Lock()
			err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:16<<10], EndStream: true})
			mu.Unlock()
			for off := 16 << 10; err == nil && off < len(block); off += 16 << 10 {
				mu.Lock()
				err = h.fr.WriteContinuation(1, off+16<<10 >= len(block), block[off:min(off+16<<10, len(block))])
				mu.Unlock()
				n = off
			}
		}()
		goAway := awaitGoAway(t, h, &mu)
		if goAway == nil || goAway.ErrCode != http2.ErrCodeProtocol {
			t.Errorf("a header block of 16 MiB: GOAWAY %v, want PROTOCOL_ERROR", goAway)
		}
		h.Close()
		if n := <-written; n >= len(block)-16<<10 {
			t.Errorf("the whole header block (%d bytes) was written: the server read it all", n)
		}
	})

	t.Run("over the stream limit", func(t *testing.T) {
		h := dialH2(t, ts.httpsAddr, "a.test")
		var mu sync.Mutex
		// The client's SETTINGS acknowledgement comes first: then a
		// stream over the limit is a protocol error, else refused (the
		// client may not have seen the limit yet). Either resets the
		// stream alone.
		h2Frames(t, h, &mu, func(f http2.Frame) bool {
			sf, ok := f.(*http2.SettingsFrame)
			return f == nil || ok && !sf.IsAck()
		})
		mu.Lock()
		for id := uint32(1); id <= 2*streams+1; id += 2 {
			if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: requestBlock("a.test"), EndStream: true, EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
		}
		mu.Unlock()
		var rst *http2.RSTStreamFrame
		h2Frames(t, h, &mu, func(f http2.Frame) bool {
			if g, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("GOAWAY %v, want only the extra stream reset", g.ErrCode)
			}
			rst, _ = f.(*http2.RSTStreamFrame)
			return f == nil || rst != nil
		})
		if rst == nil || rst.StreamID != 2*streams+1 || (rst.ErrCode != http2.ErrCodeProtocol && rst.ErrCode != http2.ErrCodeRefusedStream) {
			t.Fatalf("stream %d over a limit of %d: %+v, want RST_STREAM PROTOCOL_ERROR or REFUSED_STREAM", 2*streams+1, streams, rst)
		}
	})
}
