package h2server_test

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The client side of FuzzDifferential: clientStream turns fuzz bytes into
// what a client sends, the same bytes for both servers.

// sentinel is the payload of the PING that ends every client stream: its
// acknowledgement tells that the server processed every frame before it.
var sentinel = [8]byte{'s', 'l', 'u', 'i', 'c', 'e', '!', '!'}

// syncPrefix starts the payload of the PING that ends each chunk of the
// client stream (with the chunk's number after it); no other PING the
// client sends starts with it.
const syncPrefix = "sync"

// chunk is a part of the client stream. The client sends the next one
// once the server acknowledged sync, the PING that ends this one, so that
// the server wrote every frame the chunk made it queue (RST_STREAM
// included) before it reads on. The server's state changes when such a
// frame is written (a reset stream is closed then), and x/net writes it
// after its flush goroutine is done, the fork (over sluice's Conn) at
// once: without the wait, what x/net does with a frame for a stream
// being reset would depend on how fast that goroutine ran.
type chunk struct {
	b    []byte
	sync [8]byte // zero: the chunk ends with the sentinel
}

// Bounds that keep a case small and away from limits that depend on
// timing: the servers' control-frame queue (10000 frames) and the request
// flow-control windows (65535 bytes before any WINDOW_UPDATE).
const (
	maxFrames    = 1500
	maxDataBytes = 48 << 10
)

// Ops: the first byte of each step chooses one.
const (
	opHeaders = iota
	opData
	opRSTStream
	opWindowUpdate
	opPing
	opSettings
	opPriority
	opContinuation
	opGoAway
	opRaw        // any type, flags, stream and payload
	opOversize   // a frame header over SETTINGS_MAX_FRAME_SIZE
	opResetBurst // HEADERS and RST_STREAM on new streams, n times
	opContFlood  // HEADERS without END_HEADERS and n CONTINUATIONs
	numOps
)

// HEADERS flags byte (the second byte of opHeaders).
const (
	hEndStream   = 1 << 0
	hOpenBlock   = 1 << 1 // no END_HEADERS: the block goes on in CONTINUATIONs
	hPadded      = 1 << 2
	hPriority    = 1 << 3
	hFieldsFirst = 1 << 4 // a regular field before the pseudo-headers
	hSplit       = 1 << 5 // the block in a HEADERS and a CONTINUATION
)

var (
	methods    = []string{"GET", "POST", "HEAD", "PUT", "CONNECT", "OPTIONS", "", "get", "G T"}
	paths      = []string{"/", "/echo", "/s/404", "/s/204", "/s/500?q=1", "*", "", "noslash", "/a b", "/%zz", "//x/../y"}
	schemes    = []string{"https", "http", "", "f o"}
	authority  = []string{"example.com", "", "a b", "example.com:443", "[::1]:8443"}
	fieldNames = []string{"x-echo", "content-length", "te", "connection", "expect", "x-trailer", "cookie",
		"X-Upper", ":path", ":status", "host", "transfer-encoding", "x-long", "keep-alive", "upgrade", "", ":method", "trailer"}
	fieldValues = map[string][]string{
		"content-length":    {"0", "3", "10", "-1", "1,1", "99999999999999999999"},
		"te":                {"trailers", "gzip"},
		"expect":            {"100-continue"},
		"transfer-encoding": {"chunked"},
		"connection":        {"close", "keep-alive"},
	}
)

// input reads the fuzz bytes; past their end it reads zeros.
type input struct{ b []byte }

func (in *input) empty() bool { return len(in.b) == 0 }

func (in *input) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *input) uint32() uint32 {
	var v uint32
	for range 4 {
		v = v<<8 | uint32(in.byte())
	}
	return v
}

// bytes reads up to n bytes (fewer at the end of the input).
func (in *input) bytes(n int) []byte {
	n = min(n, len(in.b))
	p := in.b[:n:n]
	in.b = in.b[n:]
	return p
}

// client builds the byte stream.
type client struct {
	in      input
	buf     bytes.Buffer
	fr      *http2.Framer
	hbuf    bytes.Buffer
	enc     *hpack.Encoder
	frames  int
	data    int    // DATA payload bytes so far (padding included)
	next    uint32 // the next new client stream
	current uint32 // the stream last opened
	open    bool   // the last frame left a header block open
	// answered: the header block holds what makes the server answer by
	// itself, without the (gated) handler (answeredByServer).
	answered  bool
	blockSize int // the header block's fields, as the server counts them
	te        int // TE fields in the header block
	chunks    []chunk
	raw       bool // a raw HEADERS, PUSH_PROMISE or CONTINUATION was sent
}

// clientStream is the client preface, an empty SETTINGS, the frames the
// fuzz bytes describe, and the sentinel PING, in chunks: a chunk ends
// after each step that leaves no header block open. A GOAWAY ends the
// frames (a client sends nothing after it, and the server may close), and
// so does a request the server answers by itself: its answer is written
// whenever the server's handler goroutine runs, not at a point the client
// can wait for, so that the frames after it would meet the stream (and
// the count of open streams) in a state that depends on scheduling.
//
// It also reports whether every request the server may answer by itself
// ends the frames: not so when raw frames made one.
func clientStream(data []byte) (chunks []chunk, foreseen bool) {
	c := &client{in: input{b: data}, next: 1, current: 1}
	c.buf.WriteString(http2.ClientPreface)
	c.fr = http2.NewFramer(&c.buf, nil)
	c.fr.AllowIllegalWrites = true
	c.enc = hpack.NewEncoder(&c.hbuf)
	c.fr.WriteSettings()
	for !c.in.empty() && c.frames < maxFrames {
		if last := c.step(); last || !c.open && c.answered {
			break
		}
		if !c.open {
			var p [8]byte
			copy(p[:], syncPrefix)
			binary.BigEndian.PutUint32(p[4:], uint32(len(c.chunks)+1))
			c.fr.WritePing(false, p)
			c.chunks = append(c.chunks, chunk{b: bytes.Clone(c.buf.Bytes()), sync: p})
			c.buf.Reset()
		}
	}
	c.fr.WritePing(false, sentinel)
	return append(c.chunks, chunk{b: bytes.Clone(c.buf.Bytes())}), !c.raw
}

// pingData makes a PING payload of the client's own distinct from the
// sentinel and the chunks' PINGs.
func pingData(p []byte) []byte {
	if bytes.Equal(p, sentinel[:]) || bytes.HasPrefix(p, []byte(syncPrefix)) {
		p = append([]byte{0}, p[1:]...)
	}
	return p
}

// stream chooses a stream: a new one, the current one, the connection,
// or a small number (even ones included).
func (c *client) stream() uint32 {
	b := c.in.byte()
	switch b % 4 {
	case 0:
		c.current = c.next
		c.next += 2
		return c.current
	case 1:
		return c.current
	case 2:
		return 0
	default:
		return uint32(b >> 2)
	}
}

// step writes the frames of one op; it reports whether it wrote a GOAWAY.
func (c *client) step() (goaway bool) {
	c.frames++
	c.open = false
	switch c.in.byte() % numOps {
	case opHeaders:
		sid := c.stream()
		c.headers(sid, c.in.byte())
	case opData:
		sid := c.stream()
		fl := c.in.byte()
		n := int(c.in.byte())
		var pad []byte
		if fl&2 != 0 {
			pad = make([]byte, int(c.in.byte()))
		}
		if c.data+n+len(pad) > maxDataBytes {
			return
		}
		c.data += n + len(pad)
		p := bytes.Repeat([]byte{'d'}, n)
		copy(p, c.in.bytes(n))
		if pad != nil {
			c.fr.WriteDataPadded(sid, fl&1 != 0, p, pad)
		} else {
			c.fr.WriteData(sid, fl&1 != 0, p)
		}
	case opRSTStream:
		sid := c.stream()
		c.fr.WriteRSTStream(sid, http2.ErrCode(c.in.byte()%16))
	case opWindowUpdate:
		sid := c.stream()
		c.fr.WriteWindowUpdate(sid, c.in.uint32()&(1<<31-1))
	case opPing:
		ack := c.in.byte()&1 != 0
		var p [8]byte
		copy(p[:], pingData(c.in.bytes(8)))
		c.fr.WritePing(ack, p)
	case opSettings:
		fl := c.in.byte()
		if fl&1 != 0 {
			c.fr.WriteSettingsAck()
			return
		}
		var ss []http2.Setting
		for range fl >> 1 % 4 {
			s := http2.Setting{ID: http2.SettingID(c.in.byte() % 10), Val: c.in.uint32()}
			if !slices.ContainsFunc(ss, func(o http2.Setting) bool { return o.ID == s.ID }) {
				ss = append(ss, s) // see distinctSettings
			}
		}
		c.fr.WriteSettings(ss...)
	case opPriority:
		sid := c.stream()
		b := c.in.byte()
		c.fr.WritePriority(sid, http2.PriorityParam{StreamDep: uint32(b >> 1), Exclusive: b&1 != 0, Weight: c.in.byte()})
	case opContinuation:
		sid := c.stream()
		fl := c.in.byte()
		c.fr.WriteContinuation(sid, fl&1 != 0, c.fragment(fl>>1))
		c.open = fl&1 == 0
	case opGoAway:
		c.fr.WriteGoAway(c.in.uint32()&(1<<31-1), http2.ErrCode(c.in.byte()%16), nil)
		return true
	case opRaw:
		typ, flags := c.in.byte(), c.in.byte()
		sid := c.stream()
		p := c.in.bytes(int(c.in.byte() % 64))
		switch http2.FrameType(typ) {
		case http2.FramePing:
			p = pingData(p)
		case http2.FrameHeaders, http2.FramePushPromise, http2.FrameContinuation:
			c.raw = true
			c.open = flags&byte(http2.FlagHeadersEndHeaders) == 0
		case http2.FrameGoAway:
			goaway = true
		case http2.FrameSettings:
			if flags&byte(http2.FlagSettingsAck) == 0 {
				p = distinctSettings(p)
			}
		}
		if http2.FrameType(typ) == http2.FrameData {
			if c.data+len(p) > maxDataBytes {
				return
			}
			c.data += len(p)
		}
		c.fr.WriteRawFrame(http2.FrameType(typ), http2.Flags(flags), sid, p)
		return goaway
	case opOversize:
		var h [9]byte
		n := 16<<10 + 1 + int(c.in.byte())
		h[0], h[1], h[2] = byte(n>>16), byte(n>>8), byte(n)
		h[3] = c.in.byte() % 10
		binary.BigEndian.PutUint32(h[5:], c.stream())
		c.buf.Write(h[:])
	case opResetBurst:
		n := int(c.in.byte())
		for i := 0; i < n && c.frames < maxFrames; i++ {
			c.frames += 2
			sid := c.next
			c.current, c.next = sid, sid+2
			c.headers(sid, hEndStream)
			if c.answered {
				return false
			}
			c.fr.WriteRSTStream(sid, http2.ErrCodeCancel)
		}
	case opContFlood:
		n := int(c.in.byte())
		sid := c.next
		c.current, c.next = sid, sid+2
		c.headers(sid, hEndStream|hOpenBlock)
		for i := 0; i < n && c.frames < maxFrames; i++ {
			c.frames++
			c.fr.WriteContinuation(sid, false, c.fragment(3))
		}
		c.open = true
	}
	return false
}

// headers writes a request's header block on sid.
func (c *client) headers(sid uint32, fl byte) {
	c.hbuf.Reset()
	c.answered, c.blockSize, c.te = false, 0, 0
	pick := func(list []string) (string, bool) {
		i := int(c.in.byte()) % (len(list) + 1)
		if i == len(list) {
			return "", false // left out
		}
		return list[i], true
	}
	nfields := int(c.in.byte() % 6)
	if fl&hFieldsFirst != 0 {
		c.field()
	}
	for _, p := range []struct {
		name string
		list []string
	}{{":method", methods}, {":scheme", schemes}, {":path", paths}, {":authority", authority}} {
		if v, ok := pick(p.list); ok {
			c.writeField(hpack.HeaderField{Name: p.name, Value: v})
		}
	}
	for range nfields {
		c.field()
	}
	block := c.hbuf.Bytes()
	var rest []byte
	if fl&hSplit != 0 && len(block) > 1 {
		block, rest = block[:len(block)/2], block[len(block)/2:]
	}
	hp := http2.HeadersFrameParam{
		StreamID:      sid,
		BlockFragment: block,
		EndStream:     fl&hEndStream != 0,
		EndHeaders:    fl&hOpenBlock == 0 && rest == nil,
	}
	if fl&hPadded != 0 {
		hp.PadLength = c.in.byte()
	}
	if fl&hPriority != 0 {
		b := c.in.byte()
		hp.Priority = http2.PriorityParam{StreamDep: uint32(b >> 1), Exclusive: b&1 != 0, Weight: c.in.byte()}
	}
	c.fr.WriteHeaders(hp)
	if rest != nil {
		c.frames++
		c.fr.WriteContinuation(sid, fl&hOpenBlock == 0, rest)
	}
	c.open = fl&hOpenBlock != 0
}

// field encodes one regular (or misplaced pseudo-) header field.
func (c *client) field() {
	name := fieldNames[int(c.in.byte())%len(fieldNames)]
	var value string
	switch vs := fieldValues[name]; {
	case name == "x-long":
		value = strings.Repeat("v", 4000)
	case vs != nil:
		value = vs[int(c.in.byte())%len(vs)]
	default:
		value = string(c.in.bytes(int(c.in.byte() % 16)))
	}
	c.writeField(hpack.HeaderField{Name: name, Value: value})
}

// answeredByServer are the fields for which the server answers 400
// itself (RFC 9113, section 8.2.2; so does it for a TE field other than
// "trailers" or "", or more than one), and maxBlockSize the fields' size
// over which it may answer 431 (MaxHeaderBytes, less than the server's
// slack).
var answeredByServer = map[string]bool{"connection": true, "keep-alive": true, "transfer-encoding": true, "upgrade": true, "proxy-connection": true}

const maxBlockSize = 1 << 10

func (c *client) writeField(f hpack.HeaderField) {
	c.enc.WriteField(f)
	c.blockSize += int(f.Size())
	if f.Name == "te" {
		c.te++
		if c.te > 1 || f.Value != "trailers" && f.Value != "" {
			c.answered = true
		}
	}
	if answeredByServer[f.Name] || c.blockSize > maxBlockSize {
		c.answered = true
	}
}

// fragment is a piece of header block: kind 0 an encoded field, 1 raw
// bytes, 2 nothing, 3 a long literal field that is not indexed.
func (c *client) fragment(kind byte) []byte {
	c.hbuf.Reset()
	switch kind % 4 {
	case 0:
		c.field()
	case 1:
		return bytes.Clone(c.in.bytes(int(c.in.byte() % 32)))
	case 2:
		return nil
	default:
		c.writeField(hpack.HeaderField{Name: "x-flood", Value: strings.Repeat("f", 1000), Sensitive: true})
	}
	return bytes.Clone(c.hbuf.Bytes())
}

// distinctSettings drops from a SETTINGS payload p the values whose
// identifier came before in it. A deliberate difference (h2server's
// NOTICE): x/net hangs up on a SETTINGS frame that repeats an identifier,
// the fork processes its values in order, as RFC 9113 (section 6.5.3)
// says; the connections cannot be compared after such a frame, so the
// client never sends one (internal/server's TestHTTP2Conformance covers the fork).
// Payloads that are not a whole number of values are left as they are:
// both servers refuse them.
func distinctSettings(p []byte) []byte {
	if len(p)%6 != 0 {
		return p
	}
	var out []byte
	var seen []uint16
	for i := 0; i < len(p); i += 6 {
		id := binary.BigEndian.Uint16(p[i:])
		if !slices.Contains(seen, id) {
			seen = append(seen, id)
			out = append(out, p[i:i+6]...)
		}
	}
	return out
}
