package proxyproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

func FuzzParseV1(f *testing.F) {
	f.Add([]byte("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"))
	f.Add([]byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add([]byte("PROXY UNKNOWN 1.2.3.4 5.6.7.8 1 2\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseV1(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if len(b) > v1MaxLen {
			t.Fatalf("accepted %d bytes", len(b))
		}
		if !h.HasAddress() {
			return
		}
		proto := "TCP6"
		if h.Source.Addr().Is4() {
			proto = "TCP4"
		}
		again := fmt.Sprintf("PROXY %s %s %s %d %d\r\n", proto, h.Source.Addr(), h.Destination.Addr(), h.Source.Port(), h.Destination.Port())
		h2, err := parseV1([]byte(again))
		if err != nil || h2.Source != h.Source || h2.Destination != h.Destination {
			t.Fatalf("round trip of %q via %q: %+v, %v", b, again, h2, err)
		}
	})
}

func FuzzParseV2(f *testing.F) {
	f.Add(v2(0x21, 0x11, inet4("192.0.2.1", "198.51.100.2", 56324, 443)))
	f.Add(v2(0x21, 0x21, inet6("2001:db8::1", "2001:db8::2", 1, 2)))
	f.Add(v2(0x20, 0x00, nil))
	f.Add(v2(0x21, 0x31, make([]byte, 216)))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseV2(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if n := int(binary.BigEndian.Uint16(b[14:16])); len(b) != v2HeaderLen+n || n > V2MaxLen {
			t.Fatalf("accepted %d bytes with length field %d", len(b), n)
		}
		if h.HasAddress() && h.Command != Proxy {
			t.Fatalf("address on a %v header", h.Command)
		}
	})
}

// FuzzConn feeds arbitrary bytes, in two writes, to a trusted connection and
// checks that the consumer sees exactly what follows the header.
func FuzzConn(f *testing.F) {
	payload := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	f.Add(append([]byte("PROXY TCP4 192.0.2.1 192.0.2.2 1000 80\r\n"), payload...), uint16(7), false)
	f.Add(append(v2(0x21, 0x11, inet4("192.0.2.1", "192.0.2.2", 1000, 80)), payload...), uint16(13), false)
	f.Add(payload, uint16(0), false)
	f.Add(payload, uint16(3), true)
	f.Add([]byte("PROXY UNKNOWN\r\n"), uint16(200), true)
	f.Fuzz(func(t *testing.T, in []byte, split uint16, required bool) {
		server, client := net.Pipe()
		defer client.Close()
		go func() {
			defer client.Close()
			at := min(int(split), len(in))
			if _, err := client.Write(in[:at]); err != nil {
				return
			}
			client.Write(in[at:])
		}()
		c := newConn(server, Options{HeaderTimeout: 10 * time.Second, Required: required})
		defer c.Close()
		got, err := io.ReadAll(c)
		h, herr := c.Header()
		c.RemoteAddr()
		if herr != nil {
			if len(got) != 0 || !errors.Is(err, herr) {
				t.Fatalf("header error %v, but read %q, %v", herr, got, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("read after a good header: %v", err)
		}
		skip := 0
		switch {
		case h == nil:
			if required {
				t.Fatal("no header accepted although required")
			}
		case h.Version == 1:
			skip = bytes.Index(in, []byte("\r\n")) + 2
		default:
			skip = v2HeaderLen + int(binary.BigEndian.Uint16(in[14:16]))
		}
		if !bytes.Equal(got, in[skip:]) {
			t.Fatalf("payload %q, want %q", got, in[skip:])
		}
	})
}
