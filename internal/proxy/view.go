package proxy

import (
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"sluice.dev/sluice/internal/route"
)

// view is the runtime form of one route.Table, built by Update off the
// request path and swapped in atomically. Everything a request needs beyond
// Table.Match is a pointer-keyed map lookup away.
type view struct {
	table    *route.Table
	routes   map[*route.Route]*routeView
	backends map[*route.Backend]*backendView
	// pairs and services are the metric labels the table routes to, so
	// the next Update can delete the series of those it drops.
	pairs    map[[2]string]struct{}
	services map[string]struct{}
}

// routeView is what a matched route resolves to.
type routeView struct {
	backend *backendView // nil for a route without a backend
	ingress string
	service string
	// redirect and hsts are the route's SSLRedirect and HSTS (nil for
	// none) as a header value.
	redirect bool
	hsts     []string
	m        atomic.Pointer[routeMetrics] // resolved on first use: metrics
	// l7: rewrite, redirect, header filters and canary split (issue 27,
	// l7.go); nil for none.
	l7 *l7View
	// policy is the route's request policies (policy.go), nil for none.
	policy *policyView
	// mirrors get a copy of each request (mirror.go); nil for none.
	mirrors []*mirrorView
}

// backendView is one backend of one table: its endpoints bound to their
// upstream state and pools, and what its balancing policy needs.
type backendView struct {
	name    string
	service string // "namespace/service", the metrics label
	eps     []endpoint
	policy  route.Policy
	retries int
	// protocol spoken to the endpoints.
	protocol route.Protocol
	// invalid: route.Backend.Invalid, answered 500.
	invalid bool
	// hashHeader is Policy.HashHeader in canonical form, so the request
	// header map can be indexed without allocating.
	hashHeader string
	ring       []ringPoint // HeaderHash only
	// cookies maps an affinity cookie value to an index in eps.
	cookies map[string]int
	rr      atomic.Uint64
	// dflt serves requests that reach the table's DefaultBackend through
	// the table's default route, which Update cannot see (route.Table keeps
	// it private); nil for other backends.
	dflt *routeView
	m    backendMetrics
}

// endpoint is one entry of a backendView.
type endpoint struct {
	u    *upstream
	pool *pool
	// cookie is the affinity cookie value naming this endpoint (a hash of
	// its address), setCookie and setCookieSecure the Set-Cookie values.
	cookie, setCookie, setCookieSecure string
}

// Update installs t: it builds the per-table runtime view (endpoint state
// bound from the registry, hash rings, metric children), swaps it in with
// one atomic store, and then closes the idle connections of endpoints that
// no backend lists any more. Requests already running finish on the view
// they loaded. A nil t makes the proxy answer 503 as before the first
// Update. Update is safe to call concurrently with itself and ServeHTTP.
func (p *Proxy) Update(t *route.Table) {
	p.mu.Lock()
	defer p.mu.Unlock()

	usedUps := make(map[*upstream]bool)
	usedPools := make(map[*pool]bool)
	var v *view
	if t != nil {
		v = p.build(t, usedUps, usedPools)
	}
	old := p.view.Swap(v)
	if old != nil {
		p.m.forget(old, v)
	}
	p.sweepPolicies()

	for addr, u := range p.ups {
		if !usedUps[u] {
			delete(p.ups, addr)
			for _, pl := range u.pools {
				pl.retire()
			}
			continue
		}
		for k, pl := range u.pools {
			if !usedPools[pl] {
				delete(u.pools, k)
				pl.retire()
			}
		}
	}
	if v != nil {
		p.log.Debug("routing table installed", "backends", len(v.backends), "endpoints", len(p.ups), "replaced", old != nil)
	}
}

func (p *Proxy) build(t *route.Table, usedUps map[*upstream]bool, usedPools map[*pool]bool) *view {
	cfg := t.Config()
	tables := append([]*route.Table{t}, t.Scopes()...) // route.Scope
	nroutes := 0
	for _, st := range tables {
		for i := range st.Config().VirtualHosts {
			nroutes += len(st.Config().VirtualHosts[i].Routes)
		}
	}
	// Sized up front: growing maps of 10,000s of routes was a third of
	// an Update.
	v := &view{
		table:    t,
		routes:   make(map[*route.Route]*routeView, nroutes),
		backends: make(map[*route.Backend]*backendView),
		pairs:    make(map[[2]string]struct{}, len(cfg.VirtualHosts)),
		services: make(map[string]struct{}),
	}
	// Previous backends by name, to reuse their hash rings.
	prev := make(map[string]*backendView)
	if pv := p.view.Load(); pv != nil {
		for _, bv := range pv.backends {
			if bv.ring != nil {
				prev[bv.name] = bv
			}
		}
	}
	backend := func(b *route.Backend) *backendView {
		if b == nil {
			return nil
		}
		if bv := v.backends[b]; bv != nil {
			return bv
		}
		bv := p.buildBackend(b, prev, usedUps, usedPools)
		v.backends[b] = bv
		v.services[bv.service] = struct{}{}
		return bv
	}
	for _, st := range tables {
		vhs := st.Config().VirtualHosts
		for i := range vhs {
			vh := &vhs[i]
			for j := range vh.Routes {
				r := &vh.Routes[j]
				bv := backend(r.Backend)
				rv := p.routeView(bv, r)
				p.attachL7(v, rv, r, backend) // l7.go; nothing without Filters or Split
				if r.Mirrors != nil {
					attachMirrors(rv, r, backend) // mirror.go
				}
				v.routes[r] = rv
				v.pairs[[2]string{rv.ingress, rv.service}] = struct{}{}
			}
		}
	}
	if bv := backend(cfg.DefaultBackend); bv != nil {
		bv.dflt = p.routeView(bv, nil)
		v.pairs[[2]string{"", bv.service}] = struct{}{}
	}
	return v
}

// routeView returns the view of rt (nil for the table's default route and
// for requests without a route).
func (p *Proxy) routeView(bv *backendView, rt *route.Route) *routeView {
	rv := &routeView{backend: bv}
	if rt != nil {
		rv.ingress = rt.Ingress
		rv.redirect = rt.SSLRedirect
		if rt.HSTS != "" {
			rv.hsts = []string{rt.HSTS}
		}
		rv.policy = p.policyView(rt)
	}
	if bv != nil {
		rv.service = bv.service
	}
	return rv
}

func (p *Proxy) buildBackend(b *route.Backend, prev map[string]*backendView, usedUps map[*upstream]bool, usedPools map[*pool]bool) *backendView {
	bv := &backendView{
		name:    b.Name,
		service: b.Namespace + "/" + b.Service,
		policy:  b.Policy,
		retries: b.Policy.Retries,
		invalid: b.Invalid,
	}
	if bv.retries < 0 {
		bv.retries = p.opts.Retries
	}
	if b.Policy.HashHeader != "" {
		bv.hashHeader = http.CanonicalHeaderKey(b.Policy.HashHeader)
	}
	key := poolKey{connect: p.opts.DialTimeout, response: p.opts.ResponseHeaderTimeout,
		protocol: b.Protocol, tls: tlsKey(b.TLS)}
	if b.Protocol.GRPC() {
		// A client-streaming call's response header comes at its end;
		// gRPC deadlines bound calls instead.
		key.response = 0
	}
	if b.Policy.ConnectTimeout > 0 {
		key.connect = b.Policy.ConnectTimeout
	}
	if b.Policy.ResponseTimeout > 0 {
		key.response = b.Policy.ResponseTimeout
	}
	key.send = b.Policy.SendTimeout
	bv.protocol = b.Protocol

	seen := make(map[string]bool, len(b.Endpoints))
	for _, e := range b.Endpoints {
		if e.Address == "" || seen[e.Address] {
			continue
		}
		seen[e.Address] = true
		u := p.ups[e.Address]
		if u == nil {
			u = &upstream{addr: e.Address, pools: make(map[poolKey]*pool), slots: newSlots()}
			p.ups[e.Address] = u
		}
		pl := u.pools[key]
		if pl == nil {
			pl = p.newPool(e.Address, key, b.TLS)
			u.pools[key] = pl
		}
		usedUps[u] = true
		usedPools[pl] = true
		bv.eps = append(bv.eps, endpoint{u: u, pool: pl})
	}

	if b.Policy.Algorithm == route.HeaderHash && len(bv.eps) > 0 {
		bv.ring = ring(bv, prev[b.Name])
	}
	if a := b.Policy.Affinity; a != nil && len(bv.eps) > 0 {
		p.affinity(bv, a)
	}
	bv.m = p.m.backend(bv.service)
	return bv
}

// ring returns the hash ring for bv, reusing the previous table's ring when
// the same backend had the same endpoints (rebuilding rings is the costly
// part of an Update with many endpoints).
func ring(bv, prev *backendView) []ringPoint {
	if prev != nil && sameAddrs(prev.eps, bv.eps) {
		return prev.ring
	}
	addrs := make([]string, len(bv.eps))
	for i, e := range bv.eps {
		addrs[i] = e.u.addr
	}
	return buildRing(addrs)
}

func sameAddrs(a, b []endpoint) bool {
	return slices.EqualFunc(a, b, func(x, y endpoint) bool { return x.u.addr == y.u.addr })
}

func (p *Proxy) affinity(bv *backendView, a *route.CookieAffinity) {
	maxAge := 0
	if a.MaxAge > 0 {
		maxAge = int((a.MaxAge + time.Second - 1) / time.Second)
	}
	bv.cookies = make(map[string]int, len(bv.eps))
	for i := range bv.eps {
		e := &bv.eps[i]
		e.cookie = affinityValue(e.u.addr)
		c := &http.Cookie{Name: a.Name, Value: e.cookie, Path: "/", MaxAge: maxAge, HttpOnly: true}
		e.setCookie = c.String()
		c.Secure = true
		e.setCookieSecure = c.String()
		if e.setCookie == "" { // invalid cookie name: String returns ""
			p.log.Warn("invalid affinity cookie name; affinity disabled", "backend", bv.name, "cookie", strconv.Quote(a.Name))
			bv.cookies = nil
			return
		}
		bv.cookies[e.cookie] = i
	}
}
