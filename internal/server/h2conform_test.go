package server

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHTTP2Conformance: the cases h2spec failed before (the same each
// run). 4.2/3: a HEADERS frame larger than SETTINGS_MAX_FRAME_SIZE, now
// 16 KiB (x/net's default of 1 MiB allowed it), is a connection error
// FRAME_SIZE_ERROR. 6.5.3/1: a SETTINGS frame that repeats an identifier
// is processed in order (x/net hung up on it). 8.1.2.2/1 and 2: a request
// with a connection-specific field, or TE other than "trailers", is
// malformed: RST_STREAM PROTOCOL_ERROR (x/net answered 400).
func TestHTTP2Conformance(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	ts := start(t, func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = cs.get
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	})

	t.Run("4.2/3 frame size", func(t *testing.T) {
		h := dialH2(t, ts.httpsAddr, "a.test")
		var mu sync.Mutex
		var maxFrame uint32
		h2Frames(t, h, &mu, func(f http2.Frame) bool {
			sf, ok := f.(*http2.SettingsFrame)
			if ok && !sf.IsAck() {
				maxFrame, _ = sf.Value(http2.SettingMaxFrameSize)
			}
			return f == nil || ok && !sf.IsAck()
		})
		if maxFrame != 16<<10 {
			t.Errorf("SETTINGS_MAX_FRAME_SIZE %d, want 16384", maxFrame)
		}
		var pad []hpack.HeaderField
		for i := range 5 {
			pad = append(pad, hpack.HeaderField{Name: "x-dummy" + string(rune('0'+i)), Value: strings.Repeat("x", 4000)})
		}
		mu.Lock()
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("a.test", pad...), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		mu.Unlock()
		var goAway *http2.GoAwayFrame
		h2Frames(t, h, &mu, func(f http2.Frame) bool {
			if _, ok := f.(*http2.HeadersFrame); ok {
				t.Fatal("a HEADERS frame over the frame size was answered")
			}
			goAway, _ = f.(*http2.GoAwayFrame)
			return f == nil || goAway != nil
		})
		if goAway == nil || goAway.ErrCode != http2.ErrCodeFrameSize {
			t.Fatalf("GOAWAY %v, want FRAME_SIZE_ERROR", goAway)
		}
	})

	t.Run("6.5.3/1 repeated settings", func(t *testing.T) {
		h := dialH2(t, ts.httpsAddr, "a.test")
		var mu sync.Mutex
		mu.Lock()
		err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		acks := 0
		h2Frames(t, h, &mu, func(f http2.Frame) bool {
			if sf, ok := f.(*http2.SettingsFrame); ok && sf.IsAck() {
				acks++
			}
			if _, ok := f.(*http2.GoAwayFrame); ok || f == nil {
				t.Fatalf("the connection ended (%v) after a SETTINGS frame that repeats a value", f)
			}
			return acks == 1 // x/net acknowledges both frames at once, or one at a time
		})
		mu.Lock()
		h.get(t, 1, "a.test")
		mu.Unlock()
		var data *http2.DataFrame
		h2Frames(t, h, &mu, func(f http2.Frame) bool {
			data, _ = f.(*http2.DataFrame)
			return f == nil || data != nil
		})
		if data == nil || len(data.Data()) != 1 {
			t.Fatalf("first DATA frame %v, want 1 byte (the last value of the window)", data)
		}
	})

	for _, tc := range []struct {
		name  string
		field hpack.HeaderField
	}{
		{"8.1.2.2/1 connection-specific field", hpack.HeaderField{Name: "connection", Value: "keep-alive"}},
		{"8.1.2.2/2 TE other than trailers", hpack.HeaderField{Name: "te", Value: "gzip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dialH2(t, ts.httpsAddr, "a.test")
			var mu sync.Mutex
			mu.Lock()
			err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("a.test", tc.field), EndStream: true, EndHeaders: true})
			mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			var rst *http2.RSTStreamFrame
			h2Frames(t, h, &mu, func(f http2.Frame) bool {
				switch f := f.(type) {
				case nil:
					t.Fatal("the connection closed")
				case *http2.HeadersFrame:
					t.Fatal("a malformed request was answered")
				case *http2.GoAwayFrame:
					t.Fatalf("GOAWAY %v, want the stream reset", f.ErrCode)
				case *http2.RSTStreamFrame:
					rst = f
				}
				return rst != nil
			})
			if rst.StreamID != 1 || rst.ErrCode != http2.ErrCodeProtocol {
				t.Fatalf("RST_STREAM %d %v, want 1 PROTOCOL_ERROR", rst.StreamID, rst.ErrCode)
			}
		})
	}
}
