package awsfake

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// listen opens the group's traffic listener. Caller holds f.mu.
func (g *group) listen() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	g.ln = ln
	f := g.f
	if g.isHTTP() {
		g.httpSrv = &http.Server{Handler: http.HandlerFunc(g.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
		f.wg.Go(func() { _ = g.httpSrv.Serve(ln) })
		return nil
	}
	g.accept(ln, "")
	if !g.cfg.CrossZoneOff {
		return nil
	}
	g.zoneLns = map[string]net.Listener{}
	for _, z := range f.opts.Zones {
		zl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		g.zoneLns[z] = zl
		g.accept(zl, z)
	}
	return nil
}

// accept forwards the connections of one listener: the group's (zone "":
// every zone) or one zone's node.
func (g *group) accept(ln net.Listener, zone string) {
	f := g.f
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Go(func() { g.forward(c, zone) })
		}
	})
}

// ZoneListener returns the address of a zone's load-balancer node of a
// group created with Listen and CrossZoneOff, as a client that resolved
// the load balancer's name to that zone's address would reach it.
func (f *Fake) ZoneListener(arn, zone string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.groups[arn]
	if !ok || g.zoneLns[zone] == nil {
		return "", false
	}
	return g.zoneLns[zone].Addr().String(), true
}

// closeListener stops accepting traffic. Caller holds f.mu.
func (g *group) closeListener() {
	if g.httpSrv != nil {
		_ = g.httpSrv.Close()
	} else if g.ln != nil {
		_ = g.ln.Close()
	}
	for _, zl := range g.zoneLns {
		_ = zl.Close()
	}
}

// pick chooses the target for a new connection or request, round robin.
// NLB (TCP): healthy targets, and deregistered ones within
// NewConnectionWindow of their deregistration. ALB (HTTP): healthy ones
// only. Both fail open to unhealthy targets when nothing else is left.
// A zone's node (zone not "") picks among that zone's targets (and those
// of zone "all" or none); when the zone has none to offer it picks nothing
// (the connection is reset), unless no zone has a healthy target: then it
// fails open to every target like the group's own listener. Caller holds
// f.mu.
func (g *group) pick(zone string) *target {
	if zone == "" {
		return g.pickIn(func(*target) bool { return true })
	}
	if t := g.pickIn(func(t *target) bool { return targetInZone(t, zone) }); t != nil && (t.state == stateHealthy || t.state == stateDraining) {
		return t
	}
	for _, t := range g.targets {
		if t.state == stateHealthy {
			return nil // another zone is healthy: this one is out of DNS
		}
	}
	return g.pickIn(func(*target) bool { return true })
}

// targetInZone: a target a zone's node sends to.
func targetInZone(t *target, zone string) bool {
	return t.zone == zone || t.zone == "" || t.zone == "all"
}

// pickIn is pick over the targets for which in is true.
func (g *group) pickIn(in func(*target) bool) *target {
	now := time.Now()
	var cands, unhealthy []*target
	for _, t := range g.sorted() {
		if !in(t) {
			continue
		}
		switch t.state {
		case stateHealthy:
			cands = append(cands, t)
		case stateDraining:
			if !g.isHTTP() && now.Before(t.deregAt.Add(g.f.scale(g.cfg.NewConnectionWindow))) {
				cands = append(cands, t)
			}
		case stateUnhealthy:
			unhealthy = append(unhealthy, t)
		}
	}
	if len(cands) == 0 {
		cands = unhealthy
	}
	if len(cands) == 0 {
		return nil
	}
	g.rr++
	return cands[g.rr%len(cands)]
}

// track records a connection or request on t until the returned func runs.
// It fails when t has been removed meanwhile.
func (g *group) track(t *target, c any) (func(), bool) {
	f := g.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.ctx.Err() != nil {
		return nil, false
	}
	t.conns[c] = struct{}{}
	return func() {
		f.mu.Lock()
		delete(t.conns, c)
		f.mu.Unlock()
	}, true
}

// reset closes c with an RST where possible.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// forward carries one client connection to a target (NLB mode). The pair
// lives until either side closes, or is reset when the target's drain
// ends.
func (g *group) forward(c net.Conn, zone string) {
	f := g.f
	f.mu.Lock()
	t := g.pick(zone)
	f.mu.Unlock()
	if t == nil {
		reset(c)
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
	bc, err := f.dial(ctx, "tcp", t.addr.String())
	cancel()
	if err != nil {
		f.log.Debug("aws fake forwarding", "target", t.addr, "err", err)
		reset(c)
		return
	}
	done, ok := g.track(t, c)
	if !ok {
		reset(c)
		reset(bc)
		return
	}
	defer done()
	stop := context.AfterFunc(t.ctx, func() { reset(c); reset(bc) })
	defer stop()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Pass the end on (a FIN; on a TLS listener's client side,
		// close_notify and a FIN), so that the peer sees a closed
		// keep-alive connection as closed before it sends on it.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
	wg.Go(func() { pipe(bc, c) })
	wg.Go(func() { pipe(c, bc) })
	wg.Wait()
	_ = c.Close()
	_ = bc.Close()
}

// serveHTTP carries one request to a target (ALB mode). The request is
// cancelled when the target's drain ends.
func (g *group) serveHTTP(w http.ResponseWriter, r *http.Request) {
	f := g.f
	f.mu.Lock()
	t := g.pick("")
	f.mu.Unlock()
	if t == nil {
		http.Error(w, "503 Service Temporarily Unavailable", http.StatusServiceUnavailable)
		return
	}
	done, ok := g.track(t, r)
	if !ok {
		http.Error(w, "502 Bad Gateway", http.StatusBadGateway)
		return
	}
	defer done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel)
	defer stop()
	dst := &url.URL{Scheme: "http", Host: t.addr.String()}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(dst)
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host
		},
		Transport: &http.Transport{DialContext: f.dial, DisableKeepAlives: true},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			status := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) {
				status = http.StatusGatewayTimeout
			}
			w.WriteHeader(status)
		},
	}
	rp.ServeHTTP(w, r.WithContext(ctx))
}
