package gcfloor

import (
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		live, floor uint64
		base, want  int
	}{
		{live: 4 * mib, floor: 64 * mib, base: 100, want: 1500},
		{live: 32 * mib, floor: 64 * mib, base: 100, want: 100},
		{live: 40 * mib, floor: 64 * mib, base: 100, want: 100}, // 60% < base
		{live: 64 * mib, floor: 64 * mib, base: 100, want: 100},
		{live: 200 * mib, floor: 64 * mib, base: 100, want: 100},
		{live: 200 * mib, floor: 64 * mib, base: 50, want: 50},
		{live: 1, floor: 64 * mib, base: 100, want: maxPercent},
		{live: 0, floor: 64 * mib, base: 100, want: 100},
		{live: 16 * mib, floor: 64 * mib, base: 400, want: 400},
	}
	for _, c := range cases {
		if got := Percent(c.live, c.floor, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.live, c.floor, c.base, got, c.want)
		}
	}
}

func gogc(t *testing.T) int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// waitAdjusted collects until the finalizer of the tuner has run
// (finalizers run on their own goroutine, after the collection).
func waitAdjusted(t *testing.T, tu *Tuner, want func(int) bool) {
	t.Helper()
	for i := 0; i < 100; i++ {
		runtime.GC()
		runtime.Gosched()
		if want(tu.GOGC()) {
			return
		}
	}
	t.Fatalf("GOGC stayed %d", tu.GOGC())
}

func TestTunerRaisesAndRestores(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	// A floor far above this test binary's live heap: GOGC goes up.
	tu := Start(1<<30, 100, slog.New(slog.NewTextHandler(io.Discard, nil)))
	waitAdjusted(t, tu, func(p int) bool { return p > 100 })
	if got := gogc(t); got != tu.GOGC() {
		t.Fatalf("runtime GOGC %d, tuner says %d", got, tu.GOGC())
	}
	tu.Stop()
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC after Stop = %d, want 100", got)
	}
	runtime.GC()
	runtime.GC()
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC changed after Stop: %d", got)
	}
}

func TestTunerLeavesLargeHeapAlone(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	// A floor below any live heap: GOGC stays the base.
	tu := Start(1, 100, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer tu.Stop()
	for i := 0; i < 5; i++ {
		runtime.GC()
	}
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC = %d, want 100", got)
	}
}

func TestFloor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ want, max, got uint64 }{
		{64 * mib, 0, 64 * mib},
		{64 * mib, 1024 * mib, 64 * mib},
		{64 * mib, 128 * mib, 32 * mib},
		{64 * mib, 256 * mib, 64 * mib},
	} {
		if got := Floor(c.want, c.max); got != c.got {
			t.Errorf("Floor(%d, %d) = %d, want %d", c.want, c.max, got, c.got)
		}
	}
}
