package proxyproto

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// readHeader reads a PROXY header, if any, from the start of r. It returns
// the header (nil when the connection does not start with one) and the bytes
// it read past the header, which belong to the payload and must be served
// before anything else read from r.
//
// Detection is unambiguous: a v1 header starts with "PROXY " and a v2 one
// with a 12-byte signature that starts with CRLF, neither of which begins a
// TLS record or an HTTP request. With required, a connection without a
// header is an error (ErrMissing).
func readHeader(r io.Reader, required bool) (*Header, []byte, error) {
	buf := make([]byte, 0, 256)
	for {
		if v2 := bytes.HasPrefix(buf, v2Signature); v2 && len(buf) >= v2HeaderLen {
			return readV2(r, buf)
		} else if !v2 && bytes.HasPrefix(buf, v1Prefix) {
			if i := bytes.Index(buf, []byte("\r\n")); i >= 0 && i+2 <= v1MaxLen {
				h, err := parseV1(buf[:i+2])
				if err != nil {
					return nil, nil, err
				}
				return &h, buf[i+2:], nil
			}
			if len(buf) >= v1MaxLen {
				return nil, nil, fmt.Errorf("%w: no CRLF in the first %d bytes", ErrInvalid, v1MaxLen)
			}
		} else if !couldStartHeader(buf) {
			if required {
				return nil, nil, ErrMissing
			}
			return nil, buf, nil
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil && n == 0 {
			if errors.Is(err, io.EOF) && len(buf) > 0 {
				// Too short to be a header; let the consumer see the
				// bytes and then EOF.
				if required {
					return nil, nil, fmt.Errorf("%w: truncated", ErrInvalid)
				}
				return nil, buf, nil
			}
			if len(buf) > 0 {
				return nil, nil, fmt.Errorf("%w: reading the rest of the header: %v", ErrInvalid, err)
			}
			if required {
				return nil, nil, fmt.Errorf("reading PROXY protocol header: %w", err)
			}
			// Nothing read: the caller decides what EOF or a timeout
			// means for a connection that may be plain.
			return nil, nil, err
		}
	}
}

// couldStartHeader reports whether b is empty or a prefix of a header start.
func couldStartHeader(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	return bytes.HasPrefix(v1Prefix, b[:min(len(b), len(v1Prefix))]) ||
		bytes.HasPrefix(v2Signature, b[:min(len(b), len(v2Signature))])
}

// readV2 completes a v2 header whose fixed part is at the start of buf.
func readV2(r io.Reader, buf []byte) (*Header, []byte, error) {
	total, err := v2Len(buf)
	if err != nil {
		return nil, nil, err
	}
	if len(buf) < total {
		full := make([]byte, total)
		copy(full, buf)
		if _, err := io.ReadFull(r, full[len(buf):]); err != nil {
			return nil, nil, fmt.Errorf("%w: reading the rest of the v2 header: %v", ErrInvalid, err)
		}
		buf = full
	}
	h, err := parseV2(buf[:total])
	if err != nil {
		return nil, nil, err
	}
	return &h, buf[total:], nil
}
