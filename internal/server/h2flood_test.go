package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"sluice.dev/sluice/internal/h2"
)

// floodBytes is how much a flood test writes unless the server closes
// first: far more than the socket buffers on both sides hold, so that a
// server that reads the flood to its end fails the test.
const floodBytes = 48 << 20

// wire returns the bytes of frames written with fr's methods.
func wire(t *testing.T, write func(fr *http2.Framer)) []byte {
	t.Helper()
	var b bytes.Buffer
	write(http2.NewFramer(&b, nil))
	return b.Bytes()
}

// flood writes batch to h again and again, floodBytes in all, unless the
// connection fails first; it fails the test if it does not, or only by
// the failsafe deadline. With read, the frames the server sends are read
// (and dropped) meanwhile.
func flood(t *testing.T, h *h2Conn, batch []byte, read bool) {
	t.Helper()
	if read {
		go func() {
			for {
				if _, err := h.fr.ReadFrame(); err != nil {
					return
				}
			}
		}()
	}
	for len(batch) < 32<<10 {
		batch = append(batch, batch...)
	}
	h.SetWriteDeadline(time.Now().Add(30 * time.Second))
	for sent := 0; sent < floodBytes; sent += len(batch) {
		_, err := h.Write(batch)
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection was still open after %d bytes of flood", sent)
		}
		if err != nil {
			return
		}
	}
	t.Fatalf("%d bytes of flood written without the connection closing", floodBytes)
}

// waitFloods waits until sluice_http2_floods_total{frame} is want; it
// fails t (a subtest's) if it does not get there.
func waitFloods(t *testing.T, ts *testServer, frame string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := ts.metric("sluice_http2_floods_total", "frame", frame)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice_http2_floods_total{frame=%q} = %v, want %v", frame, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// floods is sluice_http2_floods_total summed over its frame labels.
func (ts *testServer) floods() float64 {
	var n float64
	for _, f := range h2.FrameNames {
		n += ts.metric("sluice_http2_floods_total", "frame", f)
	}
	return n
}

// TestHTTP2Floods: each frame that costs the server work without being
// a request, sent without end, ends the connection (GOAWAY
// ENHANCE_YOUR_CALM, counted by frame type) long before the flood is
// written, whether or not the client reads what the server answers.
// Before the glitch budget, all but the unread PINGs were read for ever.
func TestHTTP2Floods(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	ts := start(t, func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = cs.get
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/wait" {
				<-r.Context().Done() // a stream that stays open
				return
			}
			io.WriteString(w, "ok")
		})
	})
	openStream := func(t *testing.T, h *h2Conn, endHeaders bool) {
		var blk bytes.Buffer
		enc := hpack.NewEncoder(&blk)
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "a.test"}, {":path", "/wait"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk.Bytes(), EndHeaders: endHeaders}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		frame string // the label counted
		read  bool
		setup func(t *testing.T, h *h2Conn)
		batch func(fr *http2.Framer)
	}{
		{name: "empty DATA (CVE-2019-9518)", frame: "data",
			setup: func(t *testing.T, h *h2Conn) { openStream(t, h, true) },
			batch: func(fr *http2.Framer) { fr.WriteData(1, false, nil) }},
		{name: "empty CONTINUATION", frame: "continuation",
			setup: func(t *testing.T, h *h2Conn) { openStream(t, h, false) },
			batch: func(fr *http2.Framer) { fr.WriteContinuation(1, false, nil) }},
		{name: "PRIORITY", frame: "priority",
			batch: func(fr *http2.Framer) { fr.WritePriority(3, http2.PriorityParam{Weight: 20}) }},
		{name: "PRIORITY_UPDATE", frame: "priority_update",
			batch: func(fr *http2.Framer) { fr.WriteRawFrame(0x10, 0, 0, []byte("\x00\x00\x00\x03u=2")) }},
		{name: "WINDOW_UPDATE", frame: "window_update",
			batch: func(fr *http2.Framer) { fr.WriteWindowUpdate(0, 1) }},
		{name: "RST_STREAM on a closed stream", frame: "rst_stream",
			setup: func(t *testing.T, h *h2Conn) {
				h.get(t, 1, "a.test")
				var ev h2Events
				h.read(t, &ev, func(ev *h2Events) bool { return ev.ended[1] })
			},
			batch: func(fr *http2.Framer) { fr.WriteRSTStream(1, http2.ErrCodeCancel) }},
		{name: "PING, acknowledgements unread", frame: "ping",
			batch: func(fr *http2.Framer) { fr.WritePing(false, [8]byte{1}) }},
		{name: "PING, acknowledgements read", frame: "ping", read: true,
			batch: func(fr *http2.Framer) { fr.WritePing(false, [8]byte{1}) }},
		{name: "unknown frame type", frame: "unknown",
			batch: func(fr *http2.Framer) { fr.WriteRawFrame(0xfa, 0, 0, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.metric("sluice_http2_floods_total", "frame", tc.frame)
			h := dialH2(t, ts.httpsAddr, "a.test")
			if tc.setup != nil {
				tc.setup(t, h)
			}
			flood(t, h, wire(t, func(fr *http2.Framer) {
				for range 1000 {
					tc.batch(fr)
				}
			}), tc.read)
			waitFloods(t, ts, tc.frame, before+1)
		})
	}

	// Empty HEADERS, each a new stream the server resets (its block has
	// no request), cost one each and give nothing back. (The batch of a
	// million streams is written again after its end: without the guard,
	// the server reads all of it, then closes for the reused stream ids,
	// with PROTOCOL_ERROR, uncounted.)
	t.Run("empty HEADERS churn", func(t *testing.T) {
		before := ts.metric("sluice_http2_floods_total", "frame", "headers")
		h := dialH2(t, ts.httpsAddr, "a.test")
		flood(t, h, wire(t, func(fr *http2.Framer) {
			for id := uint32(1); id < 2*1_000_000; id += 2 {
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true})
			}
		}), true)
		waitFloods(t, ts, "headers", before+1)
	})
}

// TestHTTP2ZeroWindowStreams: a client that sets its streams' window to
// zero and never opens it cannot hold handlers (in the proxy: upstream
// connections and their buffers) beyond the write idle timeout: every
// one of its streams is reset, and every handler's write fails and
// returns, counted once each as a write idle timeout. What such a client
// holds at most is MaxConcurrentStreams handlers per connection, each
// with the response writer's 4 KiB, for the timeout.
func TestHTTP2ZeroWindowStreams(t *testing.T) {
	const streams = 40
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	ended := make(chan error, streams)
	ts := start(t, func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = cs.get
		o.WriteIdleTimeout = 200 * time.Millisecond
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chunk := make([]byte, 64<<10)
			var err error
			for i := 0; i < 1<<12 && err == nil; i++ { // 256 MiB
				_, err = w.Write(chunk)
			}
			ended <- err
		})
	})
	h := dialH2(t, ts.httpsAddr, "a.test")
	if err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	for id := uint32(1); id < 2*streams; id += 2 {
		h.get(t, id, "a.test")
	}
	reset := map[uint32]bool{}
	var data int
	h.SetReadDeadline(time.Now().Add(30 * time.Second))
	for len(reset) < streams {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d streams reset: %v", len(reset), err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			reset[f.StreamID] = true
		case *http2.DataFrame:
			data += len(f.Data())
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v after %d streams reset", f.ErrCode, len(reset))
		}
	}
	for i := range streams {
		select {
		case err := <-ended:
			if err == nil {
				t.Fatalf("handler %d wrote 256 MiB into a zero window", i)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d handlers still writing into zero windows (failsafe)", streams-i, streams)
		}
	}
	if data != 0 {
		t.Errorf("%d bytes of DATA sent into zero windows", data)
	}
	ts.waitMetric("sluice_client_timeouts_total", "timeout", "write_idle", streams)
}
