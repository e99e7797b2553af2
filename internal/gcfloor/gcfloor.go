// Package gcfloor keeps Go's garbage collector from cycling on a small
// heap. A proxy's live heap is small (a few MiB of routing table and
// connection state) while it allocates a little for every request, so
// with GOGC=100 it collects dozens of times a second. Below a floor, the
// tuner raises GOGC after every collection so that the next one is due
// when the heap reaches the floor; above it, GOGC is the base again.
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
)

// maxPercent bounds the GOGC the tuner sets (a nearly empty heap would
// otherwise ask for an absurd one).
const maxPercent = 10000

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

// Tuner adjusts GOGC after every collection; Stop ends it and puts the
// base back.
type Tuner struct {
	floor   uint64
	base    int
	stopped atomic.Bool
	current atomic.Int64
	sample  []metrics.Sample
}

// Start tunes GOGC for a heap floor of floor bytes on top of base (the
// GOGC the process runs with, normally 100). The first adjustment
// follows the next collection.
func Start(floor uint64, base int, log *slog.Logger) *Tuner {
	t := &Tuner{floor: floor, base: base, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.current.Store(int64(base))
	log.Info("garbage collector tuned for a heap floor", "floor_bytes", floor, "base_gogc", base)
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

// adjust sets GOGC for the live heap the last collection left, if it
// differs by more than a tenth from the one in effect (setting it costs
// a little, and the live heap jitters).
func (t *Tuner) adjust() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := Percent(t.sample[0].Value.Uint64(), t.floor, t.base)
	cur := int(t.current.Load())
	if p == cur || p != t.base && abs(p-cur) < cur/10 {
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
	debug.SetGCPercent(t.base)
	t.current.Store(int64(t.base))
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
