package h2

import (
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"sluice.dev/sluice/internal/h2/h2server"
)

// preface is the client connection preface (RFC 9113, section 3.4).
const preface = http2.ClientPreface

// Frame types and flags the guard looks at (RFC 9113, section 6; RFC
// 9218 for PRIORITY_UPDATE).
const (
	frameData           = 0x0
	frameHeaders        = 0x1
	framePriority       = 0x2
	frameRSTStream      = 0x3
	frameSettings       = 0x4
	framePushPromise    = 0x5
	framePing           = 0x6
	frameGoAway         = 0x7
	frameWindowUpdate   = 0x8
	frameContinuation   = 0x9
	framePriorityUpdate = 0x10

	flagAck        = 0x1 // SETTINGS, PING
	flagEndStream  = 0x1 // DATA, HEADERS
	flagEndHeaders = 0x4 // HEADERS, CONTINUATION
	flagPadded     = 0x8 // DATA, HEADERS
	flagPriority   = 0x20
	headerLen      = 9
)

// Limits bound the frames a client may send that cost the server work
// without being requests.
type Limits struct {
	// SettingsBurst is how many SETTINGS frames (not acknowledgements) a
	// client may send ahead of its requests: each such frame takes one
	// from a budget of SettingsBurst, and each HEADERS frame with a
	// header block the client sends gives one back, up to SettingsBurst.
	// A client that overdraws
	// it gets GOAWAY ENHANCE_YOUR_CALM and the server reads nothing more
	// from it. net/http acknowledges any number of SETTINGS frames
	// through one flag, never counts them toward its control-frame limit
	// and reads them as fast as they come: without this, a client can
	// send them for ever at the cost of the server's CPU. A client sends
	// one when it connects and seldom another (gRPC's window tuning sends
	// a few over a connection's life). Zero means 32.
	SettingsBurst int
	// GlitchBurst is how many frames that make the server work without
	// being a request or its body ("glitches", after HAProxy's name) a
	// client may send ahead of what the server answers: each takes one
	// from a budget of GlitchBurst, each HEADERS or DATA frame the server
	// writes (a response's) gives GlitchRefill back, and time gives
	// GlitchRate a second, up to GlitchBurst. A client that overdraws it
	// gets GOAWAY ENHANCE_YOUR_CALM and the server reads nothing more from
	// it. Glitches: a HEADERS frame with an empty header block, an empty
	// DATA frame without END_STREAM (CVE-2019-9518), an empty
	// CONTINUATION that does not end its header block (read for ever
	// before), PING, PRIORITY, PRIORITY_UPDATE, WINDOW_UPDATE, RST_STREAM
	// (rapid reset: streams opened and reset before an answer earn
	// nothing back), GOAWAY and frames of unknown types. Zero means 1000.
	GlitchBurst int
	// OnFlood, if set, is called once for each connection the guard
	// ends, with the frame type that overdrew its budget ("settings",
	// "ping", "data", ...: FrameName).
	OnFlood func(frame string)
}

// Budget defaults (Limits).
const (
	DefaultSettingsBurst = 32
	DefaultGlitchBurst   = 1000
	// GlitchRefill is what each HEADERS or DATA frame the server writes
	// gives back to the glitch budget: a browser's PRIORITY frames and
	// cancellations, and a gRPC client's BDP pings and window updates
	// (at most one or two per DATA frame it receives), stay far within.
	GlitchRefill = 10
	// GlitchRate is what each second gives back to the glitch budget:
	// keepalive PINGs on a quiet connection, and the cancellations of a
	// client whose calls all time out before an answer (a stuck
	// upstream: a reset, and from x/net's client a PING, each), stay
	// within; a flood, hundreds of thousands of frames a second, does
	// not.
	GlitchRate = 100
)

// FrameNames are the values of the frame label OnFlood is called with.
var FrameNames = []string{"settings", "data", "headers", "continuation", "priority", "priority_update",
	"rst_stream", "ping", "goaway", "window_update", "unknown"}

// FrameName is the name OnFlood gives frames of type typ.
func FrameName(typ byte) string {
	switch typ {
	case frameData:
		return "data"
	case frameHeaders:
		return "headers"
	case framePriority:
		return "priority"
	case frameRSTStream:
		return "rst_stream"
	case frameSettings:
		return "settings"
	case framePing:
		return "ping"
	case frameGoAway:
		return "goaway"
	case frameWindowUpdate:
		return "window_update"
	case frameContinuation:
		return "continuation"
	case framePriorityUpdate:
		return "priority_update"
	}
	return "unknown"
}

// errCalm ends a flooding connection: the server answers a
// ConnectionError read from the connection with GOAWAY carrying its
// code, and stops reading.
var errCalm = h2server.ConnectionError(h2server.ErrCodeEnhanceYourCalm)

// guard follows the frame boundaries of what the client sends, reading
// the 9-byte frame headers (and the pad length of padded frames), and
// keeps the budgets of Limits.
type guard struct {
	skip    int             // bytes to pass before the next frame header (the preface, a payload)
	hdr     [headerLen]byte // the frame header read so far
	hdrN    int
	padWait bool // the frame in hdr is padded: its first payload byte decides
	tripped bool

	burst    int
	settings int // SETTINGS budget left

	glitchBurst int
	glitches    int            // glitch budget left
	served      *atomic.Uint64 // HEADERS and DATA frames the server wrote (Conn's); nil: none
	servedSeen  uint64
	since       time.Time // when the glitch budget last left full, or last gained from time
	now         func() time.Time

	onFlood func(string)
}

func (g *guard) init(l Limits, withPreface bool, served *atomic.Uint64) {
	g.burst = l.SettingsBurst
	if g.burst <= 0 {
		g.burst = DefaultSettingsBurst
	}
	g.settings = g.burst
	g.glitchBurst = l.GlitchBurst
	if g.glitchBurst <= 0 {
		g.glitchBurst = DefaultGlitchBurst
	}
	g.glitches = g.glitchBurst
	g.served = served
	g.now = time.Now
	g.onFlood = l.OnFlood
	if withPreface {
		g.skip = len(preface)
	}
}

// scan follows b, the next bytes the client sent; it returns errCalm
// once a budget is overdrawn, and for every call after.
func (g *guard) scan(b []byte) error {
	if g.tripped {
		return errCalm
	}
	if g.served != nil {
		if s := g.served.Load(); s != g.servedSeen {
			g.refill(int(min(s-g.servedSeen, uint64(g.glitchBurst))) * GlitchRefill)
			g.servedSeen = s
		}
	}
	for len(b) > 0 {
		if g.padWait {
			// The pad length, the first byte of the payload.
			g.padWait = false
			if !g.frame(int(b[0])) {
				return g.trip()
			}
			continue // the byte is skipped with the payload
		}
		if g.skip > 0 {
			n := min(g.skip, len(b))
			g.skip -= n
			b = b[n:]
			continue
		}
		n := copy(g.hdr[g.hdrN:], b)
		g.hdrN += n
		b = b[n:]
		if g.hdrN < headerLen {
			return nil
		}
		g.hdrN = 0
		g.skip = int(g.hdr[0])<<16 | int(g.hdr[1])<<8 | int(g.hdr[2])
		if typ := g.hdr[3]; (typ == frameData || typ == frameHeaders) && g.hdr[4]&flagPadded != 0 && g.skip > 0 {
			g.padWait = true
			continue
		}
		if !g.frame(0) {
			return g.trip()
		}
	}
	return nil
}

func (g *guard) trip() error {
	g.tripped = true
	if g.onFlood != nil {
		g.onFlood(FrameName(g.hdr[3]))
	}
	return errCalm
}

// frame accounts for the frame whose header is in hdr, with pad bytes
// of padding; false: a budget is overdrawn.
func (g *guard) frame(pad int) bool {
	typ, flags := g.hdr[3], g.hdr[4]
	length := int(g.hdr[0])<<16 | int(g.hdr[1])<<8 | int(g.hdr[2])
	switch typ {
	case frameSettings:
		if flags&flagAck == 0 {
			g.settings--
		}
		return g.settings >= 0
	case frameHeaders:
		block := length
		if flags&flagPadded != 0 {
			block -= 1 + pad
		}
		if flags&flagPriority != 0 {
			block -= 5
		}
		if block <= 0 {
			return g.glitch() // no request: the server resets the stream
		}
		if g.settings < g.burst {
			g.settings++
		}
		return true
	case frameData:
		if flags&flagEndStream != 0 {
			return true
		}
		if flags&flagPadded != 0 {
			length -= 1 + pad
		}
		if length > 0 {
			return true // a request body: flow control bounds it
		}
		return g.glitch()
	case frameContinuation:
		if length > 0 || flags&flagEndHeaders != 0 {
			return true // the header list limit bounds the block
		}
		return g.glitch()
	case framePushPromise:
		return true // a connection error: the server closes
	}
	return g.glitch()
}

// glitch takes one from the glitch budget; false: overdrawn.
func (g *guard) glitch() bool {
	if g.glitches == g.glitchBurst {
		g.since = g.now()
	}
	if g.glitches == 0 {
		// The time since the budget left full gives GlitchRate a second.
		now := g.now()
		const every = time.Second / GlitchRate
		if n := now.Sub(g.since) / every; n >= time.Duration(g.glitchBurst) {
			g.since = now
			g.refill(g.glitchBurst)
		} else if n > 0 {
			g.since = g.since.Add(n * every)
			g.refill(int(n))
		}
	}
	g.glitches--
	return g.glitches >= 0
}

func (g *guard) refill(n int) {
	g.glitches = min(g.glitches+n, g.glitchBurst)
}

// frameCounter follows the frame boundaries of what the server writes
// and counts its HEADERS and DATA frames, which refill the glitch budget.
type frameCounter struct {
	skip int
	hdr  [4]byte // length and type of the frame header read so far
	hdrN int     // bytes of the frame header read so far
}

// count follows b, the next bytes the server wrote, and returns how many
// HEADERS and DATA frames began in it.
func (fc *frameCounter) count(b []byte) uint64 {
	var n uint64
	for len(b) > 0 {
		if fc.skip > 0 {
			k := min(fc.skip, len(b))
			fc.skip -= k
			b = b[k:]
			continue
		}
		for fc.hdrN < headerLen && len(b) > 0 {
			if fc.hdrN < len(fc.hdr) {
				fc.hdr[fc.hdrN] = b[0]
			}
			fc.hdrN++
			b = b[1:]
		}
		if fc.hdrN < headerLen {
			break
		}
		fc.hdrN = 0
		fc.skip = int(fc.hdr[0])<<16 | int(fc.hdr[1])<<8 | int(fc.hdr[2])
		if typ := fc.hdr[3]; typ == frameData || typ == frameHeaders {
			n++
		}
	}
	return n
}
