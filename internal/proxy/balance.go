package proxy

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"sluice.dev/sluice/internal/route"
)

// Balancing. Every algorithm chooses among the endpoints of one backendView
// in passes that relax constraints until one endpoint qualifies, so that a
// choice always exists:
//
//	pass 0: not ejected by passive health and not tried yet by this request
//	pass 1: not tried yet (every untried endpoint is ejected: use them anyway)
//	pass 2: any endpoint
const passes = 3

// maxTried bounds the endpoints a request remembers to avoid on retry.
const maxTried = 16

// tried is the set of endpoints a request already attempted.
type tried struct {
	n   int
	idx [maxTried]int32
}

func (t *tried) has(i int) bool {
	for _, j := range t.idx[:t.n] {
		if int(j) == i {
			return true
		}
	}
	return false
}

func (t *tried) add(i int) {
	if t.n < maxTried && !t.has(i) {
		t.idx[t.n] = int32(i)
		t.n++
	}
}

func (b *backendView) usable(i, pass int, now int64, t *tried) bool {
	switch pass {
	case 0:
		return !t.has(i) && !b.eps[i].u.ejected(now)
	case 1:
		return !t.has(i)
	}
	return true
}

// probe returns the first usable endpoint at or after start (wrapping), or -1.
func (b *backendView) probe(start, pass int, now int64, t *tried) int {
	n := len(b.eps)
	for k := range n {
		i := start + k
		if i >= n {
			i -= n
		}
		if b.usable(i, pass, now, t) {
			return i
		}
	}
	return -1
}

// pick chooses an endpoint index; b has at least one endpoint. key is the
// hash of the request's HashHeader when hasKey.
func (b *backendView) pick(key uint64, hasKey bool, now int64, t *tried) int {
	if len(b.eps) == 1 {
		return 0
	}
	switch b.policy.Algorithm {
	case route.RoundRobin:
		start := int((b.rr.Add(1) - 1) % uint64(len(b.eps)))
		for pass := range passes {
			if i := b.probe(start, pass, now, t); i >= 0 {
				return i
			}
		}
	case route.HeaderHash:
		if hasKey && len(b.ring) > 0 {
			return b.ringPick(key, now, t)
		}
	}
	return b.leastRequest(now, t)
}

// leastRequest is the power of two random choices: of two distinct random
// usable endpoints, the one with fewer requests in flight (the first on a
// tie).
func (b *backendView) leastRequest(now int64, t *tried) int {
	n := len(b.eps)
	for pass := range passes {
		a := b.probe(rand.IntN(n), pass, now, t)
		if a < 0 {
			continue
		}
		c := b.probe(rand.IntN(n), pass, now, t)
		if c == a {
			next := a + 1
			if next == n {
				next = 0
			}
			c = b.probe(next, pass, now, t)
		}
		if c != a && b.eps[c].u.inflight.Load() < b.eps[a].u.inflight.Load() {
			return c
		}
		return a
	}
	return 0
}

// ringPoint is one virtual node of a consistent-hash ring.
type ringPoint struct {
	hash uint64
	idx  int32
}

// vnodes is the number of ring points per endpoint, fewer for very large
// backends to bound a ring's size.
func vnodes(n int) int {
	return max(16, min(160, 16384/max(n, 1)))
}

// buildRing places vnodes points per address on a ring. Points depend only
// on the address, so every sluice replica builds the same ring and sends a
// header value to the same pod, and removing an endpoint moves only the
// values that mapped to it.
func buildRing(addrs []string) []ringPoint {
	vn := vnodes(len(addrs))
	ring := make([]ringPoint, 0, vn*len(addrs))
	for i, a := range addrs {
		h := hashString(a)
		for k := range vn {
			ring = append(ring, ringPoint{hash: mix64(h ^ uint64(k+1)*0x9e3779b97f4a7c15), idx: int32(i)})
		}
	}
	slices.SortFunc(ring, func(x, y ringPoint) int {
		switch {
		case x.hash < y.hash:
			return -1
		case x.hash > y.hash:
			return 1
		}
		return int(x.idx - y.idx)
	})
	return ring
}

// ringPick walks the ring clockwise from key to the first usable endpoint.
func (b *backendView) ringPick(key uint64, now int64, t *tried) int {
	ring := b.ring
	lo, hi := 0, len(ring)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ring[m].hash < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for pass := range passes {
		for k := range ring {
			j := lo + k
			if j >= len(ring) {
				j -= len(ring)
			}
			if i := int(ring[j].idx); b.usable(i, pass, now, t) {
				return i
			}
		}
	}
	return 0
}

// hashString is FNV-1a followed by a 64-bit finalizer: stable across
// processes (unlike maphash), so replicas agree, and allocation-free.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return mix64(h)
}

// mix64 is MurmurHash3's fmix64.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// affinityValue is the cookie value naming an endpoint: a short hash of its
// address, so the cookie does not reveal pod IPs, and the same on every
// replica.
func affinityValue(addr string) string {
	s := strconv.FormatUint(hashString("sluice-affinity\x00"+addr), 16)
	return strings.Repeat("0", 16-len(s)) + s
}

// pinned returns the index of the live, non-ejected endpoint named by the
// request's affinity cookie, or -1.
func (b *backendView) pinned(h http.Header, now int64) int {
	if b.cookies == nil {
		return -1
	}
	name := b.policy.Affinity.Name
	for _, line := range h["Cookie"] {
		for len(line) > 0 {
			var part string
			part, line, _ = strings.Cut(line, ";")
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok || k != name {
				continue
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			if i, ok := b.cookies[v]; ok && !b.eps[i].u.ejected(now) {
				return i
			}
		}
	}
	return -1
}
