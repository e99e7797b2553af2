package h2

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

var t0 = time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return t0 }

// repeat is n copies of frame.
func repeat(frame []byte, n int) []byte { return bytes.Repeat(frame, n) }

// glitchFrames are one frame of each kind the glitch budget counts, with
// the offset (from the frame's start) of the byte that accounts for it.
func glitchFrames(t testing.TB) []struct {
	name  string
	frame []byte
	at    int
} {
	one := func(write func(fr *http2.Framer) error) []byte { return frames(t, write) }
	return []struct {
		name  string
		frame []byte
		at    int
	}{
		{"data", one(func(fr *http2.Framer) error { return fr.WriteData(1, false, nil) }), headerLen},
		{"data", one(func(fr *http2.Framer) error { return fr.WriteDataPadded(1, false, nil, make([]byte, 7)) }), headerLen + 1},
		{"headers", one(func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true})
		}), headerLen},
		{"headers", one(func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, PadLength: 3})
		}), headerLen + 1},
		{"headers", one(func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, Priority: http2.PriorityParam{Weight: 7}})
		}), headerLen},
		{"continuation", one(func(fr *http2.Framer) error { return fr.WriteContinuation(1, false, nil) }), headerLen},
		{"priority", one(func(fr *http2.Framer) error {
			return fr.WritePriority(3, http2.PriorityParam{StreamDep: 1, Weight: 200})
		}), headerLen},
		{"priority_update", one(func(fr *http2.Framer) error {
			return fr.WriteRawFrame(framePriorityUpdate, 0, 0, []byte("\x00\x00\x00\x01u=1"))
		}), headerLen},
		{"rst_stream", one(func(fr *http2.Framer) error { return fr.WriteRSTStream(1, http2.ErrCodeCancel) }), headerLen},
		{"ping", one(func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{1}) }), headerLen},
		{"ping", one(func(fr *http2.Framer) error { return fr.WritePing(true, [8]byte{1}) }), headerLen},
		{"goaway", one(func(fr *http2.Framer) error { return fr.WriteGoAway(0, http2.ErrCodeNo, nil) }), headerLen},
		{"window_update", one(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, 1) }), headerLen},
		{"unknown", one(func(fr *http2.Framer) error { return fr.WriteRawFrame(0xfa, 0, 0, []byte("x")) }), headerLen},
	}
}

// TestGuardGlitches: each kind of glitch frame takes one from the
// budget, and the one that overdraws it trips the guard, whatever the
// read sizes, with its frame's name.
func TestGuardGlitches(t *testing.T) {
	const burst = 4
	for _, tc := range glitchFrames(t) {
		t.Run(tc.name, func(t *testing.T) {
			wire := cat(preface, repeat(tc.frame, burst+3))
			trip := len(preface) + burst*len(tc.frame) + tc.at
			for _, chunk := range []int{1, 2, 7, 9, 10, 4096} {
				var g guard
				var flooded []string
				g.init(Limits{GlitchBurst: burst, OnFlood: func(f string) { flooded = append(flooded, f) }}, true, nil)
				g.now = fixedClock
				if got := scanAll(&g, cat(preface, repeat(tc.frame, burst)), chunk); got != -1 {
					t.Fatalf("reads of %d: tripped at %d within the budget", chunk, got)
				}
				g.init(Limits{GlitchBurst: burst, OnFlood: func(f string) { flooded = append(flooded, f) }}, true, nil)
				g.now = fixedClock
				got := scanAll(&g, wire, chunk)
				if got < trip || got >= trip+chunk {
					t.Errorf("reads of %d: tripped at %d, want in the read ending at %d", chunk, got, trip)
				}
				if len(flooded) != 1 || flooded[0] != tc.name {
					t.Errorf("reads of %d: OnFlood %v, want [%s]", chunk, flooded, tc.name)
				}
			}
		})
	}
}

// TestGuardNotGlitches: requests, request bodies, the end of a stream
// or a header block, header block fragments and SETTINGS
// acknowledgements cost nothing.
func TestGuardNotGlitches(t *testing.T) {
	for name, frame := range map[string][]byte{
		"data":                     frames(t, func(fr *http2.Framer) error { return fr.WriteData(1, false, []byte("x")) }),
		"padded data":              frames(t, func(fr *http2.Framer) error { return fr.WriteDataPadded(1, false, []byte("x"), make([]byte, 9)) }),
		"empty data, END_STREAM":   frames(t, func(fr *http2.Framer) error { return fr.WriteData(1, true, nil) }),
		"continuation":             frames(t, func(fr *http2.Framer) error { return fr.WriteContinuation(1, false, []byte{0x82}) }),
		"empty final continuation": frames(t, func(fr *http2.Framer) error { return fr.WriteContinuation(1, true, nil) }),
		"settings ack":             frames(t, func(fr *http2.Framer) error { return fr.WriteSettingsAck() }),
		"headers":                  headersFrame(t, 1),
		"padded headers": frames(t, func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}, EndHeaders: true, PadLength: 200,
				Priority: http2.PriorityParam{Weight: 7}})
		}),
	} {
		var g guard
		g.init(Limits{GlitchBurst: 1}, true, nil)
		g.now = fixedClock
		if got := scanAll(&g, cat(preface, repeat(frame, 1000)), 7); got != -1 {
			t.Errorf("%s: tripped at %d", name, got)
		}
	}
}

// TestGuardRefill: the HEADERS and DATA frames the server wrote give
// GlitchRefill each back, up to the burst, and the time since the budget
// left full gives GlitchRate a second.
func TestGuardRefill(t *testing.T) {
	const burst = 4
	ping := frames(t, func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{}) })
	var served atomic.Uint64
	var g guard
	g.init(Limits{GlitchBurst: burst}, false, &served)
	clock := t0
	g.now = func() time.Time { return clock }
	scan := func(n int) error {
		var err error
		for range n {
			if err = g.scan(ping); err != nil {
				break
			}
		}
		return err
	}
	if err := scan(burst); err != nil {
		t.Fatalf("within the burst: %v", err)
	}
	served.Add(1) // a response: GlitchRefill back, capped at the burst
	if err := scan(burst); err != nil {
		t.Fatalf("after a response: %v", err)
	}
	clock = clock.Add(2*time.Second/GlitchRate + time.Second/GlitchRate/2) // two back
	if err := scan(2); err != nil {
		t.Fatalf("2.5/GlitchRate seconds later: %v", err)
	}
	if err := scan(1); err == nil {
		t.Fatal("a third frame after 2.5/GlitchRate seconds passed")
	}

	// Time counts from when the budget left full.
	var g2 guard
	g2.init(Limits{GlitchBurst: 1}, false, nil)
	clock = t0
	g2.now = func() time.Time { return clock }
	clock = clock.Add(time.Hour) // idle: the budget stays full, no credit
	if g2.scan(ping) != nil {
		t.Fatal("the burst's one frame tripped")
	}
	if g2.scan(ping) == nil {
		t.Fatal("an hour idle gave more than the burst")
	}
}

// TestFrameCounter: the server's HEADERS and DATA frames are counted,
// whatever the write sizes.
func TestFrameCounter(t *testing.T) {
	wire := frames(t, func(fr *http2.Framer) error {
		fr.WriteSettings()
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x88}})
		fr.WriteContinuation(1, true, []byte{0x88})
		fr.WriteData(1, false, make([]byte, 300))
		fr.WritePing(true, [8]byte{})
		fr.WriteData(1, true, nil)
		fr.WriteRSTStream(3, http2.ErrCodeCancel)
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: []byte{0x88}, EndHeaders: true})
	})
	for _, chunk := range []int{1, 2, 9, 10, 100, 4096} {
		var fc frameCounter
		var n uint64
		for off := 0; off < len(wire); off += chunk {
			n += fc.count(wire[off:min(off+chunk, len(wire))])
		}
		if n != 4 {
			t.Errorf("writes of %d: counted %d frames, want 4", chunk, n)
		}
	}
}

// FuzzFrameCounter: any bytes, written in any pieces, are counted as
// when written at once.
func FuzzFrameCounter(f *testing.F) {
	f.Add([]byte("\x00\x00\x01\x00\x00\x00\x00\x00\x01x\x00\x00\x00\x01"), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8) {
		n := int(chunk)%64 + 1
		var whole, parts frameCounter
		want := whole.count(b)
		var got uint64
		for off := 0; off < len(b); off += n {
			got += parts.count(b[off:min(off+n, len(b))])
		}
		if got != want || whole != parts {
			t.Fatalf("at once %d %+v, in writes of %d: %d %+v", want, whole, n, got, parts)
		}
	})
}
