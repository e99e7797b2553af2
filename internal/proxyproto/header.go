// Package proxyproto reads the PROXY protocol header (versions 1 and 2, as
// specified in HAProxy's proxy-protocol.txt) that a TCP load balancer puts in
// front of a connection to pass on the client's address.
//
// It sits at the very bottom of sluice's data path: internal/server wraps the
// traffic listeners with NewListener, below TLS, so that the handler sees
// the original client in Request.RemoteAddr. Headers are honoured only from
// trusted peers; every other connection is passed through untouched.
package proxyproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// Command is the command of a PROXY header.
type Command uint8

const (
	// Local means the connection was opened by the proxy itself (for
	// example a health check); the real peer address applies.
	Local Command = iota
	// Proxy means the connection is relayed for the client in Source.
	Proxy
)

func (c Command) String() string {
	if c == Local {
		return "LOCAL"
	}
	return "PROXY"
}

// Header is a parsed PROXY protocol header.
type Header struct {
	// Version is 1 (text) or 2 (binary).
	Version int
	// Command is Local or Proxy. Version 1 headers are always Proxy.
	Command Command
	// Source and Destination are the original connection's endpoints. They
	// are the zero AddrPort when the header carries none that applies to a
	// TCP connection: LOCAL, v1 UNKNOWN, v2 AF_UNSPEC or AF_UNIX.
	Source, Destination netip.AddrPort
	// TLVs holds the raw type-length-value extensions of a version 2 header
	// (unparsed, possibly empty).
	TLVs []byte
}

// HasAddress reports whether the header carries a client address that
// replaces the peer's.
func (h *Header) HasAddress() bool {
	return h != nil && h.Command == Proxy && h.Source.IsValid()
}

// Errors returned for malformed headers. They wrap into the error a Conn's
// Read returns.
var (
	// ErrInvalid reports a header that does not follow the specification.
	ErrInvalid = errors.New("invalid PROXY protocol header")
	// ErrMissing reports a trusted peer that sent no header although one
	// is required.
	ErrMissing = errors.New("missing PROXY protocol header")
)

const (
	// v1MaxLen is the longest version 1 header, CRLF included.
	v1MaxLen = 107
	// v2HeaderLen is the fixed part of a version 2 header.
	v2HeaderLen = 16
	// V2MaxLen caps the length field of a version 2 header (addresses and
	// TLVs): larger headers are rejected rather than buffered.
	V2MaxLen = 4096
)

var (
	v1Prefix    = []byte("PROXY ")
	v2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")
)

// parseV1 parses a complete version 1 header line, CRLF included.
func parseV1(line []byte) (Header, error) {
	h := Header{Version: 1, Command: Proxy}
	if len(line) > v1MaxLen {
		return h, fmt.Errorf("%w: v1 header longer than %d bytes", ErrInvalid, v1MaxLen)
	}
	body, ok := bytes.CutPrefix(line, v1Prefix)
	if !ok {
		return h, fmt.Errorf("%w: v1 header does not start with %q", ErrInvalid, v1Prefix)
	}
	body, ok = bytes.CutSuffix(body, []byte("\r\n"))
	if !ok || bytes.IndexAny(body, "\r\n") >= 0 {
		return h, fmt.Errorf("%w: v1 header not terminated by a single CRLF", ErrInvalid)
	}
	// "PROXY UNKNOWN" may be followed by anything up to the CRLF, which
	// the receiver must ignore.
	if rest, ok := bytes.CutPrefix(body, []byte("UNKNOWN")); ok && (len(rest) == 0 || rest[0] == ' ') {
		return h, nil
	}
	fields := bytes.Split(body, []byte(" "))
	if len(fields) != 5 {
		return h, fmt.Errorf("%w: v1 header needs 5 space-separated fields after PROXY, got %d", ErrInvalid, len(fields))
	}
	var want4 bool
	switch string(fields[0]) {
	case "TCP4":
		want4 = true
	case "TCP6":
	default:
		return h, fmt.Errorf("%w: v1 protocol %q is not TCP4, TCP6 or UNKNOWN", ErrInvalid, fields[0])
	}
	src, err := parseV1Addr(fields[1], want4)
	if err != nil {
		return h, err
	}
	dst, err := parseV1Addr(fields[2], want4)
	if err != nil {
		return h, err
	}
	sport, err := parseV1Port(fields[3])
	if err != nil {
		return h, err
	}
	dport, err := parseV1Port(fields[4])
	if err != nil {
		return h, err
	}
	h.Source = netip.AddrPortFrom(src, sport)
	h.Destination = netip.AddrPortFrom(dst, dport)
	return h, nil
}

func parseV1Addr(b []byte, want4 bool) (netip.Addr, error) {
	a, err := netip.ParseAddr(string(b))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: parsing v1 address: %w", ErrInvalid, err)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%w: v1 address %q has a zone", ErrInvalid, b)
	}
	if a.Is4() != want4 {
		return netip.Addr{}, fmt.Errorf("%w: v1 address %q does not match the protocol", ErrInvalid, b)
	}
	return a, nil
}

func parseV1Port(b []byte) (uint16, error) {
	if len(b) == 0 || len(b) > 5 || (len(b) > 1 && b[0] == '0') {
		return 0, fmt.Errorf("%w: v1 port %q", ErrInvalid, b)
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: v1 port %q", ErrInvalid, b)
		}
	}
	p, err := strconv.ParseUint(string(b), 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%w: v1 port %q out of range", ErrInvalid, b)
	}
	return uint16(p), nil
}

// v2Len returns the total length of a version 2 header from its fixed
// 16-byte part, after checking the signature, version and length cap.
func v2Len(fixed []byte) (int, error) {
	if len(fixed) < v2HeaderLen || !bytes.Equal(fixed[:12], v2Signature) {
		return 0, fmt.Errorf("%w: bad v2 signature", ErrInvalid)
	}
	if v := fixed[12] >> 4; v != 2 {
		return 0, fmt.Errorf("%w: v2 version %d", ErrInvalid, v)
	}
	n := int(binary.BigEndian.Uint16(fixed[14:16]))
	if n > V2MaxLen {
		return 0, fmt.Errorf("%w: v2 length %d exceeds %d", ErrInvalid, n, V2MaxLen)
	}
	return v2HeaderLen + n, nil
}

// parseV2 parses a complete version 2 header (fixed part, addresses and
// TLVs, nothing after).
func parseV2(b []byte) (Header, error) {
	h := Header{Version: 2}
	total, err := v2Len(b)
	if err != nil {
		return h, err
	}
	if len(b) != total {
		return h, fmt.Errorf("%w: v2 header is %d bytes, length field says %d", ErrInvalid, len(b), total)
	}
	switch cmd := b[12] & 0x0f; cmd {
	case 0:
		h.Command = Local
	case 1:
		h.Command = Proxy
	default:
		return h, fmt.Errorf("%w: v2 command %d", ErrInvalid, cmd)
	}
	family, transport := b[13]>>4, b[13]&0x0f
	if transport > 2 {
		return h, fmt.Errorf("%w: v2 transport protocol %d", ErrInvalid, transport)
	}
	payload := b[v2HeaderLen:]
	var addrLen int
	switch family {
	case 0: // AF_UNSPEC: no address, whatever follows is ignored
	case 1: // AF_INET
		addrLen = 12
	case 2: // AF_INET6
		addrLen = 36
	case 3: // AF_UNIX: addresses do not apply to a TCP peer
		addrLen = 216
	default:
		return h, fmt.Errorf("%w: v2 address family %d", ErrInvalid, family)
	}
	if family == 0 {
		return h, nil
	}
	if len(payload) < addrLen {
		return h, fmt.Errorf("%w: v2 length %d too short for address family %d", ErrInvalid, len(payload), family)
	}
	h.TLVs = payload[addrLen:]
	// The receiver must ignore the addresses of a LOCAL connection.
	if h.Command == Local || family == 3 {
		return h, nil
	}
	if family == 1 {
		h.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(payload[0:4])), binary.BigEndian.Uint16(payload[8:10]))
		h.Destination = netip.AddrPortFrom(netip.AddrFrom4([4]byte(payload[4:8])), binary.BigEndian.Uint16(payload[10:12]))
	} else {
		h.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(payload[0:16])), binary.BigEndian.Uint16(payload[32:34]))
		h.Destination = netip.AddrPortFrom(netip.AddrFrom16([16]byte(payload[16:32])), binary.BigEndian.Uint16(payload[34:36]))
	}
	return h, nil
}
