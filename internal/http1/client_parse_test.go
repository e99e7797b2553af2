package http1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// parseBoth reads one response from in with ResponseReader.Parse and with
// http.ReadResponse. fast reports whether Parse took it.
func parseBoth(t *testing.T, in []byte, method string) (fast bool) {
	t.Helper()
	req := &http.Request{Method: method}
	var rr ResponseReader
	br := bufio.NewReaderSize(bytes.NewReader(in), 4<<10)
	br.Peek(min(len(in), 4<<10)) // as the proxy: the header is buffered
	got, ok := rr.Parse(br, req)
	if !ok {
		// Nothing consumed: http.ReadResponse gets the same bytes.
		if br.Buffered() != min(len(in), 4<<10) {
			t.Fatalf("Parse declined but consumed %d bytes", min(len(in), 4<<10)-br.Buffered())
		}
		return false
	}
	wbr := bufio.NewReaderSize(bytes.NewReader(in), 4<<10)
	want, err := http.ReadResponse(wbr, req)
	if err != nil {
		t.Fatalf("Parse took a response http.ReadResponse rejects (%v): %q", err, in)
	}
	gotBody, gerr := io.ReadAll(got.Body)
	wantBody, werr := io.ReadAll(want.Body)
	if (gerr == nil) != (werr == nil) || !bytes.Equal(gotBody, wantBody) {
		t.Fatalf("body %q (%v), want %q (%v) for %q", gotBody, gerr, wantBody, werr, in)
	}
	// What follows the response (the next one on the connection) must
	// be where both leave it.
	restGot, _ := io.ReadAll(br)
	restWant, _ := io.ReadAll(wbr)
	if !bytes.Equal(restGot, restWant) {
		t.Fatalf("left %q, want %q for %q", restGot, restWant, in)
	}
	type summary struct {
		Status        string
		StatusCode    int
		Proto         string
		Major, Minor  int
		Header        http.Header
		ContentLength int64
		Close         bool
		Trailer       http.Header
		TE            []string
	}
	sum := func(r *http.Response) summary {
		return summary{r.Status, r.StatusCode, r.Proto, r.ProtoMajor, r.ProtoMinor, r.Header, r.ContentLength, r.Close, r.Trailer, r.TransferEncoding}
	}
	if g, w := sum(got), sum(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("Parse %+v\nhttp.ReadResponse %+v\nfor %q", g, w, in)
	}
	return true
}

var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\n",
	"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nDate: Sat, 21 Nov 2026 10:00:00 GMT\r\n\r\n",
	"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
	"HTTP/1.1 200\r\nContent-Length:3\r\nx-custom-header:  spaced value \t\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n folded\r\n\r\nabc",
	"HTTP/1.1 200 OK\nContent-Length: 3\n\nabc",
	"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n",
	"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX: caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nTrailer: X\r\n\r\n",
}

func TestParseResponseMatchesReadResponse(t *testing.T) {
	fast := 0
	for _, s := range responseSeeds {
		for _, m := range []string{"GET", "HEAD", "POST"} {
			if parseBoth(t, []byte(s), m) {
				fast++
			}
		}
	}
	// The common responses must take the fast parser, or it is dead code.
	if fast < 10 {
		t.Errorf("Parse took %d of the seed responses, want the common ones", fast)
	}
	if !parseBoth(t, []byte(responseSeeds[0]), "GET") {
		t.Error("a plain 200 with Content-Length did not take the fast parser")
	}
}

func FuzzParseResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, head bool) {
		m := "GET"
		if head {
			m = "HEAD"
		}
		if len(in) > 4<<10 || strings.Contains(string(in), "\r\n\r\n\r\n\r\n") && len(in) > 1<<10 {
			return
		}
		parseBoth(t, in, m)
	})
}

// TestParseReuses: one ResponseReader parses response after response with
// one allocation each (the header's text): its Response, header map and
// value slices are reused, and nothing of the previous response shows
// in the next.
func TestParseReuses(t *testing.T) {
	resps := []string{
		"HTTP/1.1 200 OK\r\nX-A: 1\r\nX-B: 2\r\nX-B: 3\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 201 Created\r\nContent-Length: 1\r\nX-C: c\r\n\r\nk",
	}
	want := []http.Header{
		{"X-A": {"1"}, "X-B": {"2", "3"}, "Content-Length": {"2"}},
		{"Content-Length": {"1"}, "X-C": {"c"}},
	}
	var rr ResponseReader
	req := &http.Request{Method: http.MethodGet}
	parse := func(i int) *http.Response {
		br := bufio.NewReader(strings.NewReader(resps[i]))
		br.Peek(len(resps[i]))
		res, ok := rr.Parse(br, req)
		if !ok {
			t.Fatalf("Parse declined %q", resps[i])
		}
		return res
	}
	for i := range 4 {
		if res := parse(i % 2); !reflect.DeepEqual(res.Header, want[i%2]) {
			t.Fatalf("response %d: header %v, want %v", i, res.Header, want[i%2])
		}
	}
	var res *http.Response
	br := bufio.NewReaderSize(nil, 4<<10)
	r := strings.NewReader("")
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(resps[1]) // no repeated field: no value slice grows
		br.Reset(r)
		br.Peek(len(resps[1]))
		res, _ = rr.Parse(br, req)
	})
	if res == nil || allocs > 1 {
		t.Errorf("Parse: %v allocations per response, want 1", allocs)
	}
}
