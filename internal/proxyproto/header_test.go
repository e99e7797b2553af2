package proxyproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"testing/iotest"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// Examples from HAProxy's proxy-protocol.txt, section 2.1, and edge cases.
func TestParseV1(t *testing.T) {
	ff6 := "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	tests := []struct {
		line     string
		src, dst string // "" = no address
		wantErr  bool
	}{
		{line: "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n", src: "255.255.255.255:65535", dst: "255.255.255.255:65535"},
		{line: "PROXY TCP6 " + ff6 + " " + ff6 + " 65535 65535\r\n", src: "[" + ff6 + "]:65535", dst: "[" + ff6 + "]:65535"},
		{line: "PROXY UNKNOWN\r\n"},
		{line: "PROXY UNKNOWN " + ff6 + " " + ff6 + " 65535 65535\r\n"}, // the 107-byte worst case
		{line: "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n", src: "192.168.0.1:56324", dst: "192.168.0.11:443"},
		{line: "PROXY TCP6 2001:db8::1 ::ffff:10.0.0.1 0 8443\r\n", src: "[2001:db8::1]:0", dst: "[::ffff:10.0.0.1]:8443"},
		{line: "PROXY UNKNOWN garbage that is ignored\r\n"},

		{line: "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", wantErr: true},                  // LF only
		{line: "PROXY TCP4 1.2.3.4 5.6.7.8 1 2", wantErr: true},                    // no CRLF
		{line: "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", wantErr: true},               // trailing space
		{line: "PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", wantErr: true},               // double space
		{line: "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", wantErr: true},                  // missing port
		{line: "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", wantErr: true},            // port range
		{line: "PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n", wantErr: true},              // leading zero
		{line: "PROXY TCP4 1.2.3.4 5.6.7.8 +80 2\r\n", wantErr: true},              // sign
		{line: "PROXY TCP4 ::1 5.6.7.8 1 2\r\n", wantErr: true},                    // family mismatch
		{line: "PROXY TCP6 1.2.3.4 ::1 1 2\r\n", wantErr: true},                    // family mismatch
		{line: "PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n", wantErr: true},               // leading zero octet
		{line: "PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n", wantErr: true},               // zone
		{line: "PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", wantErr: true},                // protocol
		{line: "PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n", wantErr: true},                // case
		{line: "PROXY UNKNOWNX\r\n", wantErr: true},                                // not UNKNOWN
		{line: "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n", wantErr: true},              // stray CR
		{line: "PROXY\r\n", wantErr: true},                                         // too short
		{line: "PROXY UNKNOWN " + strings.Repeat("x", 92) + "\r\n", wantErr: true}, // 108 bytes
	}
	for _, tt := range tests {
		h, err := parseV1([]byte(tt.line))
		if (err != nil) != tt.wantErr {
			t.Errorf("parseV1(%q) error = %v, want error %v", tt.line, err, tt.wantErr)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("parseV1(%q) error %v does not wrap ErrInvalid", tt.line, err)
			}
			continue
		}
		if h.Version != 1 || h.Command != Proxy {
			t.Errorf("parseV1(%q) = version %d command %v", tt.line, h.Version, h.Command)
		}
		checkAddrs(t, tt.line, h, tt.src, tt.dst)
	}
}

func checkAddrs(t *testing.T, name string, h Header, src, dst string) {
	t.Helper()
	if src == "" {
		if h.Source.IsValid() || h.Destination.IsValid() || h.HasAddress() {
			t.Errorf("%q: addresses %v %v, want none", name, h.Source, h.Destination)
		}
		return
	}
	if h.Source != ap(src) || h.Destination != ap(dst) || !h.HasAddress() {
		t.Errorf("%q: addresses %v → %v, want %v → %v", name, h.Source, h.Destination, src, dst)
	}
}

// v2 builds a version 2 header: verCmd, famProto, then the body.
func v2(verCmd, famProto byte, body []byte) []byte {
	b := append([]byte{}, v2Signature...)
	b = append(b, verCmd, famProto, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(len(body)))
	return append(b, body...)
}

func inet4(src, dst string, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	b := append(s[:], d[:]...)
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, sport), dport)
}

func inet6(src, dst string, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	b := append(s[:], d[:]...)
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, sport), dport)
}

func TestParseV2(t *testing.T) {
	tlv := []byte{0x04, 0x00, 0x03, 'a', 'b', 'c'} // PP2_TYPE_NOOP
	tests := []struct {
		name     string
		b        []byte
		cmd      Command
		src, dst string
		tlvs     []byte
		wantErr  bool
	}{
		{name: "tcp4", b: v2(0x21, 0x11, inet4("192.0.2.1", "198.51.100.2", 56324, 443)), cmd: Proxy, src: "192.0.2.1:56324", dst: "198.51.100.2:443"},
		{name: "tcp6", b: v2(0x21, 0x21, inet6("2001:db8::1", "2001:db8::2", 1, 2)), cmd: Proxy, src: "[2001:db8::1]:1", dst: "[2001:db8::2]:2"},
		{name: "tcp4 with TLV", b: v2(0x21, 0x11, append(inet4("10.0.0.1", "10.0.0.2", 3, 4), tlv...)), cmd: Proxy, src: "10.0.0.1:3", dst: "10.0.0.2:4", tlvs: tlv},
		{name: "udp4 accepted", b: v2(0x21, 0x12, inet4("10.0.0.1", "10.0.0.2", 3, 4)), cmd: Proxy, src: "10.0.0.1:3", dst: "10.0.0.2:4"},
		{name: "local ignores address", b: v2(0x20, 0x11, inet4("10.0.0.1", "10.0.0.2", 3, 4)), cmd: Local},
		{name: "local unspec", b: v2(0x20, 0x00, nil), cmd: Local},
		{name: "proxy unspec", b: v2(0x21, 0x00, []byte{1, 2, 3}), cmd: Proxy},
		{name: "unix ignored", b: v2(0x21, 0x31, make([]byte, 216)), cmd: Proxy},
		{name: "max length", b: v2(0x21, 0x11, append(inet4("10.0.0.1", "10.0.0.2", 3, 4), make([]byte, V2MaxLen-12)...)), cmd: Proxy, src: "10.0.0.1:3", dst: "10.0.0.2:4", tlvs: make([]byte, V2MaxLen-12)},

		{name: "version 1 in v2", b: v2(0x11, 0x11, inet4("10.0.0.1", "10.0.0.2", 3, 4)), wantErr: true},
		{name: "version 3", b: v2(0x31, 0x11, inet4("10.0.0.1", "10.0.0.2", 3, 4)), wantErr: true},
		{name: "command 2", b: v2(0x22, 0x11, inet4("10.0.0.1", "10.0.0.2", 3, 4)), wantErr: true},
		{name: "family 4", b: v2(0x21, 0x41, inet4("10.0.0.1", "10.0.0.2", 3, 4)), wantErr: true},
		{name: "transport 3", b: v2(0x21, 0x13, inet4("10.0.0.1", "10.0.0.2", 3, 4)), wantErr: true},
		{name: "short inet4", b: v2(0x21, 0x11, make([]byte, 11)), wantErr: true},
		{name: "short inet6", b: v2(0x21, 0x21, make([]byte, 35)), wantErr: true},
		{name: "short unix", b: v2(0x21, 0x31, make([]byte, 215)), wantErr: true},
		{name: "too long", b: v2(0x21, 0x11, make([]byte, V2MaxLen+1)), wantErr: true},
		{name: "bad signature", b: append([]byte("\r\n\r\n\x00\r\nQUIT\r"), 0x21, 0x11, 0, 0), wantErr: true},
		{name: "truncated", b: v2(0x21, 0x11, inet4("10.0.0.1", "10.0.0.2", 3, 4))[:20], wantErr: true},
	}
	for _, tt := range tests {
		h, err := parseV2(tt.b)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: error = %v, want error %v", tt.name, err, tt.wantErr)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: error %v does not wrap ErrInvalid", tt.name, err)
			}
			continue
		}
		if h.Version != 2 || h.Command != tt.cmd {
			t.Errorf("%s: version %d command %v, want 2 %v", tt.name, h.Version, h.Command, tt.cmd)
		}
		if !bytes.Equal(h.TLVs, tt.tlvs) {
			t.Errorf("%s: TLVs %x, want %x", tt.name, h.TLVs, tt.tlvs)
		}
		checkAddrs(t, tt.name, h, tt.src, tt.dst)
	}
}

func TestReadHeader(t *testing.T) {
	payload := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	v1 := "PROXY TCP4 192.0.2.1 192.0.2.2 1000 80\r\n"
	v2h := string(v2(0x21, 0x11, inet4("192.0.2.1", "192.0.2.2", 1000, 80)))
	tests := []struct {
		name     string
		in       string
		required bool
		header   bool
		rest     string // the payload the consumer must see
		wantErr  bool
	}{
		{name: "v1", in: v1 + payload, header: true, rest: payload},
		{name: "v2", in: v2h + payload, header: true, rest: payload},
		{name: "v1 only", in: v1, header: true},
		{name: "v2 only", in: v2h, header: true},
		{name: "plain http", in: payload, rest: payload},
		{name: "plain tls", in: "\x16\x03\x01\x02\x00\x01", rest: "\x16\x03\x01\x02\x00\x01"},
		{name: "plain short", in: "PRO", rest: "PRO"},
		{name: "plain looks like v2 start", in: "\r\n\r\nX", rest: "\r\n\r\nX"},
		{name: "plain required", in: payload, required: true, wantErr: true},
		{name: "empty required", in: "", required: true, wantErr: true},
		{name: "v1 too long", in: "PROXY UNKNOWN " + strings.Repeat("x", 120) + "\r\n", wantErr: true},
		{name: "v1 invalid", in: "PROXY TCP4 1.2.3.4\r\n" + payload, wantErr: true},
		{name: "v2 truncated", in: v2h[:20], wantErr: true},
		{name: "v2 too long", in: string(v2(0x21, 0x11, make([]byte, V2MaxLen+1))), wantErr: true},
	}
	for _, tt := range tests {
		for _, mode := range []string{"whole", "onebyte"} {
			var r interface{ Read([]byte) (int, error) } = strings.NewReader(tt.in)
			if mode == "onebyte" {
				r = iotest.OneByteReader(r)
			}
			h, rest, err := readHeader(r, tt.required)
			if (err != nil) != tt.wantErr {
				t.Errorf("%s/%s: error = %v, want error %v", tt.name, mode, err, tt.wantErr)
				continue
			}
			if err != nil {
				continue
			}
			if (h != nil) != tt.header {
				t.Errorf("%s/%s: header %+v, want header %v", tt.name, mode, h, tt.header)
			}
			if h != nil && h.Source != ap("192.0.2.1:1000") {
				t.Errorf("%s/%s: source %v", tt.name, mode, h.Source)
			}
			rem := new(bytes.Buffer)
			rem.Write(rest)
			if _, err := rem.ReadFrom(r); err != nil {
				t.Fatal(err)
			}
			if rem.String() != tt.rest {
				t.Errorf("%s/%s: payload %q, want %q", tt.name, mode, rem.String(), tt.rest)
			}
		}
	}
}
