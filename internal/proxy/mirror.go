package proxy

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"sluice.dev/sluice/internal/route"
)

// Request mirroring (Gateway API's RequestMirror filter, route.Route
// Mirrors): a copy of each request of the route goes to one endpoint of
// each mirror backend, fire and forget. The copy never delays or changes
// the client's answer: it is sent from its own goroutine, at most
// mirrorInFlight copies per mirror of a route are under way (more are
// dropped), each is bounded by mirrorTimeout, and its answer is read (up
// to mirrorDrain bytes) and dropped. Requests with a body are not
// mirrored: the body belongs to the client's request and is streamed, not
// kept.

// bodyInvalidBackend answers a route whose backend reference could not be
// resolved (route.Backend.Invalid).
var bodyInvalidBackend = []byte("sluice: invalid backend reference\n")

const (
	mirrorInFlight = 64
	mirrorTimeout  = 10 * time.Second
	mirrorDrain    = 1 << 20
)

// mirrorView is one mirror backend of a route in one table.
type mirrorView struct {
	bv    *backendView
	slots chan struct{}
}

// attachMirrors resolves rt's mirror backends into rv.
func attachMirrors(rv *routeView, rt *route.Route, backend func(*route.Backend) *backendView) {
	for _, be := range rt.Mirrors {
		if bv := backend(be); bv != nil {
			rv.mirrors = append(rv.mirrors, &mirrorView{bv: bv, slots: make(chan struct{}, mirrorInFlight)})
		}
	}
}

// mirror sends copies of r (as received: before forward rewrites its
// header) to rv's mirrors.
func (p *Proxy) mirror(r *http.Request, rv *routeView) {
	if r.ContentLength != 0 { // a body, or one of unknown length
		return
	}
	for _, m := range rv.mirrors {
		if len(m.bv.eps) == 0 {
			continue
		}
		select {
		case m.slots <- struct{}{}:
		default:
			continue // enough copies under way: drop this one
		}
		ep := &m.bv.eps[rand.IntN(len(m.bv.eps))]
		u := url.URL{Scheme: ep.pool.scheme, Host: ep.u.addr, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
		h := r.Header.Clone()
		for _, k := range []string{"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Proxy-Connection"} {
			delete(h, k)
		}
		host := r.Host
		go func() {
			defer func() { <-m.slots }()
			ctx, cancel := context.WithTimeout(context.Background(), mirrorTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), nil)
			if err != nil {
				return
			}
			req.Header, req.Host = h, host
			res, err := ep.pool.roundTripper(true).RoundTrip(req)
			if err != nil {
				p.log.Debug("mirrored request failed", "service", m.bv.service, "upstream", ep.u.addr, "error", err)
				return
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, mirrorDrain))
			_ = res.Body.Close()
		}()
	}
}
