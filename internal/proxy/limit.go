package proxy

import (
	"context"
	"sync/atomic"
	"time"
)

// slots caps the requests in flight to one endpoint address
// (Options.MaxConnsPerEndpoint), as HAProxy's per-server maxconn: a
// request over the cap waits briefly for a slot (Options.QueueTimeout),
// then is refused. Waiters are not served in order: a request that
// arrives as a slot frees may take it first. Make it with newSlots.
type slots struct {
	busy    atomic.Int64
	waiting atomic.Int64
	// freed wakes one waiter after a release; it holds one token at most,
	// and a waiter that takes a slot passes a token on while slots and
	// waiters remain.
	freed chan struct{}
}

func newSlots() slots { return slots{freed: make(chan struct{}, 1)} }

// acquire takes a slot of at most limit (0 or less: no cap), waiting up to
// wait while none is free. queued reports whether it had to wait; ok
// whether it got the slot (false: the wait ran out, or ctx ended).
func (s *slots) acquire(ctx context.Context, limit int64, wait time.Duration) (queued, ok bool) {
	if limit <= 0 || s.busy.Add(1) <= limit {
		return false, true
	}
	s.busy.Add(-1)
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		if s.busy.Add(1) <= limit {
			if s.waiting.Load() > 1 && s.busy.Load() < limit {
				s.wake()
			}
			return true, true
		}
		s.busy.Add(-1)
		select {
		case <-s.freed:
		case <-t.C:
			return true, false
		case <-ctx.Done():
			return true, false
		}
	}
}

// release gives back a slot taken by acquire with the same limit.
func (s *slots) release(limit int64) {
	if limit <= 0 {
		return
	}
	s.busy.Add(-1)
	if s.waiting.Load() > 0 {
		s.wake()
	}
}

func (s *slots) wake() {
	select {
	case s.freed <- struct{}{}:
	default: // a token is already there
	}
}
