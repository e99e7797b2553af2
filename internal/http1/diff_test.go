package http1

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// diffCase is a byte sequence sent on one connection to both servers.
type diffCase struct {
	name     string
	parts    [][]byte
	talkOpts // seq: each part once the requests before it reached the handler; halfClose: EOF after the parts
	// via says who served each request the handler saw on the fast
	// target: "F" the fast loop, "N" net/http ("" for none). It makes
	// sure a case tests what it is meant to.
	via string
	// closed, if set, is whether the connection must end closed ("y")
	// or open ("n").
	closed string
	// status, if set, is the status codes of the responses, in order.
	status string
}

func one(s string) [][]byte { return [][]byte{crlf(s)} }

func raw(s string) [][]byte { return [][]byte{[]byte(s)} }

// post is a POST to target with body, framed by Content-Length.
func post(target, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\nHost: a\nContent-Length: %d\n\n", target, len(body)) + body
}

// withBody is head (as text, without its empty line) with a
// Content-Length field for body, then body; "\n" become "\r\n" in both.
func withBody(head, body string) []byte {
	b := crlf(body)
	return append(crlf(fmt.Sprintf("%sContent-Length: %d\n\n", head, len(b))), b...)
}

// bigHeader is a GET whose header is about n bytes long.
func bigHeader(n int) string {
	const head = "GET / HTTP/1.1\nHost: a\n"
	pad := n - len(head) - len("X-Pad: \n\n") - strings.Count(head, "\n") - 2
	return head + "X-Pad: " + strings.Repeat("p", max(pad, 0)) + "\n\n"
}

// exactHeader is a GET whose header is exactly n bytes once "\n" became
// "\r\n".
func exactHeader(n int) []byte {
	b := crlf("GET / HTTP/1.1\nHost: a\nX-Pad: \n\n")
	pad := n - len(b)
	return bytes.Replace(b, []byte("X-Pad: "), []byte("X-Pad: "+strings.Repeat("p", pad)), 1)
}

var diffCases = []diffCase{
	// Plain traffic.
	{name: "get", parts: one("GET / HTTP/1.1\nHost: a\n\n"), via: "F", closed: "n", status: "200"},
	{name: "keep-alive sequence", talkOpts: talkOpts{seq: true}, via: "FFF", closed: "n", parts: [][]byte{
		crlf("GET /1 HTTP/1.1\nHost: a\n\n"),
		crlf(post("/2", "hello")),
		crlf("GET /3 HTTP/1.1\nHost: a\n\n"),
	}},
	{name: "pipelined in pieces", via: "FF", closed: "n", parts: [][]byte{
		crlf("GET /1 HTTP/1.1\nHost: a\n\nGET /2 HT"), crlf("TP/1.1\nHost: a\n\n")}},
	{name: "connection close", via: "F", closed: "y", parts: one(
		"GET /1 HTTP/1.1\nHost: a\nConnection: close\n\nGET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "connection close token", via: "F", closed: "y", parts: one(
		"GET / HTTP/1.1\nHost: a\nConnection: keep-alive, Close\n\n")},
	{name: "pipelined", via: "FFFF", closed: "n", parts: one(
		"GET /1 HTTP/1.1\nHost: a\n\n" +
			"HEAD /2 HTTP/1.1\nHost: a\n\n" +
			post("/3", "hello") +
			"GET /4?st=204 HTTP/1.1\nHost: a\n\n")},
	{name: "head", via: "FF", closed: "n", parts: one(
		"HEAD / HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},
	{name: "handler keep-alive, request close", via: "F", closed: "y", parts: one(
		"GET /?ka=1 HTTP/1.1\nHost: a\nConnection: close\n\n")},
	{name: "head with body written", via: "FF", closed: "n", parts: one(
		"HEAD /?n=10 HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},
	{name: "304 with length and type", via: "F", parts: one("GET /?st=304&cl=5&ct=text/html HTTP/1.1\nHost: a\n\n")},
	{name: "header value spaces", via: "F", parts: one("GET /?hdr=%C2%A0x%09%C2%A0 HTTP/1.1\nHost: a\n\n")},
	{name: "trailer with length", via: "F", parts: one("GET /?trailer=1&cl=auto HTTP/1.1\nHost: a\n\n")},
	{name: "handler length exceeded later", via: "F", closed: "y", parts: one(
		"GET /?cl=1&n=3&flush=1 HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},
	{name: "handler length invalid", via: "F", parts: one("GET /?cl=abc HTTP/1.1\nHost: a\n\n")},
	{name: "handler length empty", via: "F", parts: one("GET /?cl= HTTP/1.1\nHost: a\n\n")},
	{name: "handler length with zeros", via: "F", parts: one("GET /?cl=0015 HTTP/1.1\nHost: a\n\n")},
	{name: "head with length exceeded", via: "FF", closed: "n", parts: one(
		"HEAD /?cl=3&n=5 HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},
	{name: "head with trailer", via: "F", parts: one("HEAD /?trailer=1 HTTP/1.1\nHost: a\n\n")},
	{name: "head 204", via: "F", parts: one("HEAD /?st=204&n=5 HTTP/1.1\nHost: a\n\n")},
	{name: "304 with trailer", via: "F", parts: one("GET /?st=304&trailer=1 HTTP/1.1\nHost: a\n\n")},
	{name: "informational with trailer and length", via: "F", parts: one("GET /?info=103&trailer=1&cl=auto HTTP/1.1\nHost: a\n\n")},
	{name: "declared trailer, flushed", via: "F", parts: one("GET /?trailer=1&flush=1 HTTP/1.1\nHost: a\n\n")},
	{name: "both trailers, large body", via: "F", parts: one("GET /?trailer=1&ptrailer=1&n=3000 HTTP/1.1\nHost: a\n\n")},
	{name: "handler close, request close", via: "F", closed: "y", parts: one("GET /?close=1 HTTP/1.1\nHost: a\nConnection: close\n\n")},
	{name: "HTTP/1.0 handler keep-alive", via: "N", parts: one("GET /?ka=1 HTTP/1.0\n\n")},
	{name: "handler close", via: "F", closed: "y", parts: one("GET /?close=1 HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},
	{name: "head with length", via: "F", parts: one("HEAD /?cl=auto HTTP/1.1\nHost: a\n\n")},
	{name: "head with large body written", via: "F", parts: one("HEAD /?n=5000 HTTP/1.1\nHost: a\n\n")},
	{name: "head with flushed body", via: "F", parts: one("HEAD /?n=10&flush=1 HTTP/1.1\nHost: a\n\n")},
	{name: "head with short length", via: "FF", parts: one(
		"HEAD /?cl=100 HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},
	{name: "204", via: "FF", status: "204 200", parts: one(
		"GET /?st=204 HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},
	{name: "204 with length", via: "F", parts: one("GET /?st=204&cl=5 HTTP/1.1\nHost: a\n\n")},
	{name: "304", via: "FF", status: "304 200", parts: one(
		"GET /?st=304 HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},
	{name: "unknown status", via: "F", status: "599", parts: one("GET /?st=599 HTTP/1.1\nHost: a\n\n")},
	{name: "informational", via: "F", status: "103 200", parts: one("GET /?info=103 HTTP/1.1\nHost: a\n\n")},
	{name: "content type kept", via: "F", parts: one("GET /?ct=text/html HTTP/1.1\nHost: a\n\n")},
	{name: "header value newline", via: "F", parts: one("GET /?hdr=a%0D%0Ab HTTP/1.1\nHost: a\n\n")},
	{name: "empty body", via: "F", parts: one("GET /?n=0 HTTP/1.1\nHost: a\n\n")},
	{name: "body 2048", via: "F", parts: one("GET /?n=2048 HTTP/1.1\nHost: a\n\n")},
	{name: "body 2049", via: "F", parts: one("GET /?n=2049 HTTP/1.1\nHost: a\n\n")},
	{name: "body large", via: "F", parts: one("GET /?n=100000 HTTP/1.1\nHost: a\n\n")},
	{name: "flushed body", via: "F", parts: one("GET /?flush=1 HTTP/1.1\nHost: a\n\n")},
	{name: "declared trailer", via: "F", parts: one("GET /?trailer=1 HTTP/1.1\nHost: a\n\n")},
	{name: "prefixed trailer", via: "F", parts: one("GET /?ptrailer=1&flush=1 HTTP/1.1\nHost: a\n\n")},
	{name: "prefixed trailer on short body", via: "F", parts: one("GET /?ptrailer=1 HTTP/1.1\nHost: a\n\n")},
	{name: "handler length", via: "FF", closed: "n", parts: one(
		"GET /?cl=auto HTTP/1.1\nHost: a\n\nGET /?cl=auto&n=5000 HTTP/1.1\nHost: a\n\n")},
	{name: "handler length short", via: "F", closed: "y", parts: one("GET /?cl=10&n=5 HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},
	{name: "handler length exceeded", via: "F", closed: "y", parts: one("GET /?cl=3&n=5 HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},

	// Request bodies.
	{name: "body", via: "F", parts: one(post("/", "hello"))},
	{name: "body zero", via: "F", parts: one(post("/", ""))},
	{name: "get with body", via: "FF", parts: one(
		"GET / HTTP/1.1\nHost: a\nContent-Length: 4\n\nbodyGET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "body in pieces", via: "F", parts: [][]byte{
		crlf("POST / HTTP/1.1\nHost: a\nContent-Length: 10\n\nhel"), []byte("lo wo"), []byte("rl"), []byte("d")}},
	{name: "body unread small", via: "FF", closed: "n", parts: one(
		post("/?noread=1", strings.Repeat("b", 1000)) + "GET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "body unread small in pieces", via: "FF", closed: "n", parts: [][]byte{
		crlf("POST /?noread=1 HTTP/1.1\nHost: a\nContent-Length: 100000\n\n"),
		bytes.Repeat([]byte("b"), 100000),
		crlf("GET /2 HTTP/1.1\nHost: a\n\n"),
	}},
	{name: "body unread large", via: "F", closed: "y", parts: [][]byte{
		crlf("POST /?noread=1 HTTP/1.1\nHost: a\nContent-Length: 300000\n\n"),
		bytes.Repeat([]byte("b"), 300000),
		crlf("GET /2 HTTP/1.1\nHost: a\n\n"),
	}},
	{name: "body unread 256k", via: "F", closed: "y", parts: [][]byte{
		crlf("POST /?noread=1 HTTP/1.1\nHost: a\nContent-Length: 262144\n\n"),
		bytes.Repeat([]byte("b"), 262144),
		crlf("GET /2 HTTP/1.1\nHost: a\n\n"),
	}},
	{name: "body closed small", via: "FF", closed: "n", parts: one(
		post("/?bclose=1", strings.Repeat("b", 1000)) + "GET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "body closed large", via: "F", closed: "y", parts: [][]byte{
		crlf("POST /?bclose=1 HTTP/1.1\nHost: a\nContent-Length: 300000\n\n"),
		bytes.Repeat([]byte("b"), 300000),
		crlf("GET /2 HTTP/1.1\nHost: a\n\n"),
	}},
	{name: "body closed 256k", via: "F", closed: "y", parts: [][]byte{
		crlf("POST /?bclose=1 HTTP/1.1\nHost: a\nContent-Length: 262144\n\n"),
		bytes.Repeat([]byte("b"), 262144),
		crlf("GET /2 HTTP/1.1\nHost: a\n\n"),
	}},
	{name: "body partly read", via: "FF", closed: "n", parts: [][]byte{
		crlf("POST /?read=100000 HTTP/1.1\nHost: a\nContent-Length: 300000\n\n"),
		bytes.Repeat([]byte("b"), 300000),
		crlf("GET /2 HTTP/1.1\nHost: a\n\n"),
	}},
	{name: "body unread, request close", via: "F", closed: "y", parts: one(
		"POST /?noread=1 HTTP/1.1\nHost: a\nConnection: close\nContent-Length: 5\n\nhello")},
	{name: "body unread, handler close", via: "F", closed: "y", parts: one(
		post("/?noread=1&close=1", "hello") + "GET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "body unread, flushed response", via: "FF", closed: "n", parts: one(
		post("/?noread=1&flush=1", "hello") + "GET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "body unread large, flushed response", via: "F", closed: "y", parts: [][]byte{
		crlf("POST /?noread=1&flush=1 HTTP/1.1\nHost: a\nContent-Length: 300000\n\n"),
		bytes.Repeat([]byte("b"), 300000),
	}},
	{name: "body unread, HEAD", via: "FF", closed: "n", parts: one(
		"HEAD /?noread=1 HTTP/1.1\nHost: a\nContent-Length: 5\n\nhelloGET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "body closed, cut short", via: "F", talkOpts: talkOpts{halfClose: true}, parts: one(
		"POST /?bclose=1 HTTP/1.1\nHost: a\nContent-Length: 10\n\nhello")},
	{name: "body cut short", via: "F", talkOpts: talkOpts{halfClose: true}, parts: one(
		"POST / HTTP/1.1\nHost: a\nContent-Length: 10\n\nhello")},
	{name: "body unread, cut short", via: "F", talkOpts: talkOpts{halfClose: true}, parts: one(
		"POST /?noread=1 HTTP/1.1\nHost: a\nContent-Length: 10\n\nhello")},
	{name: "body unread just under 256k", via: "FF", closed: "n", parts: [][]byte{
		crlf("POST /?noread=1 HTTP/1.1\nHost: a\nContent-Length: 262143\n\n"),
		bytes.Repeat([]byte("b"), 262143),
		crlf("GET /2 HTTP/1.1\nHost: a\n\n"),
	}},
	{name: "body short, client waits", via: "F", closed: "n", parts: one(
		"POST / HTTP/1.1\nHost: a\nContent-Length: 10\n\nhello")},
	{name: "leading CRLF after POST", via: "FF", closed: "n", parts: one(
		post("/", "hello") + "\nGET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "leading CRLF after POST in pieces", via: "FF", closed: "n", parts: [][]byte{
		crlf(post("/", "hello") + "\n"), crlf("GET /2 HTTP/1.1\nHost: a\n\n")}},
	{name: "many CRLF after POST", via: "F", parts: one(
		post("/", "hello") + "\n\n\nGET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "leading CRLF after GET", via: "F", parts: one(
		"GET / HTTP/1.1\nHost: a\n\n\nGET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "trailing CRLF after GET", via: "F", closed: "n", parts: one("GET / HTTP/1.1\nHost: a\n\n\n")},
	{name: "CRLF after POST then idle", via: "F", closed: "n", parts: one(post("/", "hello") + "\n")},
	{name: "three bytes after GET", via: "F", closed: "n", parts: one("GET / HTTP/1.1\nHost: a\n\nGET")},
	{name: "three bytes after GET in pieces", via: "F", closed: "n", parts: [][]byte{
		crlf("GET / HTTP/1.1\nHost: a\n\nG"), []byte("E"), []byte("T")}},
	{name: "three bytes after GET, then EOF", via: "F", closed: "y", talkOpts: talkOpts{halfClose: true},
		parts: one("GET / HTTP/1.1\nHost: a\n\nGET")},
	{name: "EOF after GET", via: "F", closed: "y", talkOpts: talkOpts{halfClose: true}, parts: one("GET / HTTP/1.1\nHost: a\n\n")},
	{name: "incomplete header, then EOF", via: "", status: "400", talkOpts: talkOpts{halfClose: true},
		parts: one("GET / HTTP/1.1\nHost: a\n")},
	{name: "incomplete request line, then EOF", via: "", status: "400", talkOpts: talkOpts{halfClose: true},
		parts: raw("GET / HTTP/1.1")},
	{name: "one byte, then EOF", via: "", status: "400", talkOpts: talkOpts{halfClose: true}, parts: raw("G")},
	{name: "incomplete second header, then EOF", via: "F", status: "200 400", talkOpts: talkOpts{halfClose: true},
		parts: one("GET / HTTP/1.1\nHost: a\n\nGET /2 HTTP/1.1\n")},
	{name: "incomplete header in pieces, then EOF", via: "F", status: "200 400", talkOpts: talkOpts{halfClose: true},
		parts: [][]byte{crlf("GET / HTTP/1.1\nHost: a\n\nGET /2 HT"), []byte("TP/1.1\r\nHost: a\r\n")}},
	{name: "leading CRLF first", via: "", parts: one("\nGET / HTTP/1.1\nHost: a\n\n")},

	{name: "missing host", via: "", closed: "y", status: "400", parts: one("GET / HTTP/1.1\nX: y\n\n")},
	// Host.
	{name: "empty host", via: "F", parts: one("GET / HTTP/1.1\nHost:\n\n")},
	{name: "invalid host", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a b\n\n")},
	{name: "invalid host char", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a/b\n\n")},
	{name: "host utf-8", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: bücher.example\n\n")},
	{name: "two hosts", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\nHost: b\n\n")},
	{name: "two equal hosts", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\nhost: a\n\n")},
	{name: "host with port", via: "F", parts: one("GET / HTTP/1.1\nHost: a.example:8080\n\n")},
	{name: "host ipv6", via: "F", parts: one("GET / HTTP/1.1\nHost: [::1]:80\n\n")},
	{name: "absolute-form", via: "N", parts: one("GET http://b.example/x?y=1 HTTP/1.1\nHost: a\n\n")},
	{name: "absolute-form https", via: "N", parts: one("GET https://b.example:8443/x HTTP/1.1\nHost: a\n\n")},
	{name: "absolute-form empty host field", via: "N", parts: one("GET http://b.example/ HTTP/1.1\nHost:\n\n")},
	{name: "absolute-form without host field", via: "", status: "400", parts: one("GET http://b.example/ HTTP/1.1\n\n")},
	{name: "absolute-form invalid host field", via: "", status: "400", parts: one("GET http://b.example/ HTTP/1.1\nHost: a b\n\n")},
	{name: "absolute-form two host fields", via: "", status: "400", parts: one("GET http://b.example/ HTTP/1.1\nHost: a\nHost: b\n\n")},
	{name: "absolute-form no authority", via: "", status: "400", parts: one("GET http:///x HTTP/1.1\n\n")},
	{name: "authority-form GET", via: "N", parts: one("GET a.example:80 HTTP/1.1\nHost: a\n\n")},
	{name: "CONNECT", via: "N", parts: one("CONNECT a.example:443 HTTP/1.1\nHost: a.example:443\n\n")},
	{name: "CONNECT without host", via: "N", parts: one("CONNECT a.example:443 HTTP/1.1\n\n")},
	{name: "CONNECT path", via: "F", parts: one("CONNECT /x HTTP/1.1\n\n")},

	// Request targets and lines.
	{name: "OPTIONS asterisk", via: "N", status: "200 200", parts: one("OPTIONS * HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")},
	{name: "OPTIONS asterisk with body", via: "", parts: one("OPTIONS * HTTP/1.1\nHost: a\nContent-Length: 3\n\nabc")},
	{name: "GET asterisk", via: "N", parts: one("GET * HTTP/1.1\nHost: a\n\n")},
	{name: "OPTIONS path", via: "F", parts: one("OPTIONS /x HTTP/1.1\nHost: a\n\n")},
	{name: "OPTIONS asterisk lowercase method", via: "N", parts: one("options * HTTP/1.1\nHost: a\n\n")},
	{name: "HTTP/1.0", via: "N", closed: "y", parts: one("GET / HTTP/1.0\n\nGET /2 HTTP/1.0\n\n")},
	{name: "HTTP/1.0 keep-alive", via: "NN", closed: "n", parts: one(
		"GET /?cl=auto HTTP/1.0\nConnection: keep-alive\n\nGET /2?cl=auto HTTP/1.0\nConnection: keep-alive\n\n")},
	{name: "HTTP/1.0 after 1.1", via: "FN", parts: one("GET / HTTP/1.1\nHost: a\n\nGET /2 HTTP/1.0\n\n")},
	{name: "HTTP/1.2", via: "N", parts: one("GET / HTTP/1.2\nHost: a\n\n")},
	{name: "HTTP/2.0", via: "", parts: one("GET / HTTP/2.0\nHost: a\n\n")},
	{name: "HTTP/0.9", via: "", parts: one("GET /\n\n")},
	{name: "h2 preface", via: "N", parts: raw("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")},
	{name: "lowercase version", via: "", status: "400", parts: one("GET / http/1.1\nHost: a\n\n")},
	{name: "two spaces after method", via: "", status: "400", parts: one("GET  / HTTP/1.1\nHost: a\n\n")},
	{name: "two spaces before version", via: "", status: "400", parts: one("GET /  HTTP/1.1\nHost: a\n\n")},
	{name: "trailing space", via: "", status: "400", parts: one("GET / HTTP/1.1 \nHost: a\n\n")},
	{name: "tab separator", via: "", status: "400", parts: one("GET\t/ HTTP/1.1\nHost: a\n\n")},
	{name: "space in target", via: "", status: "400", parts: one("GET /a b HTTP/1.1\nHost: a\n\n")},
	{name: "no target", via: "", status: "400", parts: one("GET HTTP/1.1\nHost: a\n\n")},
	{name: "lowercase method", via: "F", parts: one("get / HTTP/1.1\nHost: a\n\n")},
	{name: "odd method", via: "F", parts: one("M-SEARCH / HTTP/1.1\nHost: a\n\n")},
	{name: "invalid method", via: "", status: "400", parts: one("G(T / HTTP/1.1\nHost: a\n\n")},
	{name: "bad escape", via: "", status: "400", parts: one("GET /%zz HTTP/1.1\nHost: a\n\n")},
	{name: "fragment", via: "F", parts: one("GET /a#b HTTP/1.1\nHost: a\n\n")},
	{name: "TLS hello", via: "", parts: raw("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03")},
	{name: "garbage line", via: "", parts: raw("hello\r\n\r\n")},

	// Header syntax.
	{name: "bare LF", via: "F", parts: raw("GET / HTTP/1.1\nHost: a\nX: y\n\n")},
	{name: "mixed line ends", via: "F", parts: raw("GET / HTTP/1.1\r\nHost: a\nX: y\r\n\n")},
	{name: "obs-fold host", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\n b\n\n")},
	{name: "bare CR in value", via: "", status: "400", parts: raw("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n")},
	{name: "bare CR line ends", via: "", closed: "n", parts: raw("GET / HTTP/1.1\rHost: a\r\r")},
	{name: "CR CR LF", via: "", status: "400", parts: raw("GET / HTTP/1.1\r\nHost: a\r\r\n\r\n")},
	{name: "obs-fold", via: "F", parts: one("GET / HTTP/1.1\nHost: a\nX: a\n  b\n\tc\n\n")},
	{name: "obs-fold first field", via: "", status: "400", parts: one("GET / HTTP/1.1\n Host: a\n\n")},
	{name: "obs-fold empty line", via: "F", parts: one("GET / HTTP/1.1\nHost: a\nX: a\n   \n\n")},
	{name: "NUL in name", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\nX\x00Y: b\n\n")},
	{name: "NUL in value", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\nX: a\x00b\n\n")},
	{name: "space before colon", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost : a\n\n")},
	{name: "CTL in value", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\nX: a\x01b\n\n")},
	{name: "DEL in value", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\nX: a\x7fb\n\n")},
	{name: "tab in value", via: "F", parts: one("GET / HTTP/1.1\nHost: a\nX: a\tb\t\n\n")},
	{name: "obs-text in value", via: "F", parts: one("GET / HTTP/1.1\nHost: a\nX: \xff\xfe\n\n")},
	{name: "non-token name", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\nX(Y): b\n\n")},
	{name: "UTF-8 name", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\nÜ: b\n\n")},
	{name: "no colon", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\nX\n\n")},
	{name: "empty name", via: "", status: "400", parts: one("GET / HTTP/1.1\nHost: a\n: b\n\n")},
	{name: "many fields", via: "F", parts: one("GET / HTTP/1.1\nHost: a\n" + strings.Repeat("X-A: b\n", 300) + "\n")},
	{name: "header 4095", via: "F", parts: [][]byte{exactHeader(4095)}},
	{name: "header 4096", via: "F", parts: [][]byte{exactHeader(4096)}},
	{name: "header 4097", via: "N", parts: [][]byte{exactHeader(4097)}},
	{name: "header 6k", via: "N", parts: one(bigHeader(6000))},
	{name: "header 6k after a request", via: "FN", parts: one("GET / HTTP/1.1\nHost: a\n\n" + bigHeader(6000))},
	{name: "long request line", via: "N", parts: one("GET /" + strings.Repeat("a", 6000) + " HTTP/1.1\nHost: a\n\n")},
	{name: "TE space before colon", via: "", status: "400", parts: one(
		"POST / HTTP/1.1\nHost: a\nContent-Length: 5\nTransfer-Encoding : chunked\n\n0\n\nX")},
	{name: "header over the limit", via: "", closed: "y", status: "431", parts: one(bigHeader(maxHeaderBytes + 8192))},

	// Smuggling: framing fields.
	{name: "CL and TE", via: "NN", parts: one(
		"POST / HTTP/1.1\nHost: a\nContent-Length: 6\nTransfer-Encoding: chunked\n\n0\n\nGET /smuggled HTTP/1.1\nHost: a\n\n")},
	{name: "TE and CL", via: "NN", parts: one(
		"POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\nContent-Length: 6\n\n0\n\nGET /smuggled HTTP/1.1\nHost: a\n\n")},
	{name: "TE tab", via: "N", parts: one(
		"POST / HTTP/1.1\nHost: a\nTransfer-Encoding:\tchunked\n\n5\nhello\n0\n\n")},
	{name: "TE lowercase", via: "N", parts: one(
		"POST / HTTP/1.1\nHost: a\ntransfer-encoding: chunked\n\n5\nhello\n0\n\n")},
	{name: "TE mixed case", via: "N", parts: one(
		"POST / HTTP/1.1\nHost: a\nTRANSFER-encoding: chunked\n\n5\nhello\n0\n\n")},
	{name: "TE xchunked", via: "", parts: one(
		"POST / HTTP/1.1\nHost: a\nTransfer-Encoding: xchunked\n\n5\nhello\n0\n\n")},
	{name: "TE chunked, identity", via: "", parts: one(
		"POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked, identity\n\n5\nhello\n0\n\n")},
	{name: "TE identity", via: "", parts: one(
		"POST / HTTP/1.1\nHost: a\nTransfer-Encoding: identity\nContent-Length: 5\n\nhello")},
	{name: "TE twice", via: "", parts: one(
		"POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\nTransfer-Encoding: chunked\n\n5\nhello\n0\n\n")},
	{name: "TE empty", via: "", parts: one("POST / HTTP/1.1\nHost: a\nTransfer-Encoding:\nContent-Length: 5\n\nhello")},
	{name: "TE in obs-fold", via: "F", parts: one(
		"POST / HTTP/1.1\nHost: a\nContent-Length: 5\nX: a\n Transfer-Encoding: chunked\n\nhello")},
	{name: "TE value in obs-fold", via: "N", parts: one(
		"POST / HTTP/1.1\nHost: a\nTransfer-Encoding:\n chunked\n\n5\nhello\n0\n\n")},
	{name: "TE name folded", via: "", status: "400", parts: one(
		"POST / HTTP/1.1\nHost: a\nTransfer-Encoding\n : chunked\n\n5\nhello\n0\n\n")},
	{name: "TE with NUL", via: "", parts: one(
		"POST / HTTP/1.1\nHost: a\nContent-Length: 5\nTransfer-Encoding: chunked\x00\n\nhello")},
	{name: "request as body of GET", via: "FF", parts: [][]byte{append(
		withBody("GET / HTTP/1.1\nHost: a\n", "POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n"),
		crlf("GET /2 HTTP/1.1\nHost: a\n\n")...)}},
	{name: "chunked body", via: "NN", parts: one(
		"POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n5\nhello\n0\nX-T: v\n\nGET /2 HTTP/1.1\nHost: a\n\n")},
	{name: "CL duplicate equal", via: "F", parts: one(
		"POST / HTTP/1.1\nHost: a\nContent-Length: 5\nContent-Length: 5\n\nhello")},
	{name: "CL duplicate different", via: "", status: "400", parts: one(
		"POST / HTTP/1.1\nHost: a\nContent-Length: 5\nContent-Length: 6\n\nhello!")},
	{name: "CL list", via: "", status: "400", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length: 5, 5\n\nhello")},
	{name: "CL space before colon", via: "", status: "400", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length : 5\n\nhello")},
	{name: "CL plus", via: "", status: "400", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length: +5\n\nhello")},
	{name: "CL minus", via: "", status: "400", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length: -5\n\nhello")},
	{name: "CL spaces", via: "F", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length:   5  \n\nhello")},
	{name: "CL inner space", via: "", status: "400", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length: 5 5\n\nhello")},
	{name: "CL hex", via: "", status: "400", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length: 0x5\n\nhello")},
	{name: "CL leading zeros", via: "F", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length: 005\n\nhello")},
	{name: "CL empty", via: "", status: "400", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length:\n\nhello")},
	{name: "CL huge", via: "", status: "400", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length: 99999999999999999999\n\nhello")},
	{name: "CL obs-fold", via: "F", parts: one("POST / HTTP/1.1\nHost: a\nContent-Length:\n 5\n\nhello")},

	// The loop's own header parser (head.go) and its fall-back to
	// http.ReadRequest.
	{name: "lowercase and repeated fields", via: "F", parts: one(
		"GET / HTTP/1.1\nhost: a\nx-a: 1\nX-A: 2\nuser-agent: u\nACCEPT: */*\n\n")},
	{name: "fields beyond the inline room", via: "F", parts: one("GET / HTTP/1.1\nHost: a\n" +
		"A: 1\nB: 2\nC: 3\nD: 4\nE: 5\nF: 6\nG: 7\nH: 8\nI: 9\nJ: 10\nA: 11\n\n")},
	{name: "escaped path", via: "F", parts: one("GET /a%20b/%2F?x=%zz HTTP/1.1\nHost: a\n\n")},
	{name: "path to escape", via: "F", parts: one("GET /a!b(c)\xc3\xa4 HTTP/1.1\nHost: a\n\n")},
	{name: "empty query", via: "F", parts: one("GET /a? HTTP/1.1\nHost: a\n\n")},
	{name: "two question marks", via: "F", parts: one("GET /a?b? HTTP/1.1\nHost: a\n\n")},
	{name: "pragma", via: "F", parts: one("GET / HTTP/1.1\nHost: a\nPragma: no-cache\n\n")},
	{name: "trailer field without chunks", via: "F", parts: one("GET / HTTP/1.1\nHost: a\nTrailer: X\n\n")},
	{name: "blanks around values", via: "F", parts: one("GET / HTTP/1.1\nHost:  a \t\nX:\t\n\n")},

	// Hand-offs served by net/http.
	{name: "upgrade", via: "N", parts: one("GET / HTTP/1.1\nHost: a\nUpgrade: websocket\nConnection: Upgrade\n\n")},
	{name: "upgrade lowercase", via: "N", parts: one("GET / HTTP/1.1\nHost: a\nupgrade: x\n\n")},
	{name: "expect continue", via: "N", parts: one("POST / HTTP/1.1\nHost: a\nExpect: 100-continue\nContent-Length: 5\n\nhello")},
	{name: "expect other", via: "", parts: one("POST / HTTP/1.1\nHost: a\nExpect: x\nContent-Length: 5\n\nhello")},
	{name: "expect after requests", via: "FN", parts: one(
		"GET / HTTP/1.1\nHost: a\n\nPOST / HTTP/1.1\nHost: a\nExpect: 100-continue\nContent-Length: 5\n\nhello")},
}

func statuses(r result, methods []string) string {
	rs, _ := parseResponses(r.raw, methods)
	var s []string
	for _, p := range rs {
		s = append(s, p.Status[:3])
	}
	return strings.Join(s, " ")
}

func TestDifferential(t *testing.T) {
	std, fast := startPair(t, diffHandler)
	runConcurrently(t, diffCases, func(t *testing.T, tc diffCase) { runDiffCase(t, std, fast, tc) })
}

// runConcurrently runs a subtest per case, several at a time: most
// cases wait for a silence, and t.Parallel would run only GOMAXPROCS of
// them at once.
func runConcurrently(t *testing.T, cases []diffCase, f func(*testing.T, diffCase)) {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, tc := range cases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t.Run(tc.name, func(t *testing.T) { f(t, tc) })
		}()
	}
	wg.Wait()
}

// runDiffCase sends tc to both targets and compares. The read of a
// connection that stays open ends after a short silence; when the two
// differ, or the fast server's answer is not what the case expects, the
// case runs again with a long silence before it fails, so that a stalled
// machine makes no failure. (A stall longer than the short silence can
// leave both answers empty: equal, yet not the case's.)
func runDiffCase(t *testing.T, std, fast *target, tc diffCase) {
	var diffs []string
	var s, f result
	for _, idle := range []time.Duration{300 * time.Millisecond, 3 * time.Second} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			s = talk(t, std, idle, tc.talkOpts, tc.parts...)
		}()
		f = talk(t, fast, idle, tc.talkOpts, tc.parts...)
		<-done
		diffs = append(compareResults(s, f), expectations(tc, f)...)
		if len(diffs) == 0 {
			break
		}
	}
	for _, d := range diffs {
		t.Error(d)
	}
	if t.Failed() {
		t.Logf("fast raw: %q", trunc(f.raw))
		t.Logf("std raw:  %q", trunc(s.raw))
	}
}

// expectations are the ways the fast server's result f differs from
// what tc expects of it.
func expectations(tc diffCase, f result) []string {
	var out []string
	var via string
	var methods []string
	for _, x := range f.seen {
		via += x.via
		methods = append(methods, x.Method)
	}
	if via != tc.via {
		out = append(out, fmt.Sprintf("served by %q, want %q", via, tc.via))
	}
	if tc.closed != "" && f.closed != (tc.closed == "y") {
		out = append(out, fmt.Sprintf("closed %v, want %s", f.closed, tc.closed))
	}
	if got := statuses(f, methods); tc.status != "" && got != tc.status {
		out = append(out, fmt.Sprintf("statuses %q, want %q", got, tc.status))
	}
	return out
}

func trunc(b []byte) []byte {
	if len(b) > 2000 {
		return b[:2000]
	}
	return b
}
