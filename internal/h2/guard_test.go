package h2

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/net/http2"
)

// frames returns the wire bytes of frames written with fr's methods.
func frames(t testing.TB, write func(fr *http2.Framer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(http2.NewFramer(&b, nil)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func settingsFrames(t testing.TB, n int) []byte {
	return frames(t, func(fr *http2.Framer) error {
		for range n {
			if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}); err != nil {
				return err
			}
		}
		return nil
	})
}

func headersFrame(t testing.TB, id uint32) []byte {
	return frames(t, func(fr *http2.Framer) error {
		// The block is not HPACK the guard reads: it reads no payload.
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte("\x04\x09SETTINGS!"), EndHeaders: true, EndStream: true})
	})
}

// scanAll scans b in chunks of size n and returns the offset at which the
// guard tripped (the end of the chunk), -1 if it did not.
func scanAll(g *guard, b []byte, n int) int {
	for off := 0; off < len(b); off += n {
		end := min(off+n, len(b))
		if err := g.scan(b[off:end]); err != nil {
			if !errors.Is(err, errCalm) {
				panic(err)
			}
			return end
		}
	}
	return -1
}

// TestGuardSettingsBurst: the guard trips on the SETTINGS frame that
// overdraws the budget, whatever the read sizes; acknowledgements cost
// nothing, requests give the budget back, payloads are skipped.
func TestGuardSettingsBurst(t *testing.T) {
	const burst = 4
	settingsLen := len(settingsFrames(t, 1))
	acks := frames(t, func(fr *http2.Framer) error {
		for range 10 {
			if err := fr.WriteSettingsAck(); err != nil {
				return err
			}
		}
		return nil
	})
	for _, tc := range []struct {
		name string
		wire []byte
		trip int // the frame whose header ends at this offset trips the guard; -1: none
	}{
		{"burst", cat(preface, settingsFrames(t, burst)), -1},
		{"one more", cat(preface, settingsFrames(t, burst+1)), len(preface) + burst*settingsLen + headerLen},
		{"acks free", cat(preface, acks, settingsFrames(t, burst)), -1},
		{"request refunds", cat(preface, settingsFrames(t, burst), headersFrame(t, 1), settingsFrames(t, 1)), -1},
		{"refund capped", cat(preface, headersFrame(t, 1), headersFrame(t, 3), settingsFrames(t, burst+1)),
			len(preface) + 2*len(headersFrame(t, 1)) + burst*settingsLen + headerLen},
		{"flood", cat(preface, settingsFrames(t, 1000)), len(preface) + burst*settingsLen + headerLen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{1, 2, 7, 9, 10, 4096} {
				var g guard
				g.init(Limits{SettingsBurst: burst}, true, nil)
				got := scanAll(&g, tc.wire, chunk)
				if tc.trip == -1 && got != -1 {
					t.Errorf("reads of %d: tripped at %d, want not at all", chunk, got)
				}
				if tc.trip != -1 && (got < tc.trip || got >= tc.trip+chunk) {
					t.Errorf("reads of %d: tripped at %d, want in the read ending the frame header at %d", chunk, got, tc.trip)
				}
				if got != -1 && g.scan([]byte{0}) == nil {
					t.Errorf("reads of %d: a read after the guard tripped passed", chunk)
				}
			}
		})
	}
}

// TestGuardDefault: a zero Limits allows DefaultSettingsBurst frames.
func TestGuardDefault(t *testing.T) {
	var g guard
	g.init(Limits{}, false, nil)
	if got := scanAll(&g, settingsFrames(t, DefaultSettingsBurst), 4096); got != -1 {
		t.Fatalf("tripped at %d within the default burst", got)
	}
	if g.scan(settingsFrames(t, 1)) == nil {
		t.Fatal("one frame over the default burst passed")
	}
}

func cat(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			b = append(b, p...)
		case []byte:
			b = append(b, p...)
		}
	}
	return b
}

// FuzzGuard: any input, read in any chunks, is followed the same way as
// read at once, and never panics.
func FuzzGuard(f *testing.F) {
	f.Add(cat(preface, settingsFrames(f, 40)), uint8(3))
	f.Add(cat(preface, headersFrame(f, 1), settingsFrames(f, 2)), uint8(9))
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\x04\x00\x00\x00\x00\x00"), uint8(1))
	for _, g := range glitchFrames(f) {
		f.Add(cat(preface, repeat(g.frame, 5)), uint8(len(g.frame)))
	}
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8) {
		n := int(chunk)%64 + 1
		var whole, parts guard
		whole.init(Limits{SettingsBurst: 2, GlitchBurst: 3}, true, nil)
		parts.init(Limits{SettingsBurst: 2, GlitchBurst: 3}, true, nil)
		whole.now, parts.now = fixedClock, fixedClock
		errWhole := whole.scan(b)
		tripped := scanAll(&parts, b, n) != -1
		if (errWhole != nil) != tripped {
			t.Fatalf("read at once: %v; in reads of %d: tripped %v", errWhole, n, tripped)
		}
		if errWhole == nil && (whole.skip != parts.skip || whole.hdrN != parts.hdrN || whole.settings != parts.settings || whole.glitches != parts.glitches || whole.padWait != parts.padWait) {
			t.Fatalf("state differs: %+v vs %+v", whole, parts)
		}
	})
}
