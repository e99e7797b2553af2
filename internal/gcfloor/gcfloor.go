// Package gcfloor keeps Go's garbage collector from cycling on a small
// heap. A proxy's live heap is small (a few MiB of routing table and
// connection state) while it allocates a little for every request, so
// with GOGC=100 it collects dozens of times a second. Below a floor, the
// tuner raises GOGC after every collection so that the next one is due
// when the heap reaches the floor; above it, GOGC is the base again.
//
// The floor only pays while the collector would otherwise be busy. When
// the process allocates so little that, at the base GOGC, a collection
// would come less often than every RelaxAfter (an idle proxy: the runtime
// then collects every 2 minutes), the tuner puts the base back, so the
// heap goal falls to the base's and the runtime returns the free pages the
// floor kept (they are retained up to about 1.1× the heap goal). The
// decision is by allocation rate, not by the time between collections,
// which itself depends on the GOGC in effect and would make it swing.
package gcfloor

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxPercent bounds the GOGC the tuner sets (a nearly empty heap would
// otherwise ask for an absurd one).
const maxPercent = 10000

// RelaxAfter is the default Options.RelaxAfter: the floor is kept only
// while collections at the base GOGC would come more often than this.
const RelaxAfter = 10 * time.Second

// Percent is the GOGC that makes the next collection due at floor bytes
// for a live heap of live bytes, never below base (the configured GOGC)
// and never above maxPercent.
func Percent(live, floor uint64, base int) int {
	if live == 0 || live >= floor {
		return base
	}
	p := (floor - live) * 100 / live
	if p > maxPercent {
		p = maxPercent
	}
	return max(base, int(p))
}

// Busy reports whether the collector would be busy at the base GOGC: a
// live heap of live bytes grows by live×base/100 before the next
// collection, and allocated bytes in elapsed would fill that sooner than
// relaxAfter. With no elapsed time to judge by (the first collection), it
// is busy: the floor is the default.
func Busy(live, allocated uint64, elapsed time.Duration, base int, relaxAfter time.Duration) bool {
	if elapsed <= 0 || relaxAfter <= 0 {
		return true
	}
	headroom := float64(live) * float64(base) / 100
	rate := float64(allocated) / elapsed.Seconds() // bytes per second
	return rate*relaxAfter.Seconds() > headroom
}

// Options configure a Tuner.
type Options struct {
	// Floor is the heap size, in bytes, below which GOGC is raised.
	Floor uint64
	// Base is the GOGC the process runs with (normally 100) and the least
	// the tuner sets.
	Base int
	// RelaxAfter: the floor applies only while collections at Base would
	// come more often than this (by the allocation rate since the previous
	// collection); otherwise GOGC is Base. Zero means RelaxAfter (10 s);
	// negative keeps the floor whatever the rate.
	RelaxAfter time.Duration
	// Logger gets one line at the start; nil: slog.Default().
	Logger *slog.Logger
}

// Tuner adjusts GOGC after every collection; Stop ends it and puts the
// base back.
type Tuner struct {
	o       Options
	stopped atomic.Bool
	current atomic.Int64
	sample  []metrics.Sample
	// The previous adjustment's cumulative allocation and time (the
	// finalizer goroutine's own).
	lastAllocs uint64
	lastAt     time.Time
	adjusts    atomic.Uint64 // adjustments made (for tests)
}

// Start tunes GOGC for a heap floor. The first adjustment follows the
// next collection.
func Start(o Options) *Tuner {
	if o.RelaxAfter == 0 {
		o.RelaxAfter = RelaxAfter
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	t := &Tuner{o: o, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/allocs:bytes"},
	}}
	t.current.Store(int64(o.Base))
	o.Logger.Info("garbage collector tuned for a heap floor", "floor_bytes", o.Floor, "base_gogc", o.Base,
		"relax_after", o.RelaxAfter)
	t.arm()
	return t
}

// sentinel is garbage whose finalizer runs once per collection.
type sentinel struct{ t *Tuner }

func (t *Tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}

// adjust sets GOGC for the live heap the last collection left and the
// allocation rate since the previous one, if it differs by more than a
// tenth from the one in effect (setting it costs a little, and the live
// heap jitters).
func (t *Tuner) adjust() {
	defer t.adjusts.Add(1)
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 || t.sample[1].Value.Kind() != metrics.KindUint64 {
		return
	}
	live, allocs, now := t.sample[0].Value.Uint64(), t.sample[1].Value.Uint64(), time.Now()
	var elapsed time.Duration
	if !t.lastAt.IsZero() {
		elapsed = now.Sub(t.lastAt)
	}
	busy := Busy(live, allocs-t.lastAllocs, elapsed, t.o.Base, t.o.RelaxAfter)
	t.lastAllocs, t.lastAt = allocs, now
	p := t.o.Base
	if busy {
		p = Percent(live, t.o.Floor, t.o.Base)
	}
	cur := int(t.current.Load())
	if p == cur || p != t.o.Base && abs(p-cur) < cur/10 {
		return
	}
	t.current.Store(int64(p))
	debug.SetGCPercent(p)
}

func abs(n int) int { return max(n, -n) }

// GOGC is the value the tuner set last.
func (t *Tuner) GOGC() int { return int(t.current.Load()) }

// Stop ends the tuning and restores the base GOGC.
func (t *Tuner) Stop() {
	if t.stopped.Swap(true) {
		return
	}
	debug.SetGCPercent(t.o.Base)
	t.current.Store(int64(t.o.Base))
}

// Floor is the heap floor to use: want, but at most a quarter of the
// memory limit (0: none), so that a small container keeps room for
// everything that is not heap and for the heap to grow past the floor.
func Floor(want, memoryMax uint64) uint64 {
	if memoryMax > 0 && want > memoryMax/4 {
		return memoryMax / 4
	}
	return want
}

// CgroupMemoryMax is the cgroup v2 memory limit of this process, 0 if
// there is none or it cannot be read.
func CgroupMemoryMax() uint64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0 // "max"
	}
	return n
}
