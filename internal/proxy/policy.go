package proxy

import (
	"errors"
	"io"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/sluice/internal/route"
)

// Request policies (route.Policies): source ranges, body size, CORS, rate
// limits, basic authentication. A route without policies has a nil
// routeView.policy and ServeHTTP pays one nil check for all of them.

// Refusal reasons, the values of the "reason" label of
// sluice_requests_refused_total.
const (
	refusedSource           = iota // source-address allow/deny list: 403
	refusedBodySize                // body larger than max-body-size: 413
	refusedRateLimit               // limit-rps / limit-rpm
	refusedConcurrency             // limit-connections
	refusedAuth                    // basic authentication failed: 401
	refusedAuthConfig              // the auth Secret or auth URL is unusable: 503
	refusedForwardAuth             // the auth service said 401 or 403
	refusedForwardAuthError        // the auth service failed: 500
	numRefusals
)

var refusalNames = [numRefusals]string{"source", "body_size", "rate_limit", "concurrency", "auth", "auth_config", "forward_auth", "forward_auth_error"}

// Answers of the policies. They never echo the request.
var (
	bodyForbidden       = []byte("sluice: client address not allowed\n")
	bodyTooLarge        = []byte("sluice: request body too large\n")
	bodyRateLimited     = []byte("sluice: too many requests\n")
	bodyUnauthorized    = []byte("sluice: authentication required\n")
	bodyAuthUnavailable = []byte("sluice: authentication unavailable\n")
)

func newRefusedMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "requests_refused_total",
		Help: "Requests the proxy refused by an Ingress's request policy, by Ingress and reason: source (allow/deny source ranges, 403), body_size (413), rate_limit (limit-rps/limit-rpm), concurrency (limit-connections), auth (basic authentication failed, 401), auth_config (the auth Secret or auth URL is unusable, 503), forward_auth (the auth service answered 401 or 403), forward_auth_error (the auth service failed or timed out: 500).",
	}, []string{"ingress", "reason"})
}

// policyView is the runtime form of a route's Policies.
type policyView struct {
	access  *route.SourceAccess
	maxBody int64 // 0: no limit
	cors    *corsView
	limit   *limiter
	// limitExempt and limitStatus are the rate limit's exempt sources
	// and answer.
	limitExempt []netip.Prefix
	limitStatus int
	auth        *authView
	fwdAuth     *forwardAuthView
	errors      *errorPagesView
	// client: some policy needs the client address.
	client  bool
	refused [numRefusals]prometheus.Counter
}

// policyState keeps what must survive table swaps: the rate limiters'
// client tables, by Ingress and configuration. Guarded by Proxy.mu.
type policyState struct {
	limiters   map[limiterKey]*limiter
	used       map[limiterKey]bool
	authClient *http.Client // forward auth's, made on first use
	// creds are the basic-auth caches of verified credentials, by Secret
	// revision.
	creds     map[string]*credCache
	usedCreds map[string]bool
	// bcryptSlots bounds the bcrypt checks running at once, over all
	// routes (basicauth.go); made with the first basic-auth route.
	bcryptSlots chan struct{}
}

// policyView builds the view of rt's policies; nil when it has none.
// Called from Update (under p.mu).
func (p *Proxy) policyView(rt *route.Route) *policyView {
	if rt == nil || rt.Policies == nil {
		return nil
	}
	pol := rt.Policies
	pv := &policyView{access: pol.Access}
	if pol.BodyLimit != nil {
		pv.maxBody = pol.BodyLimit.MaxBytes
	}
	if pol.CORS != nil {
		pv.cors = newCORSView(pol.CORS)
	}
	if pol.RateLimit != nil {
		pv.limit = p.limiter(rt.Ingress, pol.RateLimit)
		pv.limitExempt, pv.limitStatus = pol.RateLimit.Exempt, pol.RateLimit.Status
	}
	if pol.BasicAuth != nil {
		pv.auth = p.authView(pol.BasicAuth)
	}
	if pol.ForwardAuth != nil {
		pv.fwdAuth = p.forwardAuthView(pol.ForwardAuth)
	}
	if pol.ErrorPages != nil {
		pv.errors = p.errorPagesView(pol.ErrorPages, rt.Ingress)
	}
	pv.client = pv.access != nil || pv.limit != nil
	for i, reason := range refusalNames {
		pv.refused[i] = p.m.refused.WithLabelValues(rt.Ingress, reason)
	}
	return pv
}

// sweepPolicies drops the state of limiters the last Update did not use.
// Called from Update (under p.mu).
func (p *Proxy) sweepPolicies() {
	for k := range p.pol.limiters {
		if !p.pol.used[k] {
			delete(p.pol.limiters, k)
		}
	}
	p.pol.used = nil
	for k := range p.pol.creds {
		if !p.pol.usedCreds[k] {
			delete(p.pol.creds, k)
		}
	}
	p.pol.usedCreds = nil
}

// forgetRefused deletes the refusal series of Ingresses that old's routes
// had policies for and cur's do not.
func (m *metrics) forgetRefused(old, cur *view) {
	keep := map[string]bool{}
	if cur != nil {
		for _, rv := range cur.routes {
			if rv.policy != nil {
				keep[rv.ingress] = true
			}
		}
	}
	for _, rv := range old.routes {
		if rv.policy != nil && !keep[rv.ingress] {
			m.refused.DeletePartialMatch(prometheus.Labels{"ingress": rv.ingress})
		}
	}
}

// servePolicies applies rv's policies to r, then serves it.
func (p *Proxy) servePolicies(w http.ResponseWriter, r *http.Request, rv *routeView, start time.Time) {
	pv := rv.policy
	var client netip.Addr
	if pv.client {
		client = p.clientAddr(r)
	}
	if a := pv.access; a != nil && !admits(a, client) {
		p.refuse(w, r, rv, refusedSource, http.StatusForbidden, bodyForbidden, start)
		return
	}
	if pv.cors != nil && pv.cors.handle(w, r) {
		// A preflight, answered here: it carries no credentials, and is
		// neither limited nor authenticated (the Fetch standard).
		p.record(r, rv, outcome{status: http.StatusNoContent}, start)
		return
	}
	if l := pv.limit; l != nil && !inPrefixes(pv.limitExempt, client) {
		held, reason := l.take(client, p.clock().UnixNano())
		if reason >= 0 {
			p.refuse(w, r, rv, reason, pv.limitStatus, bodyRateLimited, start)
			return
		}
		if held != nil {
			defer l.release(held)
		}
	}
	if a := pv.auth; a != nil {
		if a.refuse {
			p.refuse(w, r, rv, refusedAuthConfig, http.StatusServiceUnavailable, bodyAuthUnavailable, start)
			return
		}
		if !a.verify(r) {
			w.Header()["Www-Authenticate"] = a.challenge
			p.refuse(w, r, rv, refusedAuth, http.StatusUnauthorized, bodyUnauthorized, start)
			return
		}
	}
	if a := pv.fwdAuth; a != nil {
		status, err := a.check(w, r, p.clientIP(r), p.viaHTTPS(r))
		if err != nil {
			p.log.Debug("forward authentication failed", "ingress", rv.ingress, "error", err)
		}
		switch status {
		case 0:
		case http.StatusForbidden:
			p.refuse(w, r, rv, refusedForwardAuth, status, bodyAuthForbidden, start)
			return
		case http.StatusUnauthorized, http.StatusFound:
			p.refuse(w, r, rv, refusedForwardAuth, status, bodyUnauthorized, start)
			return
		case http.StatusServiceUnavailable:
			p.refuse(w, r, rv, refusedAuthConfig, status, bodyAuthUnavailable, start)
			return
		default:
			p.refuse(w, r, rv, refusedForwardAuthError, status, bodyAuthFailed, start)
			return
		}
	}
	if pv.maxBody > 0 && r.Body != nil && r.Body != http.NoBody {
		switch {
		case r.ContentLength > pv.maxBody:
			w.Header()["Connection"] = valClose // the body stays unread
			p.refuse(w, r, rv, refusedBodySize, http.StatusRequestEntityTooLarge, bodyTooLarge, start)
			return
		case r.ContentLength < 0:
			// Chunked (or HTTP/2 without a length): counted as it streams;
			// forward answers 413 when the limit is passed.
			r.Body = &limitedBody{rc: r.Body, left: pv.maxBody, refused: pv.refused[refusedBodySize]}
		}
	}
	p.serveRoute(w, r, rv, start)
}

func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, rv *routeView, reason, status int, body []byte, start time.Time) {
	rv.policy.refused[reason].Inc()
	p.answer(w, r, rv, status, body, start)
}

// clientAddr is the client's address (Proxy.clientIP: the peer, or behind
// trusted proxies the last untrusted X-Forwarded-For hop), unmapped; the
// zero Addr if it is not an address.
func (p *Proxy) clientAddr(r *http.Request) netip.Addr {
	a, err := netip.ParseAddr(p.clientIP(r))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

// admits reports whether the source ranges let client in. An invalid
// (zero) client address is admitted by no allow list and denied by none.
func admits(a *route.SourceAccess, client netip.Addr) bool {
	for _, pf := range a.Deny {
		if pf.Contains(client) {
			return false
		}
	}
	if a.Allow == nil {
		return true
	}
	for _, pf := range a.Allow {
		if pf.Contains(client) {
			return true
		}
	}
	return false
}

func inPrefixes(ps []netip.Prefix, a netip.Addr) bool {
	for _, pf := range ps {
		if pf.Contains(a) {
			return true
		}
	}
	return false
}

// errBodyTooLarge ends a request body that passed max-body-size.
var errBodyTooLarge = errors.New("request body larger than the route's max-body-size")

// limitedBody counts a request body of unknown length as it streams and
// fails the read that passes the limit: the upstream request is cut (its
// chunked body never ends), and forward answers 413.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	// over is set by the reader (the Transport's goroutine on that path)
	// and read by the handler.
	over    atomic.Bool
	refused prometheus.Counter
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.over.Load() {
		return 0, errBodyTooLarge
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		b.over.Store(true)
		b.refused.Inc()
		return 0, errBodyTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// bodyTooBig reports whether rc is a limitedBody that passed its limit.
func bodyTooBig(rc io.ReadCloser) bool {
	lb, ok := rc.(*limitedBody)
	return ok && lb.over.Load()
}
