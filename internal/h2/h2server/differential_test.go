package h2server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	_ "unsafe" // for go:linkname

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"sluice.dev/sluice/internal/h2"
	"sluice.dev/sluice/internal/h2/h2server"
)

// FuzzDifferential feeds the same client byte stream (clientStream, from
// the fuzz input) to golang.org/x/net/http2's server and to the fork, the
// latter over internal/h2's Conn as in production, and compares what they
// answer, normalised so that goroutine scheduling does not show (summary:
// per stream the response header blocks, body, END_STREAM and resets; per
// connection the GOAWAY frames and whether the server closed it; neither
// frame boundaries nor the order of frames of different streams, nor
// WINDOW_UPDATE, SETTINGS and PING frames).
//
// What makes the answers deterministic:
//   - The client sends its frames in chunks, each ended by a PING whose
//     acknowledgement it waits for (see chunk).
//   - Every handler waits at a gate until the server acknowledged the
//     sentinel PING that ends the client stream, that is until it processed
//     every frame the client sent: which streams are open, refused or reset,
//     and the bytes of each request body, are then fixed.
//   - The handler then sets its read deadline in the past, which closes the
//     request body after the bytes already received, reads it, and answers.
//   - The test starts a graceful shutdown at the same point: the server
//     sends GOAWAY(NO_ERROR) naming the last stream it processed, and
//     closes the connection once every stream is done and flushed (after
//     goAwayTimeout, shortened here): the test reads until that close.
//
// A case that cannot finish (a response held back by a zero flow-control
// window) is cut after caseDeadline in both and compared as it stands.
func FuzzDifferential(f *testing.F) {
	for _, s := range differentialSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		stream, foreseen := clientStream(data)
		var got [2]summary
		var wg sync.WaitGroup
		for i, srv := range []serveFunc{serveXNet, serveFork} {
			wg.Go(func() { got[i] = exchange(srv, stream) })
		}
		wg.Wait()
		answered := got[0].serverAnswered() || got[1].serverAnswered()
		got[0].asFork()
		a, b := got[0].String(), got[1].String()
		if a != b && !foreseen && answered {
			// Raw frames made a request the server answers by
			// itself, and the frames after it met the stream in a
			// state that depends on scheduling (see clientStream).
			t.Skip("a request of raw frames answered by the server itself")
		}
		if a != b {
			t.Errorf("the servers answer differently\nx/net:\n%s\nfork:\n%s", a, b)
		}
	})
}

// caseDeadline bounds one exchange; cases end much sooner, when the
// server closes the connection.
const caseDeadline = 2 * time.Second

// xnetGoAwayTimeout is x/net's goAwayTimeout, "a var so it can be shorter
// in tests": each case waits for the servers to close the connection, a
// second after the last stream is done otherwise. The servers start that
// timer only once every frame is written, so that its length does not
// change what the client reads.
//
//go:linkname xnetGoAwayTimeout golang.org/x/net/http2.goAwayTimeout
var xnetGoAwayTimeout time.Duration

var shortenGoAway sync.Once

// serveFunc serves c with one of the two servers, with handler h and the
// same settings; shutdown starts its graceful shutdown.
type serveFunc func(c net.Conn, h http.Handler) (shutdown func())

var quiet = log.New(io.Discard, "", 0)

func serveXNet(c net.Conn, h http.Handler) func() {
	hs := &http.Server{MaxHeaderBytes: maxHeaderBytes, ErrorLog: quiet}
	s := &http2.Server{MaxConcurrentStreams: maxStreams, MaxReadFrameSize: 16 << 10}
	if err := http2.ConfigureServer(hs, s); err != nil {
		panic(err)
	}
	go s.ServeConn(c, &http2.ServeConnOpts{Handler: h, BaseConfig: hs})
	return func() { hs.Shutdown(context.Background()) }
}

func serveFork(c net.Conn, h http.Handler) func() {
	hs := &http.Server{MaxHeaderBytes: maxHeaderBytes, ErrorLog: quiet}
	s := &h2server.Server{MaxConcurrentStreams: maxStreams, MaxReadFrameSize: 16 << 10}
	if err := h2server.ConfigureServer(hs, s); err != nil {
		panic(err)
	}
	// The frame guard's budgets are sluice's own protection, which x/net
	// does not have: out of reach here.
	conn := h2.NewConn(c, false, h2.Limits{SettingsBurst: 1 << 30, GlitchBurst: 1 << 30})
	go s.ServeConn(conn, &h2server.ServeConnOpts{Handler: h, BaseConfig: hs})
	return func() { hs.Shutdown(context.Background()) }
}

// Server settings, the same for both.
const (
	maxStreams     = 4
	maxHeaderBytes = 2048
)

// exchange sends stream to a server and summarises its answer.
func exchange(serve serveFunc, stream []chunk) summary {
	shortenGoAway.Do(func() {
		xnetGoAwayTimeout = 5 * time.Millisecond
		h2server.SetGoAwayTimeout(5 * time.Millisecond)
	})
	cc, sc := net.Pipe()
	defer cc.Close()
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	defer open()
	shutdown := serve(sc, handler(gate))
	acked := make(chan [8]byte, 1)
	done := make(chan struct{}) // the server ended the exchange
	defer close(done)
	go send(cc, stream, acked, done)
	cc.SetReadDeadline(time.Now().Add(caseDeadline))
	fr := http2.NewFramer(nil, cc)
	fr.SetMaxReadFrameSize(1 << 24)
	fr.ReadMetaHeaders = hpack.NewDecoder(64<<10, nil)
	fr.MaxHeaderListSize = 1 << 20
	var s summary
	s.streams = map[uint32]*streamSummary{}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				s.closed = true
			case errors.Is(err, os.ErrDeadlineExceeded):
			default:
				s.readErr = err.Error()
			}
			break
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			if p.Data == sentinel {
				shutdown()
				open()
			} else if string(p.Data[:4]) == syncPrefix {
				s.synced = s.streamsString()
				select {
				case acked <- p.Data:
				default:
				}
			}
		}
		s.add(f)
	}
	return s
}

// send writes the chunks of the client stream, each once the server
// acknowledged the PING that ends the one before; it gives up when the
// server ended the exchange or stopped answering PINGs (a connection
// error: x/net and the fork then ignore all that comes).
func send(c net.Conn, chunks []chunk, acked <-chan [8]byte, done <-chan struct{}) {
	for _, ch := range chunks {
		if _, err := c.Write(ch.b); err != nil || ch.sync == [8]byte{} {
			return
		}
		for {
			select {
			case p := <-acked:
				if p != ch.sync {
					continue
				}
			case <-done:
				return
			}
			break
		}
	}
}

// handler answers every request the same way, once gate is open (see
// FuzzDifferential): response headers echo the request, the body gives
// what the handler read, and a trailer follows.
func handler(gate <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate
		// In the past: the body ends after what the server has received.
		http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<10))
		end := "eof"
		if err != nil {
			end = "error"
		}
		status := http.StatusOK
		if code, ok := strings.CutPrefix(r.URL.Path, "/s/"); ok {
			if n, err := strconv.Atoi(code); err == nil && n >= 200 && n <= 599 {
				status = n
			}
		}
		h := w.Header()
		h.Set("Trailer", "X-Result")
		h.Set("X-Method", r.Method)
		h.Set("X-Path", r.URL.RequestURI())
		h.Set("X-Host", r.Host)
		h.Set("X-Echo", r.Header.Get("X-Echo"))
		h.Set("X-Content-Length", strconv.FormatInt(r.ContentLength, 10))
		w.WriteHeader(status)
		fmt.Fprintf(w, "%d bytes, %s: %q", len(body), end, body[:min(len(body), 16)])
		h.Set("X-Result", r.Trailer.Get("X-Trailer")+"|"+end)
	})
}

// summary is what a server answered, without what depends on scheduling:
// frame boundaries, the order of frames of different streams, WINDOW_UPDATE,
// SETTINGS and PING frames, and the Date header.
type summary struct {
	goaways []string // code and last stream of each GOAWAY
	streams map[uint32]*streamSummary
	closed  bool   // the server closed the connection before caseDeadline
	synced  string // streamsString at the last chunk's PING acknowledgement
	readErr string // the server's frames did not parse
}

type streamSummary struct {
	headers  []string // each header block: status and fields; the last one may be trailers
	body     []byte
	ended    bool     // END_STREAM seen
	resets   []string // RST_STREAM codes
	unparsed []string // frames the summary does not know
}

// serverAnswered reports whether the server answered a request by itself
// (400, 431), not through the handler, which adds X-Method.
func (s *summary) serverAnswered() bool {
	for _, st := range s.streams {
		for _, h := range st.headers {
			if (strings.HasPrefix(h, ":status: 400") || strings.HasPrefix(h, ":status: 431")) && !strings.Contains(h, "x-method: ") {
				return true
			}
		}
	}
	return false
}

// malformedAnswers are the bodies of x/net's 400 answers to requests
// with a connection-specific field or a TE field other than "trailers".
var malformedAnswers = map[string]bool{
	"request header \"Connection\" is not valid in HTTP/2\n":        true,
	"request header \"Keep-Alive\" is not valid in HTTP/2\n":        true,
	"request header \"Proxy-Connection\" is not valid in HTTP/2\n":  true,
	"request header \"Transfer-Encoding\" is not valid in HTTP/2\n": true,
	"request header \"Upgrade\" is not valid in HTTP/2\n":           true,
	"request header \"TE\" may only be \"trailers\" in HTTP/2\n":    true,
}

// isMalformedAnswer reports whether a 400 with header h and body b is
// one of malformedAnswers, or the answer to a HEAD request (no body, the
// length of one of them).
func isMalformedAnswer(h string, b []byte) bool {
	if len(b) > 0 {
		return malformedAnswers[string(b)]
	}
	for m := range malformedAnswers {
		if strings.HasSuffix(h, ", content-length: "+strconv.Itoa(len(m))) {
			return true
		}
	}
	return false
}

// asFork rewrites x/net's answer where the fork differs on purpose
// (h2server's NOTICE, and nowhere else): a request with a
// connection-specific field or a TE field other than "trailers" is
// malformed (RFC 9113, section 8.2.2), and the fork resets its stream
// with PROTOCOL_ERROR where x/net answers 400 with the reason. Only a
// stream whose whole answer is that 400 (isMalformedAnswer), from the
// server itself (no X-Method), and, if the request body was still open,
// the RST_STREAM NO_ERROR x/net sends after a response when the handler
// did not read the body, becomes that one reset (after the resets before
// it: a malformed header block earlier on the same stream id); any
// other stream still compares.
func (s *summary) asFork() {
	for _, st := range s.streams {
		if len(st.headers) == 1 && strings.HasPrefix(st.headers[0], ":status: 400,") && !strings.Contains(st.headers[0], "x-method: ") &&
			st.ended && isMalformedAnswer(st.headers[0], st.body) {
			st.headers, st.body, st.ended = nil, nil, false
			if n := len(st.resets); n > 0 && st.resets[n-1] == http2.ErrCodeNo.String() {
				st.resets = st.resets[:n-1]
			}
			st.resets = append(st.resets, http2.ErrCodeProtocol.String())
		}
	}
}

func (s *summary) stream(id uint32) *streamSummary {
	st := s.streams[id]
	if st == nil {
		st = &streamSummary{}
		s.streams[id] = st
	}
	return st
}

func (s *summary) add(f http2.Frame) {
	id := f.Header().StreamID
	switch f := f.(type) {
	case *http2.GoAwayFrame:
		if f.ErrCode != http2.ErrCodeNo {
			// The last stream is the highest the server saw when
			// it wrote the GOAWAY, not when the error happened: x/net
			// writes it after its flush goroutine is done, having
			// read on meanwhile (the frames after the error are
			// ignored, but their stream ids counted); the fork writes
			// it at once.
			s.goaways = append(s.goaways, f.ErrCode.String())
			break
		}
		s.goaways = append(s.goaways, fmt.Sprintf("%v last=%d", f.ErrCode, f.LastStreamID))
	case *http2.MetaHeadersFrame:
		var fields []string
		for _, hf := range f.Fields {
			if hf.Name != "date" {
				fields = append(fields, hf.Name+": "+hf.Value)
			}
		}
		st := s.stream(id)
		st.headers = append(st.headers, strings.Join(fields, ", "))
		st.ended = st.ended || f.StreamEnded()
	case *http2.DataFrame:
		st := s.stream(id)
		st.body = append(st.body, f.Data()...)
		st.ended = st.ended || f.StreamEnded()
	case *http2.RSTStreamFrame:
		st := s.stream(id)
		st.resets = append(st.resets, f.ErrCode.String())
	case *http2.WindowUpdateFrame, *http2.SettingsFrame, *http2.PingFrame:
	default:
		st := s.stream(id)
		st.unparsed = append(st.unparsed, f.Header().String())
	}
}

// String gives the summary in a fixed order. After a GOAWAY with an error
// code, the streams are compared as they stood at the last chunk's PING
// acknowledgement: x/net flushes from its own goroutine, and the stream
// resets it queued meanwhile are dropped for the GOAWAY or not depending
// on whether that flush was over; the fork flushes inline over sluice's
// Conn and never drops them. Up to the acknowledgement, the server wrote
// every reset it queued (resets and PING acknowledgements share one
// first-in first-out queue), and no response (the handlers wait).
func (s summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "closed=%v goaway=%v", s.closed, s.goaways)
	if s.readErr != "" {
		fmt.Fprintf(&b, " read error: %s", s.readErr)
	}
	b.WriteString("\n")
	for _, g := range s.goaways {
		if !strings.HasPrefix(g, http2.ErrCodeNo.String()+" ") {
			return b.String() + "at the last chunk's PING:\n" + s.synced
		}
	}
	return b.String() + s.streamsString()
}

// streamsString gives the streams' summaries in the order of their ids.
func (s *summary) streamsString() string {
	var b strings.Builder
	ids := make([]uint32, 0, len(s.streams))
	for id := range s.streams {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		st := s.streams[id]
		fmt.Fprintf(&b, "stream %d: headers=%q body=%q ended=%v resets=%v", id, st.headers, st.body, st.ended, st.resets)
		if st.unparsed != nil {
			fmt.Fprintf(&b, " other=%v", st.unparsed)
		}
		b.WriteString("\n")
	}
	return b.String()
}
