// Package proxy is sluice's HTTP request-handling core, the last step of the
// data flow: Kubernetes objects → translate → route.Table → proxy. Update
// turns each new table into a runtime view off the request path and swaps it
// in atomically; ServeHTTP loads the current view once, matches the request
// with route.Table.Match, picks a pod endpoint (least-request,
// round-robin, consistent header hash, cookie affinity; passive health) and
// forwards the request over a per-endpoint keep-alive pool, retrying safe
// failures on another endpoint. Plain HTTP/1.1 exchanges run synchronously
// on the handler's goroutine (h1.go: the pool, deadlines and retries; the
// bytes on the wire are internal/http1's); upgrades and the rarer protocol
// features go through net/http.Transport.
//
// Upstream state (in-flight counts, passive-health counters, idle
// connections) lives in a registry keyed by endpoint address that survives
// table swaps; an endpoint that leaves every backend has its idle
// connections closed while its in-flight requests finish.
package proxy

import (
	"bufio"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/sluice/internal/proxyproto"
	"sluice.dev/sluice/internal/route"
)

// Options configure a Proxy. Zero values mean the documented defaults.
type Options struct {
	// TrustedProxies are the peers (by the request's RemoteAddr) whose
	// incoming X-Forwarded-* headers are kept and extended. From any other
	// peer they are removed and replaced. Empty: trust no one.
	TrustedProxies []netip.Prefix
	// DialTimeout bounds connecting to an endpoint; default 5s.
	// Policy.ConnectTimeout overrides it per backend.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for response headers after the
	// request is sent; default 60s. Policy.ResponseTimeout overrides it.
	ResponseHeaderTimeout time.Duration
	// IdleConnTimeout closes upstream keep-alive connections idle this long;
	// default 3s: below the keep-alive timeouts of common servers (Node.js
	// and uvicorn 5s, Apache 5s), so the proxy, not the pod, closes an idle
	// connection, and no request is sent on one the pod closed under it.
	IdleConnTimeout time.Duration
	// UnsafeReuseWindow: a request that could not be sent again should its
	// connection turn out closed (a method that is not idempotent without
	// an Idempotency-Key header, or a body too large to replay) takes an
	// idle connection only if that connection's last request was sent
	// within this window, and a new one otherwise; a pod closes idle
	// connections only after its keep-alive timeout, never within a
	// moment of a response. Default 500ms; negative: always a new
	// connection.
	UnsafeReuseWindow time.Duration
	// MaxConnsPerEndpoint caps the requests in flight to one endpoint
	// address (on HTTP/1.1, the connections in use; on HTTP/2, the open
	// streams; a WebSocket stops counting once it switched protocols). A request over the cap waits
	// up to QueueTimeout for a slot, then is answered 503. Default 1024;
	// negative: no cap.
	MaxConnsPerEndpoint int
	// QueueTimeout is how long a request waits for a slot under
	// MaxConnsPerEndpoint; default 5s (HAProxy's "timeout queue" defaults
	// to the connect timeout, which is ours too).
	QueueTimeout time.Duration
	// MaxIdleConnsPerEndpoint is the idle connections kept per endpoint;
	// default 256. (net/http's default of 2 churns connections under load.)
	MaxIdleConnsPerEndpoint int
	// MaxStreamsPerConnection caps the concurrent requests on one HTTP/2
	// connection to an endpoint (h2c, gRPC, gRPCs backends); more open
	// another connection. Default 100; the pod's own limit applies too.
	MaxStreamsPerConnection int
	// Retries is the number of extra attempts for a failure that is safe to
	// retry, used when a backend's Policy.Retries is negative; default 2
	// (0 means the default; a negative value disables retries).
	Retries int
	// FailureThreshold is the number of consecutive connect failures that
	// ejects an endpoint; default 3.
	FailureThreshold int
	// EjectDuration is how long an ejected endpoint is skipped; default 10s.
	EjectDuration time.Duration
	// MaxResponseHeaderBytes bounds an upstream response header (status
	// line and fields, 1xx responses included); default 1 MiB. A larger
	// header fails the attempt with 502.
	MaxResponseHeaderBytes int64
	// StdTransport sends every request through net/http.Transport instead
	// of the synchronous HTTP/1.1 path (see h1.go). The synchronous path is
	// the default for plain requests; upgrades, "Expect: 100-continue" and
	// requests with trailers always use the Transport. Set it to rule the
	// synchronous path out when debugging.
	StdTransport bool
	// SpliceBodies hands the copy of a large response body (Content-Length,
	// 64 KiB or more left after the header's read, synchronous path) to the
	// client's ResponseWriter's ReadFrom: on a plain TCP client connection
	// the bytes move with splice(2), not through user space. Off by
	// default: on loopback it cut the proxy's CPU per 1 MiB response by
	// about a third but tripled the receiving client's, and max req/s
	// fell (bench/README.md).
	SpliceBodies bool
	// TunnelIdleTimeout closes an upgraded connection (WebSocket and
	// other protocol switches) once no byte went either way for this
	// long. Zero means 1h; negative: never.
	TunnelIdleTimeout time.Duration
	// Registerer receives the proxy's metrics; nil means not registered.
	Registerer prometheus.Registerer
	// Logger for upstream problems; nil discards.
	Logger *slog.Logger
	// AccessLog, when non-nil, gets one line per request.
	AccessLog *slog.Logger
	// AccessLogFields chooses the access log's fields (AccessLogFieldNames);
	// nil: DefaultAccessLogFields. New panics on an unknown one: callers
	// check them with CheckAccessLogFields.
	AccessLogFields []string
	// RequestID gives every request an X-Request-Id, passed upstream and
	// returned to the client: a trusted peer's valid one is kept, any
	// other is replaced by a generated one. Off: the header passes as it
	// is, and nothing is added to the request path.
	RequestID bool
	// AllowEncodedSlashes passes an encoded "/", "\" or "." (%2F, %5C,
	// %2E) and a literal "\" in a request path to the pod unchanged. Off:
	// such a request is refused with 400 (path.go).
	AllowEncodedSlashes bool
}

// Proxy is an http.Handler forwarding requests to the pod endpoints of the
// current routing table. Create it with New; it answers 503 until the first
// Update.
type Proxy struct {
	opts         Options
	log          *slog.Logger
	access       *slog.Logger
	accessFields accessFields
	m            *metrics
	view         atomic.Pointer[view]
	// now, when set, replaces the clock of passive health (tests).
	now func() time.Time
	// bufs holds *[]byte buffers for copying bodies.
	bufs sync.Pool
	// brs and bws hold the *bufio.Reader and *bufio.Writer of the
	// synchronous upstream path, lent to a connection per request.
	brs, bws sync.Pool
	// unrouted counts requests answered without a route (404/503).
	unrouted *routeView
	// ids generates request IDs; nil without Options.RequestID.
	ids *idSource

	mu  sync.Mutex           // serializes Update
	ups map[string]*upstream // the registry, by address; guarded by mu
	pol policyState          // request policies' state (policy.go); guarded by mu
}

var _ http.Handler = (*Proxy)(nil)

// New returns a Proxy with no routing table.
func New(o Options) *Proxy {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.ResponseHeaderTimeout <= 0 {
		o.ResponseHeaderTimeout = 60 * time.Second
	}
	if o.IdleConnTimeout <= 0 {
		o.IdleConnTimeout = 3 * time.Second
	}
	if o.UnsafeReuseWindow == 0 {
		o.UnsafeReuseWindow = 500 * time.Millisecond
	}
	if o.MaxConnsPerEndpoint == 0 {
		o.MaxConnsPerEndpoint = 1024
	}
	if o.QueueTimeout <= 0 {
		o.QueueTimeout = 5 * time.Second
	}
	if o.MaxIdleConnsPerEndpoint <= 0 {
		o.MaxIdleConnsPerEndpoint = 256
	}
	switch {
	case o.Retries == 0:
		o.Retries = 2
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.MaxStreamsPerConnection <= 0 {
		o.MaxStreamsPerConnection = 100
	}
	if o.MaxResponseHeaderBytes <= 0 {
		o.MaxResponseHeaderBytes = 1 << 20
	}
	if o.TunnelIdleTimeout == 0 {
		o.TunnelIdleTimeout = time.Hour
	}
	if o.FailureThreshold <= 0 {
		o.FailureThreshold = 3
	}
	if o.EjectDuration <= 0 {
		o.EjectDuration = 10 * time.Second
	}
	p := &Proxy{
		opts:   o,
		log:    o.Logger,
		access: o.AccessLog,
		m:      newMetrics(o.Registerer),
		ups:    make(map[string]*upstream),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	fields, err := parseAccessFields(o.AccessLogFields)
	if err != nil {
		panic(err) // the caller's check (CheckAccessLogFields) was skipped
	}
	p.accessFields = fields
	p.bufs.New = func() any { b := make([]byte, 32<<10); return &b }
	p.brs.New = func() any { return bufio.NewReaderSize(nil, 4<<10) }
	p.bws.New = func() any { return bufio.NewWriterSize(nil, 4<<10) }
	p.unrouted = p.routeView(nil, nil)
	p.unrouted.metrics(p.m) // its series exist from the start
	if o.RequestID {
		p.ids = newIDSource()
	}
	return p
}

func (p *Proxy) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// Table returns the current routing table, nil before the first Update.
func (p *Proxy) Table() *route.Table {
	if v := p.view.Load(); v != nil {
		return v.table
	}
	return nil
}

// Short plain-text answers of the proxy itself. They never echo the request.
var (
	bodyNotReady     = []byte("sluice: no routing table yet\n")
	bodyNoRoute      = []byte("sluice: no route for this host and path\n")
	bodyMisdirect    = []byte("sluice: this connection cannot serve this host; connect with its name\n")
	bodyNoEndpoint   = []byte("sluice: no endpoints available for this route\n")
	bodyBadGateway   = []byte("sluice: upstream connection failed\n")
	bodyTimeout      = []byte("sluice: upstream timed out\n")
	bodyQueueTimeout = []byte("sluice: upstream at its connection limit\n")
	bodyNoConnect    = []byte("sluice: CONNECT not allowed\n")
	bodyBadRequest   = []byte("sluice: malformed request body\n")
	bodyTooSlow      = []byte("sluice: request body timed out\n")
)

// Immutable header values shared by all requests (the server and transports
// only read header values).
var (
	valTextPlain = []string{"text/plain; charset=utf-8"}
	valNosniff   = []string{"nosniff"}
	valHTTP      = []string{"http"}
	valHTTPS     = []string{"https"}
	valPort80    = []string{"80"}
	valPort443   = []string{"443"}
	valTrailers  = []string{"trailers"}
	valUpgrade   = []string{"Upgrade"}
	valEmpty     = []string{""}
	valClose     = []string{"close"}
)

// ServeHTTP routes r with one atomic load of the current view and forwards
// it. Before the first Update it answers 503 (the proxy is not ready, and a
// load balancer retries a 503 elsewhere); a request over TLS for a host the
// connection's server name may not carry (route.Table.Misdirected) is 421;
// the path is normalised before it is matched, and a path with an encoded
// separator is 400 unless Options.AllowEncodedSlashes (path.go);
// no matching route is 404 (an unknown host without a platform default
// backend included); a route whose backend has no endpoints is 503; CONNECT
// is 405. Failed upstream attempts end in 502, or 504 when the last one
// timed out (connecting or waiting for response headers).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 {
		growStack() // a new goroutine per stream (stack.go)
	}
	start := time.Now()
	if p.ids != nil {
		p.setRequestID(w, r)
	}
	if r.Method == http.MethodConnect {
		// sluice is a reverse proxy: no tunnels to arbitrary authorities.
		p.answer(w, r, p.unrouted, http.StatusMethodNotAllowed, bodyNoConnect, start)
		return
	}
	v := p.view.Load()
	if v == nil {
		p.answer(w, r, p.unrouted, http.StatusServiceUnavailable, bodyNotReady, start)
		return
	}
	table := v.table
	if table.HasScopes() {
		// A Gateway with an address of its own: the routes of the
		// address the request reached (route.Scope).
		la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		table = table.For(proxyproto.Reached(la))
	}
	if r.TLS != nil && r.TLS.ServerName != "" && table.Misdirected(r.TLS.ServerName, r.Host) {
		// Another tenant's host, or a name the certificate does not
		// cover: the client retries on a connection of its own.
		p.answer(w, r, p.unrouted, http.StatusMisdirectedRequest, bodyMisdirect, start)
		return
	}
	path, ok := p.normalizeRequest(r)
	if !ok {
		p.answer(w, r, p.unrouted, http.StatusBadRequest, bodyBadPath, start)
		return
	}
	rt := table.Match(r.Host, path)
	if rt != nil && rt.Conditions != nil {
		rt = table.MatchRequest(r.Host, path, r) // method, header, query matches
	}
	if rt == nil {
		p.answer(w, r, p.unrouted, http.StatusNotFound, bodyNoRoute, start)
		return
	}
	rv := v.routes[rt]
	if rv == nil { // the table's default route
		if bv := v.backends[rt.Backend]; bv != nil && bv.dflt != nil {
			rv = bv.dflt
		} else {
			rv = p.unrouted
		}
	}
	if rv.redirect || rv.hsts != nil {
		https := p.viaHTTPS(r)
		if rv.redirect && !https && !acmeChallenge(path) {
			p.redirectHTTPS(w, r, rv, start)
			return
		}
		if https && rv.hsts != nil {
			w.Header()["Strict-Transport-Security"] = rv.hsts
		}
	}
	if rv.policy != nil {
		p.servePolicies(w, r, rv, start) // policy.go; ends in serveRoute
		return
	}
	p.serveRoute(w, r, rv, start)
}

// serveRoute applies rv's redirect and canary choice (l7.go), after its
// request policies: a canary is reached only through the policies of the
// route it splits. Then it forwards r.
func (p *Proxy) serveRoute(w http.ResponseWriter, r *http.Request, rv *routeView, start time.Time) {
	if rv.mirrors != nil {
		p.mirror(r, rv) // mirror.go
	}
	if rv.l7 != nil {
		var done bool
		if rv, done = p.routeL7(w, r, rv, start); done {
			return
		}
	}
	p.serveBackend(w, r, rv, start)
}

// serveBackend forwards r to rv's backend, or answers 503 when it has no
// endpoints.
func (p *Proxy) serveBackend(w http.ResponseWriter, r *http.Request, rv *routeView, start time.Time) {
	if rv.backend == nil || len(rv.backend.eps) == 0 {
		if rv.backend != nil && rv.backend.invalid {
			// A reference that cannot be resolved (Gateway API: 500).
			p.answer(w, r, rv, http.StatusInternalServerError, bodyInvalidBackend, start)
			return
		}
		p.answer(w, r, rv, http.StatusServiceUnavailable, bodyNoEndpoint, start)
		return
	}
	p.forward(w, r, rv, start)
}

// answer writes one of the proxy's own short responses and records it.
func (p *Proxy) answer(w http.ResponseWriter, r *http.Request, rv *routeView, status int, body []byte, start time.Time) {
	n := p.writeAnswer(w, r, status, body)
	p.record(r, rv, outcome{status: status, bytes: int64(n)}, start)
}

func writePlain(w http.ResponseWriter, status int, body []byte) int {
	h := w.Header()
	h["Content-Type"] = valTextPlain
	h["X-Content-Type-Options"] = valNosniff
	w.WriteHeader(status)
	n, _ := w.Write(body)
	return n
}

// statusClientClosed is recorded (never sent) when the client went away
// before the upstream answered, as nginx does.
const statusClientClosed = 499

// outcome is how a request ended, for metrics and the access log.
type outcome struct {
	status int
	bytes  int64 // response body bytes sent
	// upstream is the endpoint of the last attempt, "" if none was made;
	// upstreamTime the time from sending it the request to its response
	// header.
	upstream     string
	upstreamTime time.Duration
	retries      int
	// body is the request's body as forward read it, nil if it had none
	// or was not forwarded: the access log's request_bytes.
	body *replayBody
}

// record updates metrics and writes the access log line.
func (p *Proxy) record(r *http.Request, rv *routeView, o outcome, start time.Time) {
	d := time.Since(start)
	m := rv.metrics(p.m)
	m.requests[codeClass(o.status)].Inc()
	m.duration.Observe(d.Seconds())
	m.response(p.m, r.Method, o.status, o.bytes)
	if p.access != nil {
		p.logAccess(r, rv, o, d)
	}
}

// peer returns the client IP of a RemoteAddr ("ip:port" or "[ip]:port") as
// a substring, and whether it is a trusted proxy.
func (p *Proxy) peer(remote string) (ip string, trusted bool) {
	ip = remote
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		ip = remote[:strings.LastIndexByte(remote, ':')]
		if len(ip) >= 2 && ip[0] == '[' {
			ip = ip[1 : len(ip)-1]
		}
		return ip, p.trusted(ap.Addr())
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return ip, p.trusted(a)
	}
	return ip, false
}

// clientIP is the address of the client for the access log: the peer, or,
// when the peer is a trusted proxy, the last address in X-Forwarded-For
// that is not a trusted proxy (earlier entries could be forged).
func (p *Proxy) clientIP(r *http.Request) string {
	ip, trusted := p.peer(r.RemoteAddr)
	if !trusted {
		return ip
	}
	xff := r.Header["X-Forwarded-For"]
	for i := len(xff) - 1; i >= 0; i-- {
		for s := xff[i]; s != ""; {
			part := s
			if j := strings.LastIndexByte(s, ','); j >= 0 {
				part, s = s[j+1:], s[:j]
			} else {
				s = ""
			}
			part = strings.TrimSpace(part)
			a, err := netip.ParseAddr(part)
			if err != nil {
				return ip // not an address: stop at the last trusted hop
			}
			ip = part
			if !p.trusted(a) {
				return ip
			}
		}
	}
	return ip
}

func (p *Proxy) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, pf := range p.opts.TrustedProxies {
		if pf.Contains(a) {
			return true
		}
	}
	return false
}

// portOf returns the port of a Host header value, "" if none.
func portOf(host string) string {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.HasSuffix(host, "]") {
		return ""
	}
	port := host[i+1:]
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return ""
	}
	return port
}
