package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHTTP2BusyClientsNotFlooding: clients that send many of the frames
// the glitch budget counts, as real ones do, are never cut: a gRPC-like
// bidirectional stream of 3,000 small messages each way with a PING
// after each answer (gRPC's bandwidth probe) and the window updates of
// x/net's client, then 900 requests of which 300 are cancelled while
// their handler runs; and a browser-like connection whose 2,000
// requests each come with PRIORITY, PRIORITY_UPDATE and WINDOW_UPDATE
// frames. Each sends more than DefaultGlitchBurst such frames: only the
// budget the responses give back lets them through.
func TestHTTP2BusyClientsNotFlooding(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	waiting := make(chan struct{})
	ts := start(t, func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = cs.get
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/echo":
				ctl := http.NewResponseController(w)
				w.WriteHeader(http.StatusOK)
				ctl.Flush()
				buf := make([]byte, 16)
				for {
					if _, err := io.ReadFull(r.Body, buf); err != nil {
						return
					}
					w.Write(buf)
					ctl.Flush()
				}
			case "/wait":
				waiting <- struct{}{}
				<-r.Context().Done()
			default:
				io.WriteString(w, "ok")
			}
		})
	})

	t.Run("gRPC-like", func(t *testing.T) {
		tc, err := tls.Dial("tcp", ts.httpsAddr, &tls.Config{ServerName: "a.test", InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		cc, err := (&http2.Transport{}).NewClientConn(tc)
		if err != nil {
			t.Fatal(err)
		}
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", "https://a.test/echo", pr)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, got := []byte("0123456789abcdef"), make([]byte, 16)
		for i := range 3000 {
			if _, err := pw.Write(msg); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if _, err := io.ReadFull(resp.Body, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("answer %d: %q, %v", i, got, err)
			}
			if err := cc.Ping(context.Background()); err != nil {
				t.Fatalf("PING after message %d: %v", i, err)
			}
		}
		pw.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatalf("the stream's end: %v", err)
		}

		for i := range 900 {
			if i%3 == 2 {
				ctx, cancel := context.WithCancel(context.Background())
				go func() { <-waiting; cancel() }()
				req, _ := http.NewRequestWithContext(ctx, "GET", "https://a.test/wait", nil)
				if _, err := cc.RoundTrip(req); err == nil {
					t.Fatalf("request %d: answered, want cancelled", i)
				}
				continue
			}
			req, _ := http.NewRequest("GET", "https://a.test/", nil)
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if n := ts.floods(); n != 0 {
			t.Fatalf("%v connections ended as floods", n)
		}
	})

	t.Run("browser-like", func(t *testing.T) {
		h := dialH2(t, ts.httpsAddr, "a.test")
		var ev h2Events
		const batch = 50
		id := uint32(1)
		for range 2000 / batch {
			var b bytes.Buffer
			fr := http2.NewFramer(&b, nil)
			first := id
			for range batch {
				fr.WritePriority(id, http2.PriorityParam{StreamDep: 0, Weight: 100})
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: requestBlock("a.test"), EndStream: true, EndHeaders: true,
					Priority: http2.PriorityParam{StreamDep: 0, Weight: 200, Exclusive: true}})
				fr.WriteRawFrame(0x10, 0, 0, fmt.Appendf([]byte{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, "u=%d", id%8))
				fr.WriteWindowUpdate(0, 1)
				id += 2
			}
			if _, err := h.Write(b.Bytes()); err != nil {
				t.Fatal(err)
			}
			h.read(t, &ev, func(ev *h2Events) bool {
				if ev.goAway != nil || ev.eof {
					return true
				}
				for s := first; s < id; s += 2 {
					if !ev.ended[s] {
						return false
					}
				}
				return true
			})
			if ev.goAway != nil || ev.eof {
				t.Fatalf("after stream %d: GOAWAY %v, closed %v", id, ev.goAway, ev.eof)
			}
		}
		if len(ev.ended) != 2000 {
			t.Fatalf("%d responses, want 2000", len(ev.ended))
		}
		if n := ts.floods(); n != 0 {
			t.Fatalf("%v connections ended as floods", n)
		}
	})
}

// TestHTTP2HPACKLimits: a header block that grows the server's decoding
// table beyond its SETTINGS_HEADER_TABLE_SIZE (4,096) ends the
// connection with COMPRESSION_ERROR, and so does a single field longer
// than the header list limit (x/net decodes no longer string); a header
// list over the limit is answered 431; a client that allows a table of
// 1 GiB still gets responses encoded with a table of at most 4,096
// bytes.
func TestHTTP2HPACKLimits(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	ts := start(t, func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = cs.get
		o.MaxHeaderBytes = 8 << 10
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-unique", r.URL.Path+strings.Repeat("v", 200))
		})
	})

	t.Run("table size update", func(t *testing.T) {
		h := dialH2(t, ts.httpsAddr, "a.test")
		var blk bytes.Buffer
		enc := hpack.NewEncoder(&blk)
		enc.SetMaxDynamicTableSizeLimit(1 << 20)
		enc.SetMaxDynamicTableSize(1 << 20)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "a.test"}, {":path", "/"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		var mu sync.Mutex
		mu.Lock()
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		mu.Unlock()
		goAway := awaitGoAway(t, h, &mu)
		if goAway == nil || goAway.ErrCode != http2.ErrCodeCompression {
			t.Fatalf("a table size update to 1 MiB: GOAWAY %v, want COMPRESSION_ERROR", goAway)
		}
	})

	// status decodes the response header blocks of h's streams with dec
	// until stream id's ends; it fails the test on a decoding error.
	status := func(t *testing.T, h *h2Conn, mu *sync.Mutex, dec *hpack.Decoder, id uint32) string {
		t.Helper()
		var st string
		h2Frames(t, h, mu, func(f http2.Frame) bool {
			switch f := f.(type) {
			case nil:
				t.Fatalf("stream %d: the connection closed", id)
			case *http2.GoAwayFrame:
				t.Fatalf("stream %d: GOAWAY %v", id, f.ErrCode)
			case *http2.HeadersFrame:
				fields, err := dec.DecodeFull(f.HeaderBlockFragment())
				if err != nil {
					t.Fatalf("stream %d: decoding the response header with a table of 4096 bytes: %v", f.StreamID, err)
				}
				if f.StreamID == id {
					for _, hf := range fields {
						if hf.Name == ":status" {
							st = hf.Value
						}
					}
				}
			}
			return f.Header().StreamID == id && f.Header().Flags&http2.FlagHeadersEndStream != 0
		})
		return st
	}

	t.Run("field over the limit", func(t *testing.T) {
		h := dialH2(t, ts.httpsAddr, "a.test")
		var mu sync.Mutex
		mu.Lock()
		block := requestBlock("a.test", hpack.HeaderField{Name: "x-big", Value: strings.Repeat("b", 5<<10)})
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		mu.Unlock()
		goAway := awaitGoAway(t, h, &mu)
		if goAway == nil || goAway.ErrCode != http2.ErrCodeCompression {
			t.Fatalf("a field of 5 KiB over a header list limit of 4.4 KiB: GOAWAY %v, want COMPRESSION_ERROR", goAway)
		}
	})

	t.Run("header list over the limit", func(t *testing.T) {
		h := dialH2(t, ts.httpsAddr, "a.test")
		var mu sync.Mutex
		mu.Lock()
		var big []hpack.HeaderField
		for i := range 3 {
			big = append(big, hpack.HeaderField{Name: fmt.Sprintf("x-big%d", i), Value: strings.Repeat("b", 2000)})
		}
		block := requestBlock("a.test", big...)
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		mu.Unlock()
		if st := status(t, h, &mu, hpack.NewDecoder(4096, nil), 1); st != "431" {
			t.Fatalf("a header list of 6 KiB over a limit of 4.4 KiB: status %q, want 431", st)
		}
	})

	t.Run("client table of 1 GiB", func(t *testing.T) {
		h := dialH2(t, ts.httpsAddr, "a.test")
		var mu sync.Mutex
		mu.Lock()
		if err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 1 << 30}); err != nil {
			t.Fatal(err)
		}
		mu.Unlock()
		dec := hpack.NewDecoder(4096, nil)
		for i := uint32(1); i < 2*50; i += 2 {
			var b bytes.Buffer
			enc := hpack.NewEncoder(&b)
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "a.test"}, {":path", fmt.Sprintf("/%d", i)}} {
				enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			mu.Lock()
			err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: i, BlockFragment: b.Bytes(), EndStream: true, EndHeaders: true})
			mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if st := status(t, h, &mu, dec, i); st != "200" {
				t.Fatalf("stream %d: status %q", i, st)
			}
		}
	})
}
