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

// take takes a slot of at most limit (0 or less: no cap) if one is free.
func (s *slots) take(limit int64) bool {
	if limit <= 0 || s.busy.Add(1) <= limit {
		return true
	}
	s.busy.Add(-1)
	return false
}

// wait takes a slot of at most limit once one frees, waiting up to d; false
// if the wait ran out or ctx ended first. Call it after take failed.
func (s *slots) wait(ctx context.Context, limit int64, d time.Duration) bool {
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		if s.busy.Add(1) <= limit {
			if s.waiting.Load() > 1 && s.busy.Load() < limit {
				s.wake() // for another waiter
			}
			return true
		}
		s.busy.Add(-1)
		select {
		case <-s.freed:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// release gives back a slot taken by take or wait with the same limit.
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
