package http1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// headSeeds are request headers for the parser's tests and fuzzer:
// common ones parseHead must take, and near misses.
var headSeeds = []string{
	"GET / HTTP/1.1\nHost: a\n\n",
	"GET /api/items?page=2&sort=name HTTP/1.1\nHost: app.example\nUser-Agent: bench\nAccept: */*\n\n",
	"GET /a?b HTTP/1.1\nHost: a\n\n",
	"GET /a? HTTP/1.1\nHost: a\n\n",
	"GET /a?? HTTP/1.1\nHost: a\n\n",
	"GET /a?b? HTTP/1.1\nHost: a\n\n",
	"GET /a%20b/%2F HTTP/1.1\nHost: a\n\n",
	"GET /a!b*(c)'d HTTP/1.1\nHost: a\n\n",
	"GET /\xc3\xa4 HTTP/1.1\nHost: a\n\n",
	"GET /a#b HTTP/1.1\nHost: a\n\n",
	"GET //x/y HTTP/1.1\nHost: a\n\n",
	"GET /$&+,/:;=@-._~ HTTP/1.1\nHost: a\n\n",
	"GET /?q=%zz&\xff HTTP/1.1\nHost: a\n\n",
	"GET /%zz HTTP/1.1\nHost: a\n\n",
	"get / HTTP/1.1\nHost: a\n\n",
	"M-SEARCH / HTTP/1.1\nHost: a\n\n",
	"GET / HTTP/1.1\nhost: a:8080\nuser-agent: x\nx-lower-case: y\nACCEPT-encoding: gzip\n\n",
	"GET / HTTP/1.1\nHost: a\nX: 1\nX: 2\nx: 3\nY:\nZ:   \t z \t \n\n",
	"GET / HTTP/1.1\nHost:\n\n",
	"GET / HTTP/1.1\nHost: [::1]:80\n\n",
	"GET / HTTP/1.1\nHost: a b\n\n",
	"GET / HTTP/1.1\nHost: a\nHost: a\n\n",
	"GET / HTTP/1.1\nX: y\n\n",
	"GET / HTTP/1.1\nHost: a\nConnection: keep-alive, close\n\n",
	"GET / HTTP/1.1\nHost: a\nConnection: closed\nConnection: x,CLOSE\n\n",
	"GET / HTTP/1.1\nHost: a\nPragma: no-cache\n\n",
	"GET / HTTP/1.1\nHost: a\nTrailer: X\n\n",
	"GET / HTTP/1.1\nHost: a\nX: \xff\xfe\n\n",
	"GET / HTTP/1.1\nHost: a\nX: a\x7fb\n\n",
	"GET / HTTP/1.1\nHost: a\nX-A: 1\nX-B: 2\nX-C: 3\nX-D: 4\nX-E: 5\nX-F: 6\nX-G: 7\nX-H: 8\nX-I: 9\nX-J: 10\n\n",
	"POST /form HTTP/1.1\nHost: a\nContent-Type: text/plain\nContent-Length: 5\n\nhello",
	"POST / HTTP/1.1\nHost: a\nContent-Length: 0\n\n",
	"POST / HTTP/1.1\nHost: a\nContent-Length: 005\n\nhello",
	"POST / HTTP/1.1\nHost: a\nContent-Length: 10\n\nhello",
	"POST / HTTP/1.1\nHost: a\nContent-Length: 5\nContent-Length: 5\n\nhello",
	"POST / HTTP/1.1\nHost: a\nContent-Length: +5\n\nhello",
	"POST / HTTP/1.1\nHost: a\nContent-Length: 99999999999999999999\n\nhello",
	"CONNECT /x HTTP/1.1\nHost: a\n\n",
	"PRI /x HTTP/1.1\nHost: a\n\n",
	"GET / HTTP/1.1\nHost: a\nX: a\n b\n\n",
	"GET / HTTP/1.1\nHost : a\n\n",
	"GET / HTTP/1.1\nHost: a\n: b\n\n",
	"GET / HTTP/1.1\nHost: a\nX(Y): b\n\n",
}

// wantTaken are the headSeeds parseHead must take (the common requests;
// each parsed as net/http does, which TestParseHead checks).
var wantTaken = map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true,
	9: true, 10: true, 11: true, 12: true, 14: true, 15: true, 16: true, 17: true, 18: true, 19: true,
	23: true, 24: true, 26: true, 27: true, 29: true, 30: true, 31: true, 32: true, 33: true, 38: true}

// stdRequest is what the loop serves for data without parseHead: the
// request of http.ReadRequest, checked as net/http's server checks it.
func stdRequest(data []byte, head []byte) (*http.Request, error) {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
	if err != nil {
		return nil, err
	}
	if err := checkRequest(req, head); err != nil {
		return nil, err
	}
	return req, nil
}

// compareHead checks that data, whose header parseHead took (into x,
// with its body in body), means to parseHead what it means to net/http.
func compareHead(t *testing.T, data []byte, x *exchange) {
	t.Helper()
	n, _ := scanHead(data)
	std, err := stdRequest(data, data[:n])
	if err != nil {
		t.Fatalf("%q: parseHead took a request net/http rejects: %v", data, err)
	}
	got := &x.req
	if got.Context() != &x.ctx {
		t.Errorf("%q: the request's context is not the exchange's", data)
	}
	for _, d := range []struct {
		what      string
		got, want any
	}{
		{"method", got.Method, std.Method},
		{"URL", *got.URL, *std.URL},
		{"URL string", got.URL.String(), std.URL.String()},
		{"request URI", got.RequestURI, std.RequestURI},
		{"proto", fmt.Sprint(got.Proto, got.ProtoMajor, got.ProtoMinor), fmt.Sprint(std.Proto, std.ProtoMajor, std.ProtoMinor)},
		{"header", got.Header, std.Header},
		{"host", got.Host, std.Host},
		{"content length", got.ContentLength, std.ContentLength},
		{"close", got.Close, std.Close},
		{"transfer encoding", got.TransferEncoding, std.TransferEncoding},
		{"trailer", got.Trailer, std.Trailer},
		{"no body", got.Body == http.NoBody, std.Body == http.NoBody},
	} {
		if !reflect.DeepEqual(d.got, d.want) {
			t.Errorf("%q: %s %#v, net/http %#v", data, d.what, d.got, d.want)
		}
	}
	gb, gerr := io.ReadAll(got.Body)
	sb, serr := io.ReadAll(std.Body)
	if !bytes.Equal(gb, sb) || fmt.Sprint(gerr) != fmt.Sprint(serr) {
		t.Errorf("%q: body %q (%v), net/http %q (%v)", data, gb, gerr, sb, serr)
	}
}

// parse runs parseHead on data as the loop does: on the header the scan
// delimited, with the body read from what follows. It reports false if
// the scan hands data off or finds it incomplete.
func parse(data []byte) (*exchange, bool) {
	n, reason := scanHead(data)
	if n == 0 || reason != "" {
		return nil, false
	}
	x := &exchange{}
	return x, parseHead(data[:n], x, bufio.NewReader(bytes.NewReader(data[n:])))
}

func TestParseHead(t *testing.T) {
	for i, s := range headSeeds {
		data := crlf(s)
		x, ok := parse(data)
		if ok != wantTaken[i] {
			t.Errorf("%q: taken %v, want %v", data, ok, wantTaken[i])
		}
		if ok {
			compareHead(t, data, x)
		}
	}
}

// TestParseHeadFieldRoom checks that field values beyond the exchange's
// room and repeated names land where net/http puts them.
func TestParseHeadFieldRoom(t *testing.T) {
	var b strings.Builder
	b.WriteString("GET / HTTP/1.1\nHost: a\n")
	for i := range 3 * maxInlineFields {
		fmt.Fprintf(&b, "X-%d: %d\nX-Same: %d\n", i%5, i, i)
	}
	b.WriteString("\n")
	data := crlf(b.String())
	x, ok := parse(data)
	if !ok {
		t.Fatal("not taken")
	}
	compareHead(t, data, x)
}

// FuzzParseHead holds parseHead to http.ReadRequest and the server's
// checks: a header it takes must be one net/http accepts, and mean the
// same request, body included.
func FuzzParseHead(f *testing.F) {
	for _, s := range headSeeds {
		f.Add(crlf(s))
	}
	for _, s := range fuzzSeeds() {
		if len(s) <= 2*bufSize { // a header fits the buffer; long bodies only slow the fuzzer
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if x, ok := parse(data); ok {
			compareHead(t, data, x)
		}
	})
}

// BenchmarkParseHead compares parseHead with http.ReadRequest on a
// typical browser request.
func BenchmarkParseHead(b *testing.B) {
	data := crlf("GET /static/app.js?v=3 HTTP/1.1\nHost: shop.example\n" +
		"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\n" +
		"Accept: */*\nAccept-Language: en-US,en;q=0.5\nAccept-Encoding: gzip, deflate, br\n" +
		"Referer: https://shop.example/\nConnection: keep-alive\nSec-Fetch-Dest: script\n\n")
	n, _ := scanHead(data)
	br := bufio.NewReader(nil)
	b.Run("parseHead", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if !parseHead(data[:n], &exchange{}, br) {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("ReadRequest", func(b *testing.B) {
		b.ReportAllocs()
		r := bytes.NewReader(nil)
		for range b.N {
			r.Reset(data)
			br.Reset(r)
			if _, err := http.ReadRequest(br); err != nil {
				b.Fatal(err)
			}
		}
	})
}
