package proxy

import (
	"hash/maphash"
	"net/netip"
	"sync"

	"sluice.dev/sluice/internal/route"
)

// Rate limits per client address (route.RateLimit): token buckets for
// requests per second and per minute, and a count of requests in flight.
// The state lives in each proxy process (limits are per replica) and
// survives table swaps while the Ingress keeps the same limits.
//
// Memory is bounded against a client spraying source addresses: each
// limiter keeps at most limiterShards*maxClientsPerShard clients (about
// 1.5 MB); a new client in a full shard evicts an idle one (nothing in
// flight), found among a few random probes, or is refused when every probe
// is busy. An evicted client starts again with a full bucket. IPv6 clients
// are counted per /64, the block a single host usually holds.

const (
	limiterShards      = 16
	maxClientsPerShard = 1024
	evictProbes        = 8
)

// limiterKey identifies a limiter across table swaps: an Ingress and its
// limits (changed limits start afresh).
type limiterKey struct {
	ingress              string
	rps, rpm, brps, brpm int
	concurrent           int
}

// limiter holds the buckets; what may change without resetting them
// (exempt ranges, the answer's status) is in the policyView.
type limiter struct {
	rps, rpm   bucketRate
	concurrent int32
	seed       maphash.Seed
	shards     [limiterShards]limiterShard
}

// bucketRate is a token bucket's refill rate (tokens per nanosecond) and
// size; size 0 is no bucket.
type bucketRate struct {
	perNano float64
	size    float64
}

type limiterShard struct {
	mu      sync.Mutex
	clients map[netip.Addr]*clientState
}

// clientState is one client's buckets and requests in flight. Guarded by
// its shard's mu.
type clientState struct {
	rps, rpm float64 // tokens
	last     int64   // UnixNano of the last refill
	inflight int32
	shard    *limiterShard
}

// limiter returns the limiter of ingress for l, the previous table's when
// its limits are the same. Called under p.mu from Update.
func (p *Proxy) limiter(ingress string, l *route.RateLimit) *limiter {
	k := limiterKey{ingress: ingress, rps: l.RPS, rpm: l.RPM, brps: l.BurstRPS, brpm: l.BurstRPM, concurrent: l.Concurrent}
	if p.pol.used == nil {
		p.pol.used = make(map[limiterKey]bool)
	}
	if p.pol.limiters == nil {
		p.pol.limiters = make(map[limiterKey]*limiter)
	}
	p.pol.used[k] = true
	lm := p.pol.limiters[k]
	if lm == nil {
		lm = newLimiter(l)
		p.pol.limiters[k] = lm
	}
	return lm
}

func newLimiter(l *route.RateLimit) *limiter {
	lm := &limiter{concurrent: int32(l.Concurrent), seed: maphash.MakeSeed()}
	if l.RPS > 0 {
		lm.rps = bucketRate{perNano: float64(l.RPS) / 1e9, size: float64(max(l.BurstRPS, 1))}
	}
	if l.RPM > 0 {
		lm.rpm = bucketRate{perNano: float64(l.RPM) / 60e9, size: float64(max(l.BurstRPM, 1))}
	}
	for i := range lm.shards {
		lm.shards[i].clients = make(map[netip.Addr]*clientState)
	}
	return lm
}

// limitKey is the address a client is counted under: IPv6 per /64.
func limitKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		pf, _ := a.Prefix(64)
		return pf.Addr()
	}
	return a
}

// take admits a request of client at now. It returns the state to release
// when the request ends (nil when none is held) and -1, or the refusal
// reason.
func (l *limiter) take(client netip.Addr, now int64) (*clientState, int) {
	key := limitKey(client)
	sh := &l.shards[maphash.Comparable(l.seed, key)%limiterShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.clients[key]
	if c == nil {
		if len(sh.clients) >= maxClientsPerShard && !sh.evict() {
			return nil, refusedRateLimit
		}
		c = &clientState{rps: l.rps.size, rpm: l.rpm.size, last: now, shard: sh}
		sh.clients[key] = c
	}
	if now > c.last {
		el := float64(now - c.last)
		c.rps = min(l.rps.size, c.rps+el*l.rps.perNano)
		c.rpm = min(l.rpm.size, c.rpm+el*l.rpm.perNano)
		c.last = now
	}
	if l.rps.size > 0 && c.rps < 1 || l.rpm.size > 0 && c.rpm < 1 {
		return nil, refusedRateLimit
	}
	if l.concurrent > 0 && c.inflight >= l.concurrent {
		return nil, refusedConcurrency
	}
	if l.rps.size > 0 {
		c.rps--
	}
	if l.rpm.size > 0 {
		c.rpm--
	}
	if l.concurrent == 0 {
		return nil, -1
	}
	c.inflight++
	return c, -1
}

// release ends a request that take admitted with c.
func (l *limiter) release(c *clientState) {
	c.shard.mu.Lock()
	c.inflight--
	c.shard.mu.Unlock()
}

// evict removes an idle client, probing a few in the map's random order.
// Called with sh.mu held.
func (sh *limiterShard) evict() bool {
	n := 0
	for k, c := range sh.clients {
		if c.inflight == 0 {
			delete(sh.clients, k)
			return true
		}
		if n++; n == evictProbes {
			break
		}
	}
	return false
}
