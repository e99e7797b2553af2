package h2

import (
	"golang.org/x/net/http2"

	"sluice.dev/sluice/internal/h2/h2server"
)

// preface is the client connection preface (RFC 9113, section 3.4).
const preface = http2.ClientPreface

// Frame types and flags the guard looks at (RFC 9113, section 6).
const (
	frameHeaders  = 0x1
	frameSettings = 0x4
	flagAck       = 0x1
	headerLen     = 9
)

// Limits bound the frames a client may send that cost the server work
// without being requests.
type Limits struct {
	// SettingsBurst is how many SETTINGS frames (not acknowledgements) a
	// client may send ahead of its requests: each such frame takes one
	// from a budget of SettingsBurst, and each HEADERS frame the client
	// sends gives one back, up to SettingsBurst. A client that overdraws
	// it gets GOAWAY ENHANCE_YOUR_CALM and the server reads nothing more
	// from it. net/http acknowledges any number of SETTINGS frames
	// through one flag, never counts them toward its control-frame limit
	// and reads them as fast as they come: without this, a client can
	// send them for ever at the cost of the server's CPU. A client sends
	// one when it connects and seldom another (gRPC's window tuning sends
	// a few over a connection's life). Zero means 32.
	SettingsBurst int
	// OnFlood, if set, is called once for each connection the guard
	// ends, with the frame type that overdrew its budget ("settings").
	OnFlood func(frame string)
}

// DefaultSettingsBurst is Limits.SettingsBurst's default.
const DefaultSettingsBurst = 32

// errCalm ends a flooding connection: the server answers a
// ConnectionError read from the connection with GOAWAY carrying its
// code, and stops reading.
var errCalm = h2server.ConnectionError(h2server.ErrCodeEnhanceYourCalm)

// guard follows the frame boundaries of what the client sends, reading
// only the 9-byte frame headers, and keeps the budgets of Limits.
type guard struct {
	skip     int             // bytes to pass before the next frame header (the preface, a payload)
	hdr      [headerLen]byte // the frame header read so far
	hdrN     int
	burst    int
	settings int // budget left
	tripped  bool
	onFlood  func(string)
}

func (g *guard) init(l Limits, withPreface bool) {
	g.burst = l.SettingsBurst
	if g.burst <= 0 {
		g.burst = DefaultSettingsBurst
	}
	g.settings = g.burst
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
	for len(b) > 0 {
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
		if !g.frame(g.hdr[3], g.hdr[4]) {
			g.tripped = true
			if g.onFlood != nil {
				g.onFlood("settings")
			}
			return errCalm
		}
	}
	return nil
}

// frame accounts for one frame header; false: a budget is overdrawn.
func (g *guard) frame(typ, flags byte) bool {
	switch typ {
	case frameSettings:
		if flags&flagAck == 0 {
			g.settings--
		}
	case frameHeaders:
		if g.settings < g.burst {
			g.settings++
		}
	}
	return g.settings >= 0
}
