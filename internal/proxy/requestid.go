package proxy

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"sync/atomic"
	"unsafe"
)

// maxRequestIDLen bounds an X-Request-Id kept from a trusted peer; a longer
// one is replaced.
const maxRequestIDLen = 128

// idSource generates request IDs without a lock: a random 64-bit prefix
// drawn once per Proxy and a 64-bit counter, as 32 hex digits. IDs are
// unique per process start, and across replicas with overwhelming
// likelihood; they are not secret and not meant to be unguessable.
type idSource struct {
	prefix [16]byte // hex of the random prefix
	n      atomic.Uint64
}

func newIDSource() *idSource {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	s := &idSource{}
	hex.Encode(s.prefix[:], b[:])
	s.n.Store(binary.BigEndian.Uint64(b[:]) >> 32) // counters of replicas start apart
	return s
}

// idValue is a header value holding a new ID: the value slice and the
// string's bytes in one allocation.
type idValue struct {
	vals [1]string
	buf  [32]byte
}

// next returns a new ID as a header value (a one-element slice).
func (s *idSource) next() []string {
	v := new(idValue)
	copy(v.buf[:16], s.prefix[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], s.n.Add(1))
	hex.Encode(v.buf[16:], n[:])
	// buf is never written again: the string may share it.
	v.vals[0] = unsafe.String(&v.buf[0], len(v.buf))
	return v.vals[:]
}

// validRequestID reports whether an incoming ID may be kept: 1 to
// maxRequestIDLen bytes of letters, digits and "-_.:+/=" (UUIDs, hex,
// base64 and the common trace formats), nothing that could split a log
// line or a header.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':' || c == '+' || c == '/' || c == '=':
		default:
			return false
		}
	}
	return true
}

// setRequestID gives r an X-Request-Id, the trusted peer's if it sent a
// valid one, else a new one, and returns it on the response too.
func (p *Proxy) setRequestID(w http.ResponseWriter, r *http.Request) {
	h := r.Header
	if vals := h["X-Request-Id"]; len(vals) == 1 && validRequestID(vals[0]) {
		if _, trusted := p.peer(r.RemoteAddr); trusted {
			w.Header()["X-Request-Id"] = vals
			return
		}
	}
	vals := p.ids.next()
	h["X-Request-Id"] = vals
	w.Header()["X-Request-Id"] = vals
}
