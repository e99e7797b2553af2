package http1

import "bytes"

// Reasons a connection is handed to net/http (label values of the
// hand-off metric).
const (
	reasonVersion          = "version"           // not HTTP/1.1 (HTTP/1.0, HTTP/2 preface, garbage)
	reasonUpgrade          = "upgrade"           // an Upgrade header: WebSocket and other protocol switches
	reasonExpect           = "expect"            // an Expect header (100-continue)
	reasonTransferEncoding = "transfer_encoding" // a Transfer-Encoding header (chunked request bodies)
	reasonHeaderSize       = "header_size"       // a request header larger than the fast loop's buffer
	reasonTarget           = "target"            // a request target other than a path: absolute-form, CONNECT, "*"
)

// scanHead looks at the start of buf, the unread bytes of a connection,
// for one request header as net/textproto reads it: lines end at "\n",
// with one "\r" before it dropped, and the header ends at the first empty
// line. It reports the header's length (0 while it is incomplete) and,
// when the request needs what only net/http offers, why.
//
// It does not validate: the header is parsed by http.ReadRequest, which
// rejects what is malformed. scanHead only has to find, in a header that
// parses, every request line and field that the fast loop leaves to
// net/http; handing off more than needed is always safe. Field names are
// compared without regard to ASCII case, as net/textproto canonicalizes them.
func scanHead(buf []byte) (n int, reason string) {
	pos := 0
	for line := 0; ; line++ {
		i := bytes.IndexByte(buf[pos:], '\n')
		if i < 0 {
			return 0, "" // incomplete
		}
		l := buf[pos : pos+i]
		pos += i + 1
		if len(l) > 0 && l[len(l)-1] == '\r' {
			l = l[:len(l)-1]
		}
		if line == 0 {
			if !bytes.HasSuffix(l, http11) {
				return pos, reasonVersion
			}
			// Origin-form only ("/path"): absolute-form, authority-form
			// (CONNECT) and "*" keep net/http's rules for Host.
			if _, target, _ := bytes.Cut(l, space); len(target) == 0 || target[0] != '/' {
				return pos, reasonTarget
			}
			continue
		}
		if len(l) == 0 {
			return pos, reason
		}
		name, _, ok := bytes.Cut(l, colon)
		if !ok {
			continue // malformed: ReadRequest will say so
		}
		switch {
		case asciiEqualFold(name, "Upgrade"):
			reason = reasonUpgrade
		case asciiEqualFold(name, "Expect"):
			reason = reasonExpect
		case asciiEqualFold(name, "Transfer-Encoding"):
			reason = reasonTransferEncoding
		}
	}
}

// leadingCRLF counts the CR and LF bytes at the start of b, as net/http
// skips them after a POST (RFC 9112 section 2.2 tolerance).
func leadingCRLF(b []byte) int {
	n := 0
	for n < len(b) && (b[n] == '\r' || b[n] == '\n') {
		n++
	}
	return n
}

// hasField reports whether the header head (as scanHead delimited it) has
// a field named name, compared without regard to case.
func hasField(head []byte, name string) bool {
	for l := range bytes.Lines(head) {
		n, _, ok := bytes.Cut(l, colon)
		if ok && asciiEqualFold(n, name) {
			return true
		}
	}
	return false
}
