package proxy

import (
	"errors"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Upstream error kinds, the values of the "kind" label of
// sluice_upstream_errors_total.
const (
	kindConnect = iota // dial failed: refused, unreachable, connect timeout
	kindTimeout        // no response headers within the response timeout
	kindReset          // connection failed after the request was sent, before response headers
	kindBody           // upstream failed while the response body was being copied
	numKinds
)

var kindNames = [numKinds]string{"connect", "timeout", "reset", "body"}

// Retry reasons, the values of the "reason" label of
// sluice_upstream_retries_total.
const (
	retryConnect = iota // connect failure: sent again to another endpoint
	retryReset          // reset before the response (retryable request): another endpoint
	retryStale          // a reused connection failed before the response: same endpoint, new connection
	numRetryReasons
)

var retryReasons = [numRetryReasons]string{"connect", "reset", "stale"}

// codeClasses are the values of the "code_class" label; index status/100-1.
var codeClasses = [5]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// metrics holds the collectors. They always exist so the request path has no
// nil checks; they are registered only when Options.Registerer is set.
type metrics struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	upstreamErrors *prometheus.CounterVec
	retries        *prometheus.CounterVec
	ejected        *prometheus.CounterVec
	clientErrors   *prometheus.CounterVec
	dials          *prometheus.CounterVec
	queued         *prometheus.CounterVec
	queueTimeouts  *prometheus.CounterVec
	tunnelIdle     prometheus.Counter
	// responses count requests by Ingress, method and exact status;
	// responseBytes and upstreamSeconds are the body sizes sent and the
	// endpoints' time to response headers.
	responses       *prometheus.CounterVec
	responseBytes   *prometheus.HistogramVec
	upstreamSeconds *prometheus.HistogramVec
	refused         *prometheus.CounterVec // policy.go
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Name: "requests_total",
			Help: "HTTP requests handled by the proxy, by Ingress, Service and status class.",
		}, []string{"ingress", "service", "code_class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sluice", Name: "request_duration_seconds",
			Help:    "Time from receiving a request to the end of its response, by Ingress and Service.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"ingress", "service"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Name: "upstream_errors_total",
			Help: "Failed attempts to pod endpoints, by Service and kind (connect, timeout, reset, body).",
		}, []string{"service", "kind"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Name: "upstream_retries_total",
			Help: "Attempts sent again, by Service and reason: connect (a connect failure, to another endpoint), reset (a retryable request reset before its response, to another endpoint), stale (a retryable request failed on a reused connection before any response byte, on a new connection to the same endpoint).",
		}, []string{"service", "reason"}),
		ejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Name: "endpoints_ejected_total",
			Help: "Endpoints ejected by passive health checking after consecutive connect failures, by Service.",
		}, []string{"service"}),
		clientErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Name: "client_errors_total",
			Help: "Requests whose body the client broke (bad chunked framing, shorter than its Content-Length) after forwarding began, by Service. They are answered 400 (or cut, if the response had begun) and never count against the endpoint.",
		}, []string{"service"}),
		dials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Name: "upstream_dials_total",
			Help: "Connections opened to pod endpoints by the HTTP/1.1 path, by Service (requests minus dials is the reuse).",
		}, []string{"service"}),
		queued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Name: "upstream_queued_total",
			Help: "Requests that waited for a slot because their endpoint had --upstream-max-connections requests in flight, by Service.",
		}, []string{"service"}),
		queueTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Name: "upstream_queue_timeouts_total",
			Help: "Requests answered 503 after waiting --upstream-queue-timeout for a slot under --upstream-max-connections, by Service.",
		}, []string{"service"}),
		tunnelIdle: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Name: "tunnel_idle_timeouts_total",
			Help: "Upgraded connections (WebSocket and other protocol switches) closed because no byte went either way for --tunnel-idle-timeout.",
		}),
		refused: newRefusedMetric(),
	}
	m.responses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "responses_total",
		Help: "HTTP requests handled by the proxy, by Ingress, method (GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, CONNECT, TRACE, else OTHER) and exact status code (499: the client went away first).",
	}, []string{"ingress", "method", "code"})
	m.responseBytes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sluice", Name: "response_size_bytes",
		Help:    "Response body bytes sent to clients, by Ingress.",
		Buckets: prometheus.ExponentialBuckets(64, 4, 10), // 64 B .. 16 MiB
	}, []string{"ingress"})
	m.upstreamSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sluice", Name: "upstream_response_duration_seconds",
		Help:    "Time from sending a request to a pod endpoint to its response headers, by Service (the proxy's own part is sluice_request_duration_seconds minus this).",
		Buckets: prometheus.DefBuckets,
	}, []string{"service"})
	if reg != nil {
		m.responses = register(reg, m.responses)
		m.responseBytes = register(reg, m.responseBytes)
		m.upstreamSeconds = register(reg, m.upstreamSeconds)
		m.requests = register(reg, m.requests)
		m.duration = register(reg, m.duration)
		m.upstreamErrors = register(reg, m.upstreamErrors)
		m.retries = register(reg, m.retries)
		m.ejected = register(reg, m.ejected)
		m.clientErrors = register(reg, m.clientErrors)
		m.dials = register(reg, m.dials)
		m.queued = register(reg, m.queued)
		m.queueTimeouts = register(reg, m.queueTimeouts)
		m.tunnelIdle = register(reg, m.tunnelIdle)
		m.refused = register(reg, m.refused)
	}
	return m
}

// register registers c, or returns the collector already registered under
// the same description (a second Proxy on the same registry shares series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		// A conflicting, different collector: keep ours unregistered rather
		// than fail; the request path works either way.
	}
	return c
}

// routeMetrics are the label children of one (ingress, service) pair. A
// route view resolves them on its first request (routeView.metrics), so
// series exist only for routes that served requests: a table of 10,000
// Ingresses does not make a /metrics page of 230,000 zero-valued lines, and
// Update does no label lookups.
type routeMetrics struct {
	requests [5]prometheus.Counter
	duration prometheus.Observer
	bytes    prometheus.Observer
	// byCode holds the sluice_responses_total children of the route's
	// (method, code) pairs, created on first use (key: methodCode).
	byCode  sync.Map
	ingress string
}

// Methods with their own value of the "method" label; others are OTHER.
var methodNames = [...]string{"OTHER", "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"}

// methodCode is the key of a (method, status) pair: the method's index in
// methodNames times 1000 plus the status (0 for one outside 100..599).
func methodCode(method string, status int) int {
	mi := 0
	for i, n := range methodNames[1:] {
		if method == n {
			mi = i + 1
			break
		}
	}
	if status < 100 || status > 599 {
		status = 0
	}
	return mi*1000 + status
}

// response counts one response of the route.
func (rm *routeMetrics) response(m *metrics, method string, status int, bytes int64) {
	k := methodCode(method, status)
	c, ok := rm.byCode.Load(k)
	if !ok {
		code := "other"
		if k%1000 != 0 {
			code = strconv.Itoa(k % 1000)
		}
		c, _ = rm.byCode.LoadOrStore(k, m.responses.WithLabelValues(rm.ingress, methodNames[k/1000], code))
	}
	c.(prometheus.Counter).Inc()
	rm.bytes.Observe(float64(bytes))
}

func (m *metrics) route(ingress, service string) *routeMetrics {
	rm := &routeMetrics{ingress: ingress}
	for i, c := range codeClasses {
		rm.requests[i] = m.requests.WithLabelValues(ingress, service, c)
	}
	rm.duration = m.duration.WithLabelValues(ingress, service)
	rm.bytes = m.responseBytes.WithLabelValues(ingress)
	return rm
}

// metrics returns rv's label children, resolving them on first use. Two
// first requests racing resolve the same children.
func (rv *routeView) metrics(m *metrics) *routeMetrics {
	if rm := rv.m.Load(); rm != nil {
		return rm
	}
	rm := m.route(rv.ingress, rv.service)
	if rv.m.CompareAndSwap(nil, rm) {
		return rm
	}
	return rv.m.Load()
}

// backendMetrics are the label children of one service, resolved in
// Update: a Service's error counters exist, at zero, while a table routes
// to it (alerts on them see 0, not nothing).
type backendMetrics struct {
	errors        [numKinds]prometheus.Counter
	retries       [numRetryReasons]prometheus.Counter
	ejected       prometheus.Counter
	clientErrors  prometheus.Counter
	dials         prometheus.Counter
	queued        prometheus.Counter
	queueTimeouts prometheus.Counter
	upstream      prometheus.Observer
}

func (m *metrics) backend(service string) backendMetrics {
	var bm backendMetrics
	for i, k := range kindNames {
		bm.errors[i] = m.upstreamErrors.WithLabelValues(service, k)
	}
	for i, r := range retryReasons {
		bm.retries[i] = m.retries.WithLabelValues(service, r)
	}
	bm.ejected = m.ejected.WithLabelValues(service)
	bm.clientErrors = m.clientErrors.WithLabelValues(service)
	bm.dials = m.dials.WithLabelValues(service)
	bm.queued = m.queued.WithLabelValues(service)
	bm.queueTimeouts = m.queueTimeouts.WithLabelValues(service)
	bm.upstream = m.upstreamSeconds.WithLabelValues(service)
	return bm
}

// forget deletes the series of the (ingress, service) pairs and the
// services that old routed to and cur (nil: none) does not, so series of
// removed Ingresses and Services do not pile up. The unrouted pair ("", "")
// stays. A request still running on old that is the first of its route
// after the swap creates its series again; it stays until that pair is
// removed from a later table.
func (m *metrics) forget(old, cur *view) {
	m.forgetRefused(old, cur)
	var pairs map[[2]string]struct{}
	var services map[string]struct{}
	if cur != nil {
		pairs, services = cur.pairs, cur.services
	}
	ingresses := make(map[string]struct{}, len(pairs))
	for k := range pairs {
		ingresses[k[0]] = struct{}{}
	}
	for k := range old.pairs {
		if _, ok := pairs[k]; ok || k == ([2]string{}) {
			continue
		}
		for _, c := range codeClasses {
			m.requests.DeleteLabelValues(k[0], k[1], c)
		}
		m.duration.DeleteLabelValues(k[0], k[1])
		if _, ok := ingresses[k[0]]; !ok {
			m.responses.DeletePartialMatch(prometheus.Labels{"ingress": k[0]})
			m.responseBytes.DeleteLabelValues(k[0])
		}
	}
	for svc := range old.services {
		if _, ok := services[svc]; ok {
			continue
		}
		for _, k := range kindNames {
			m.upstreamErrors.DeleteLabelValues(svc, k)
		}
		for _, r := range retryReasons {
			m.retries.DeleteLabelValues(svc, r)
		}
		m.ejected.DeleteLabelValues(svc)
		m.clientErrors.DeleteLabelValues(svc)
		m.dials.DeleteLabelValues(svc)
		m.queued.DeleteLabelValues(svc)
		m.queueTimeouts.DeleteLabelValues(svc)
		m.upstreamSeconds.DeleteLabelValues(svc)
	}
}

func codeClass(status int) int {
	c := status/100 - 1
	if c < 0 || c > 4 {
		return 4
	}
	return c
}
