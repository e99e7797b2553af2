// Package server runs sluice's listeners: plain HTTP and HTTPS traffic (with
// optional PROXY protocol below TLS) in front of the proxy handler, and the
// admin listener with /healthz, /readyz, /livez and /metrics. It owns the
// lifecycle of the process, serving → draining → stopping → exited, that
// lets a load balancer take an ingress pod out of rotation without losing a
// request.
//
// Data flow: client → TCP listener → connection tracking → PROXY protocol
// (internal/proxyproto) → TLS (SNI via Options.GetCertificate) → net/http
// (HTTP/1.1, HTTP/2 via ALPN) → drain-aware wrapper → Options.Handler
// (internal/proxy). With Options.FastHTTP1, HTTP/1.1 connections, plain
// and over TLS, go to internal/http1 instead of net/http, which takes back
// those it does not serve and every connection that negotiated HTTP/2.
// cmd/sluice builds the Options and calls Run.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/sluice/internal/h2"
	"sluice.dev/sluice/internal/http1"
	"sluice.dev/sluice/internal/proxyproto"
)

// Options configures a Server. Durations left at zero get the default named
// in their comment.
type Options struct {
	// HTTPAddress, HTTPSAddress and AdminAddress are listen addresses
	// (host:port); "" disables that listener.
	HTTPAddress, HTTPSAddress, AdminAddress string
	// Handler serves traffic (the proxy). Required if a traffic listener
	// is enabled.
	Handler http.Handler
	// GetCertificate picks the certificate for a TLS ClientHello (SNI). It
	// is asked on every handshake, so a rotated certificate applies to new
	// connections while established ones keep theirs. Nil disables HTTPS.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// ProxyProtocol reads PROXY protocol v1/v2 headers on the traffic
	// listeners from peers in TrustedProxies (which must not be empty
	// then). A trusted peer may also connect without a header; untrusted
	// peers' bytes are never interpreted.
	ProxyProtocol  bool
	TrustedProxies []netip.Prefix
	// ReadHeaderTimeout bounds the arrival of a request header (default
	// 10s); IdleTimeout the wait for the next request on a kept-alive
	// connection, HTTP/2 included (default 120s).
	ReadHeaderTimeout, IdleTimeout time.Duration
	// BodyIdleTimeout fails a request body once the client sent no byte
	// of it for this long; WriteIdleTimeout closes a connection once the
	// client took no byte of a response (or a tunnel) for this long.
	// Both are idle timeouts, not totals: a large transfer that keeps
	// moving is never cut. Zero means 60s; negative: none.
	BodyIdleTimeout, WriteIdleTimeout time.Duration
	// MaxHeaderBytes is the largest request header (request line and
	// fields) accepted; a larger one is answered 431. HTTP/2 gets about
	// the same as its header list size. Defaults to 32 KiB.
	MaxHeaderBytes int
	// MaxConnections is the most traffic connections open at once, over
	// both traffic listeners; beyond it, new connections are closed as
	// soon as they are accepted while the open ones keep working. The
	// admin listener has no limit. Zero means 16384; negative: no limit.
	MaxConnections int
	// MaxConcurrentStreams is the most concurrent streams a client may
	// open on one HTTP/2 connection (default 100). The HTTP/2 server
	// (internal/h2: golang.org/x/net/http2's, which net/http bundles)
	// also keeps its protections against rapid resets and CONTINUATION
	// floods, and internal/h2 ends SETTINGS floods.
	MaxConcurrentStreams int
	// DrainMaxWait caps the draining state. Zero means 60s; a negative
	// value skips draining (a signal goes straight to stopping).
	DrainMaxWait time.Duration
	// DrainQuietPeriod ends draining once no new traffic connection has
	// been seen for this long. Zero disables it. A connection is new
	// traffic when it carries its first request other than a health
	// check, not when it is accepted: with HealthOnTrafficPort, the load
	// balancer's health checks (a new connection each, and they go on
	// after the pod is deregistered) do not restart the period, nor do
	// connections that send no request. Connections whose first such
	// request came before draining started do not count.
	DrainQuietPeriod time.Duration
	// ShutdownTimeout is how long in-flight requests and upgraded
	// connections get once stopping starts. Zero means 30s; a negative
	// value closes everything at once.
	ShutdownTimeout time.Duration
	// FastHTTP1 serves HTTP/1.1 with sluice's own connection loop
	// (internal/http1), on the plain-HTTP listener and, after the TLS
	// handshake, on the HTTPS listener for connections that did not
	// negotiate "h2" by ALPN. The loop hands every connection it does not
	// serve (HTTP/2 over TLS, HTTP/1.0, upgrades, Expect, chunked request
	// bodies, large headers) to net/http. Off: net/http serves every
	// connection.
	FastHTTP1 bool
	// H2C serves HTTP/2 without TLS (prior knowledge, as gRPC clients
	// send it) on the plain-HTTP listener besides HTTP/1.1. With
	// FastHTTP1, the HTTP/2 preface is handed to net/http.
	H2C bool
	// HealthOnTrafficPort also answers /healthz on the traffic listeners;
	// the path is then not proxied.
	HealthOnTrafficPort bool
	// Drained is closed when the controller reports that the load
	// balancer sends this pod no more traffic. Nil means never. Only
	// read while draining: closed before the signal, it ends draining as
	// soon as draining starts.
	Drained <-chan struct{}
	// Ready reports whether the first complete routing table is loaded.
	// Nil means always ready. /healthz and /readyz answer 200 only when
	// Ready() is true and the server is serving: a load balancer must not
	// send traffic to a proxy that would answer 404 for lack of routes.
	Ready func() bool
	// Gatherer is served on /metrics; nil answers 404 there. Registerer
	// receives the lifecycle metrics; nil leaves them unregistered.
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// ReusePort sets SO_REUSEPORT on every listener (traffic and admin),
	// so that several servers on one host can bind the same addresses:
	// per-node replicas on the host network. The kernel spreads new
	// connections over the group; a server that stops accepting leaves
	// the others serving. Connections already queued on a listener that
	// closes are reset unless the node's net.ipv4.tcp_migrate_req is 1
	// (it hands them to another listener of the group). Off by default.
	// With Ready set, the traffic listeners bind only once Ready() is
	// true: a replica joining the group before its first routing table
	// would take its share of new connections and answer them 503.
	ReusePort bool
}

// h2ReadFrameSize is the largest frame HTTP/2 clients may send
// (SETTINGS_MAX_FRAME_SIZE): RFC 9113's initial value, 16 KiB.
const h2ReadFrameSize = 16 << 10

// Listener names, used in metric labels.
const (
	listenerHTTP  = "http"
	listenerHTTPS = "https"
)

// Server owns the listeners and the lifecycle. Create it with New, then
// call Run once.
type Server struct {
	o       Options
	log     *slog.Logger
	m       *metrics
	tracker *tracker

	httpLn, httpsLn, adminLn net.Listener // bound sockets
	// deferTraffic: the traffic listeners bind in Run once Ready() is
	// true (ReusePort with a Ready signal).
	deferTraffic   bool
	traffic, admin *http.Server
	// fastHandler is the traffic handler of the fast loop; net/http's
	// (traffic.Handler) adds the body idle timeout and timeout accounting
	// (limits.go).
	fastHandler http.Handler
	// fast serves httpLn and httpsLn when Options.FastHTTP1 is set;
	// handoff carries the connections it leaves to traffic. httpsLn is
	// then below TLS, and tlsConf is the handshake's config.
	fast    *http1.Server
	handoff *http1.Listener
	tlsConf *tls.Config

	state   atomic.Int32
	mu      sync.Mutex
	since   time.Time    // entered the current state
	history []transition // every state entered, for tests
	ran     bool
}

type transition struct {
	state  State
	reason string
}

// New validates o, fills in defaults and binds the listeners, so that bind
// errors surface before anything else starts.
func New(o Options) (*Server, error) {
	setDefaults(&o)
	if o.GetCertificate == nil && o.HTTPSAddress != "" {
		o.Logger.Info("https listener disabled: no certificate source", "address", o.HTTPSAddress)
		o.HTTPSAddress = ""
	}
	if o.Handler == nil && (o.HTTPAddress != "" || o.HTTPSAddress != "") {
		return nil, errors.New("creating server: a handler is required for the traffic listeners")
	}
	if o.ProxyProtocol && len(o.TrustedProxies) == 0 {
		return nil, errors.New("creating server: proxy protocol needs trusted proxies (0.0.0.0/0 and ::/0 trust every peer)")
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("creating server: %w", err)
	}
	s := &Server{o: o, log: o.Logger, m: m, since: time.Now(), history: []transition{{StateServing, "new"}}}
	s.tracker = newTracker(m, s.closeReason)
	s.tracker.max = max(o.MaxConnections, 0)
	s.tracker.writeIdle = max(o.WriteIdleTimeout, 0)
	// Without the fast loop, net/http's 431 goes straight to the tracked
	// connection (over plain TCP; over TLS it is not seen).
	s.tracker.count431 = !o.FastHTTP1
	m.setState(StateServing)

	s.deferTraffic = o.ReusePort && o.Ready != nil
	if err := s.bind(!s.deferTraffic); err != nil {
		s.Close()
		return nil, err
	}
	errorLog := log.New(errorLogWriter{o.Logger}, "", 0)
	s.fastHandler = s.trafficHandler()
	s.traffic = &http.Server{
		Handler:           s.netHTTPHandler(s.fastHandler),
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    netHTTPHeaderBytes(o.MaxHeaderBytes),
		ConnState:         s.connState,
		ConnContext:       connContext,
		ErrorLog:          errorLog,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: o.MaxConcurrentStreams,
			// The protocol's default (and HAProxy's): the server keeps a
			// read buffer as large as the largest frame a connection
			// sent, for the connection's life (x/net's default of 1 MiB
			// let one frame pin 1 MiB per connection).
			MaxReadFrameSize: h2ReadFrameSize,
		},
	}
	if o.H2C {
		s.traffic.Protocols = new(http.Protocols)
		s.traffic.Protocols.SetHTTP1(true)
		s.traffic.Protocols.SetHTTP2(true)
		s.traffic.Protocols.SetUnencryptedHTTP2(true)
	}
	if o.HTTPSAddress != "" {
		// The listener negotiates ALPN with its own config; the server's
		// copy only tells net/http to set up HTTP/2 for Serve.
		s.traffic.TLSConfig = s.tlsConfig().Clone()
	}
	// HTTP/2 (over TLS, and h2c with H2C) by internal/h2: net/http's
	// HTTP/2 server on a connection that batches its writes and ends
	// floods of frames that are not requests.
	floods := func(frame string) { m.h2Floods.WithLabelValues(frame).Inc() }
	if err := h2.Configure(s.traffic, h2.Limits{OnFlood: floods}); err != nil {
		s.Close()
		return nil, fmt.Errorf("creating server: %w", err)
	}
	s.admin = &http.Server{
		Handler:           s.adminHandler(),
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		ErrorLog:          errorLog,
	}
	if !s.deferTraffic {
		s.newFast()
	}
	return s, nil
}

// newFast sets up the fast HTTP/1.1 loop on the bound traffic listeners
// when Options.FastHTTP1 is set.
func (s *Server) newFast() {
	o, m := s.o, s.m
	ln := s.httpLn
	if ln == nil {
		ln = s.httpsLn
	}
	if o.FastHTTP1 && ln != nil {
		s.handoff = http1.NewListener(ln.Addr())
		s.fast = http1.New(http1.Options{
			Handler:           s.fastHandler,
			HandOff:           s.handoff,
			ReadHeaderTimeout: o.ReadHeaderTimeout,
			IdleTimeout:       o.IdleTimeout,
			BodyIdleTimeout:   o.BodyIdleTimeout,
			ConnContext:       connContext,
			OnHandOff:         func(reason string) { m.handoffs.WithLabelValues(reason).Inc() },
			OnTimeout:         func(kind string) { m.timeouts.WithLabelValues(kind).Inc() },
			OnHeaderTooLarge:  m.headerTooLarge.Inc,
			Logger:            o.Logger,
			// The proxy keeps nothing of a request once it returned.
			RecycleRequests: true,
		})
	}
}

func setDefaults(o *Options) {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 120 * time.Second
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 32 << 10
	}
	if o.BodyIdleTimeout == 0 {
		o.BodyIdleTimeout = 60 * time.Second
	}
	if o.WriteIdleTimeout == 0 {
		o.WriteIdleTimeout = 60 * time.Second
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = 16384
	}
	if o.MaxConcurrentStreams <= 0 {
		o.MaxConcurrentStreams = 100
	}
	if o.DrainMaxWait == 0 {
		o.DrainMaxWait = 60 * time.Second
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// netHTTPHeaderBytes is net/http's MaxHeaderBytes for a limit of n bytes:
// net/http reads up to 4 KiB more than its MaxHeaderBytes before it
// answers 431, so that much less makes n the limit. (The fast loop
// serves headers of up to 4 KiB itself and hands larger ones to
// net/http, so a limit below 4 KiB would not hold there anyway.)
func netHTTPHeaderBytes(n int) int { return max(n-4096, 1) }

func (s *Server) tlsConfig() *tls.Config {
	return &tls.Config{
		GetCertificate: s.o.GetCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
		MinVersion:     tls.VersionTLS12,
	}
}

// bind opens the admin listener and, with traffic, the traffic ones,
// stacked: tracking (counts and force-closes raw connections) → PROXY
// protocol → TLS.
func (s *Server) bind(traffic bool) error {
	var err error
	if s.adminLn, err = s.listen(s.o.AdminAddress); err != nil || !traffic {
		return err
	}
	return s.bindTraffic()
}

// listen binds addr ("" binds nothing).
func (s *Server) listen(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	l, err := listenTCP(addr, s.o.ReusePort)
	if err != nil {
		return nil, fmt.Errorf("binding %s: %w", addr, err)
	}
	return l, nil
}

// bindTraffic opens the plain-HTTP and HTTPS listeners. With FastHTTP1,
// the HTTPS listener stays below TLS: the fast loop does the handshake in
// the connection's goroutine (http1.Server.ServeTLS).
func (s *Server) bindTraffic() error {
	traffic := func(addr, name string) (net.Listener, error) {
		l, err := s.listen(addr)
		if l == nil {
			return nil, err
		}
		l = &trackingListener{Listener: l, t: s.tracker, name: name}
		if s.o.ProxyProtocol {
			l = proxyproto.NewListener(l, proxyproto.Options{Trusted: s.o.TrustedProxies})
		}
		return l, nil
	}
	var err error
	if s.httpLn, err = traffic(s.o.HTTPAddress, listenerHTTP); err != nil {
		return err
	}
	if s.httpsLn, err = traffic(s.o.HTTPSAddress, listenerHTTPS); err != nil {
		return err
	}
	switch {
	case s.httpsLn == nil:
	case s.o.FastHTTP1:
		s.tlsConf = s.tlsConfig()
	default:
		s.httpsLn = tls.NewListener(s.httpsLn, s.tlsConfig())
	}
	return nil
}

// Addrs returns the bound addresses; nil for a disabled listener, and
// for a traffic listener that waits for the first routing table
// (Options.ReusePort).
func (s *Server) Addrs() (http, https, admin net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	addr := func(l net.Listener) net.Addr {
		if l == nil {
			return nil
		}
		return l.Addr()
	}
	return addr(s.httpLn), addr(s.httpsLn), addr(s.adminLn)
}

// Close releases the listeners of a Server whose Run was never called (for
// a caller that fails after New). Run closes them itself.
func (s *Server) Close() error {
	var errs []error
	for _, l := range []net.Listener{s.httpLn, s.httpsLn, s.adminLn} {
		if l != nil {
			if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// trafficHandler answers /healthz when asked to and, from draining on,
// asks every connection to close after its response: HTTP/1.1 gets
// "Connection: close", and net/http turns the same header on an HTTP/2
// response into a GOAWAY for that connection.
func (s *Server) trafficHandler() http.Handler {
	next := s.o.Handler
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.State() != StateServing && !isUpgrade(r) {
			w.Header().Set("Connection", "close")
		}
		if s.o.HealthOnTrafficPort && r.URL.Path == "/healthz" {
			s.serveHealth(w, r)
			return
		}
		s.tracker.countTraffic(r)
		next.ServeHTTP(w, r)
	})
}

// isUpgrade reports a request that may switch protocols; its response
// needs its own Connection header.
func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodConnect || r.Header.Get("Upgrade") != ""
}

// errorLogWriter sends net/http's log lines to slog. TLS handshake errors
// (scanners, clients without SNI match) are debug noise; the rest warns.
type errorLogWriter struct{ log *slog.Logger }

func (w errorLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.Contains(msg, "TLS handshake error") {
		level = slog.LevelDebug
	}
	w.log.Log(context.Background(), level, msg, "component", "net/http")
	return len(p), nil
}
