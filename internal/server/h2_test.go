package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"sluice.dev/sluice/internal/h2"
)

// settings sends n SETTINGS frames.
func (c *h2Conn) settings(t *testing.T, n int) {
	t.Helper()
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	for range n {
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	}
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// TestHTTP2SettingsFlood: a client may send h2.DefaultSettingsBurst
// SETTINGS frames ahead of its requests, each request giving one back;
// the frame that overdraws that budget gets GOAWAY ENHANCE_YOUR_CALM and
// the connection is closed, however many frames follow (before, a
// million were acknowledged through one flag and read for ever).
func TestHTTP2SettingsFlood(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	ts := start(t, func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = cs.get
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	})

	// The whole budget (dialH2 sent the first frame), then a request:
	// still served.
	h := dialH2(t, ts.httpsAddr, "a.test")
	h.settings(t, h2.DefaultSettingsBurst-1)
	var ev h2Events
	served := func(id uint32) func(*h2Events) bool {
		return func(ev *h2Events) bool { return ev.ended[id] || ev.goAway != nil || ev.eof }
	}
	h.get(t, 1, "a.test")
	if h.read(t, &ev, served(1)); !ev.ended[1] || ev.goAway != nil {
		t.Fatalf("request after %d SETTINGS frames: ended %v, GOAWAY %v", h2.DefaultSettingsBurst, ev.ended[1], ev.goAway)
	}
	// The request gave one back: one more frame is allowed, a second
	// overdraws the budget.
	h.settings(t, 1)
	h.get(t, 3, "a.test")
	if h.read(t, &ev, served(3)); !ev.ended[3] || ev.goAway != nil {
		t.Fatalf("request after one more SETTINGS frame: ended %v, GOAWAY %v", ev.ended[3], ev.goAway)
	}
	h.settings(t, 2)
	h.read(t, &ev, func(ev *h2Events) bool { return ev.goAway != nil })
	if ev.goAway.ErrCode != http2.ErrCodeEnhanceYourCalm || ev.goAway.LastStreamID != 3 {
		t.Fatalf("after the budget was overdrawn: GOAWAY %v (last stream %d), want ENHANCE_YOUR_CALM, 3", ev.goAway.ErrCode, ev.goAway.LastStreamID)
	}
	h.read(t, &ev, func(ev *h2Events) bool { return ev.eof })
	ts.waitMetric("sluice_http2_floods_total", "frame", "settings", 1)

	// A flood that never reads: the server stops at the budget. Write
	// ten million frames (90 MB, more than the socket buffers hold)
	// unless the connection fails first; it must fail long before, and
	// not by the failsafe deadline.
	h = dialH2(t, ts.httpsAddr, "a.test")
	h.SetWriteDeadline(time.Now().Add(20 * time.Second))
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	for range 1000 {
		fr.WriteSettings()
	}
	const writes = 10000
	sent := 0
	for ; sent < writes; sent++ {
		_, err := h.Write(b.Bytes())
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection was still open after %d SETTINGS frames", sent*1000)
		}
		if err != nil {
			break
		}
	}
	if sent == writes {
		t.Fatal("ten million SETTINGS frames written without the connection closing")
	}
	// What the server sent before it closed ends in the GOAWAY.
	h.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := h.fr.ReadFrame()
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("reading after the flood: %v", err)
		}
		if err != nil {
			break // closed (or reset: the GOAWAY may be lost then)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok && ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
			t.Errorf("GOAWAY %v, want ENHANCE_YOUR_CALM", ga.ErrCode)
		}
	}
	ts.waitMetric("sluice_http2_floods_total", "frame", "settings", 2)
}

// TestH2CServed: with H2C, HTTP/2 with prior knowledge on the plain
// listener is served by internal/h2 too (net/http reads the preface and
// hands the connection over), request and response whole.
func TestH2CServed(t *testing.T) {
	ts := start(t, func(o *Options) {
		o.H2C = true
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			io.WriteString(w, r.Proto+" "+string(b))
		})
	})
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	for i := range 3 {
		resp, err := tr.RoundTrip(mustRequest(t, "POST", "http://"+ts.httpAddr+"/", strings.NewReader("body")))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "HTTP/2.0 body" {
			t.Errorf("request %d: %d %q, want 200 \"HTTP/2.0 body\"", i, resp.StatusCode, b)
		}
	}
}

func mustRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestHTTP2WriteBuffered: x/net's HTTP/2 response writer takes
// h2WriteBuffer bytes without writing to the stream, so the writes
// idleWriter leaves without a deadline cannot wait for the client: here
// the client's stream window is zero, and they return.
func TestHTTP2WriteBuffered(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	wrote := make(chan error, 1)
	ts := start(t, func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = cs.get
		o.WriteIdleTimeout = time.Hour
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var err error
			for _, n := range []int{1000, 2000, h2WriteBuffer - 3000} {
				if _, err = w.Write(make([]byte, n)); err != nil {
					break
				}
			}
			wrote <- err
		})
	})
	h := dialH2(t, ts.httpsAddr, "a.test")
	if err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	data := make(chan int, 100)
	var writing sync.Mutex // the framer's writes: the request, the acknowledgement
	go func() {
		defer close(data)
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					writing.Lock()
					h.fr.WriteSettingsAck()
					writing.Unlock()
				}
			case *http2.DataFrame:
				data <- len(f.Data())
			}
		}
	}()
	writing.Lock()
	h.get(t, 1, "a.test")
	writing.Unlock()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("writing %d bytes to a stream with no window: %v", h2WriteBuffer, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("writing %d bytes to a stream with no window blocked (failsafe)", h2WriteBuffer)
	}
	h.Close()
	for n := range data {
		if n > 0 {
			t.Errorf("the server sent %d bytes of DATA into a zero window", n)
		}
	}
}

// deadlineWriter is a ResponseWriter that counts the write deadlines set
// on it and the writes and flushes that reached it.
type deadlineWriter struct {
	http.ResponseWriter
	set, cleared, flushes int
	written               int
}

func (w *deadlineWriter) Write(p []byte) (int, error) { w.written += len(p); return len(p), nil }
func (w *deadlineWriter) FlushError() error           { w.flushes++; return nil }
func (w *deadlineWriter) SetWriteDeadline(d time.Time) error {
	if d.IsZero() {
		w.cleared++
	} else {
		w.set++
	}
	return nil
}

// TestIdleWriterDeadlines: writes that stay within the response writer's
// buffer since the last flush go without a deadline; a write that may
// reach the stream and every flush are under one, cleared after; once a
// write went past the buffer, every write is under one until a flush.
func TestIdleWriterDeadlines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ops   []int // bytes to write; -1 flushes
		armed int   // deadlines set (and cleared)
	}{
		{"one small write", []int{100}, 0},
		{"writes that fill the buffer", []int{1000, 2000, h2WriteBuffer - 3000}, 0},
		{"one byte over", []int{1000, 2000, h2WriteBuffer - 3000, 1}, 1},
		{"large write", []int{h2WriteBuffer + 1}, 1},
		{"after a large write", []int{h2WriteBuffer + 1, 1, 1}, 3},
		{"a flush empties the buffer", []int{h2WriteBuffer + 1, -1, 100, h2WriteBuffer - 100}, 2},
		{"stream of messages", []int{500, -1, 500, -1, 500, -1}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dw := &deadlineWriter{}
			iw := &idleWriter{ResponseWriter: dw, ctl: http.NewResponseController(dw), timeout: time.Minute}
			want := 0
			for _, op := range tc.ops {
				if op < 0 {
					if err := iw.FlushError(); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want += op
				if _, err := iw.Write(make([]byte, op)); err != nil {
					t.Fatal(err)
				}
			}
			if dw.set != tc.armed || dw.cleared != tc.armed || dw.written != want {
				t.Errorf("deadlines set %d, cleared %d, bytes %d; want %d, %d, %d", dw.set, dw.cleared, dw.written, tc.armed, tc.armed, want)
			}
		})
	}
}
