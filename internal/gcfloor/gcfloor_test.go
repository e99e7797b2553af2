package gcfloor

import (
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
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
	// RelaxAfter < 0: the floor whatever the allocation rate (this test
	// allocates next to nothing between its collections).
	tu := Start(Options{Floor: 1 << 30, Base: 100, RelaxAfter: -1, Logger: discard})
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
	tu := Start(Options{Floor: 1, Base: 100, RelaxAfter: -1, Logger: discard})
	defer tu.Stop()
	for i := 0; i < 5; i++ {
		runtime.GC()
	}
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC = %d, want 100", got)
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestBusy(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name       string
		live, allc uint64
		elapsed    time.Duration
		base       int
		relax      time.Duration
		want       bool
	}{
		// 5 MiB live at GOGC=100: 5 MiB of headroom.
		{"under load: 6 MiB/s fills 5 MiB in under 10 s", 5 * mib, 6 * mib, time.Second, 100, 10 * time.Second, true},
		{"idle: 1 MiB in 2 minutes", 5 * mib, 1 * mib, 2 * time.Minute, 100, 10 * time.Second, false},
		{"light: 400 KiB/s fills 5 MiB in 12.8 s", 5 * mib, 4000 << 10, 10 * time.Second, 100, 10 * time.Second, false},
		{"a larger base gives more headroom", 5 * mib, 6 * mib, time.Second, 400, 2 * time.Second, false},
		{"first collection: no rate yet", 5 * mib, 0, 0, 100, 10 * time.Second, true},
		{"relax off", 5 * mib, 0, time.Minute, 100, -1, true},
		{"empty heap allocating", 0, 1, time.Second, 100, 10 * time.Second, true},
	}
	for _, c := range cases {
		if got := Busy(c.live, c.allc, c.elapsed, c.base, c.relax); got != c.want {
			t.Errorf("%s: Busy(%d, %d, %v, %d, %v) = %v, want %v", c.name, c.live, c.allc, c.elapsed, c.base, c.relax, got, c.want)
		}
	}
}

// TestTunerRelaxesWhenIdle: a floor far above the live heap, but the
// process allocates next to nothing between collections, so at the base
// GOGC the collector would be rare: the tuner keeps the base.
func TestTunerRelaxesWhenIdle(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	tu := Start(Options{Floor: 1 << 30, Base: 100, RelaxAfter: time.Nanosecond, Logger: discard})
	defer tu.Stop()
	// The first adjustment has no rate to judge by and raises GOGC; the
	// later ones see the rate and put the base back.
	for i := 0; i < 100 && tu.adjusts.Load() < 3; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if n := tu.adjusts.Load(); n < 3 {
		t.Fatalf("%d adjustments after 100 collections", n)
	}
	if got := gogc(t); got != 100 || tu.GOGC() != 100 {
		t.Fatalf("GOGC = %d (tuner %d), want 100", got, tu.GOGC())
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
