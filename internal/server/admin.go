package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"sluice.dev/sluice/internal/h2"
)

type metrics struct {
	state        *prometheus.GaugeVec
	drainSeconds prometheus.Gauge
	closed       *prometheus.CounterVec
	accepted     *prometheus.CounterVec
	active       *prometheus.GaugeVec
	handoffs     *prometheus.CounterVec
	// The client limits (limits.go).
	timeouts       *prometheus.CounterVec
	refused        *prometheus.CounterVec
	headerTooLarge prometheus.Counter
	h2Floods       *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_lifecycle_state",
			Help: "1 for the current lifecycle state of the proxy (serving, draining, stopping, exited), 0 for the others.",
		}, []string{"state"}),
		drainSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_drain_seconds",
			Help: "Time the proxy spent draining, set when draining ends.",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_connections_closed_total",
			Help: "Traffic connections closed, by reason: serving, drain, shutdown_deadline, hijacked_deadline, forced.",
		}, []string{"reason"}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_connections_accepted_total",
			Help: "Traffic connections accepted, by listener (http, https).",
		}, []string{"listener"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_connections_active",
			Help: "Open traffic connections, by listener (http, https), upgraded ones included.",
		}, []string{"listener"}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http1_handoffs_total",
			Help: "Connections the fast HTTP/1.1 loop handed to net/http, by reason: h2 (HTTPS that negotiated HTTP/2), version, target, upgrade, expect, transfer_encoding, header_size.",
		}, []string{"reason"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_client_timeouts_total",
			Help: "Client connections cut by a timeout, by timeout: read_header (--read-header-timeout), body_idle (--body-idle-timeout), write_idle (--write-idle-timeout), keepalive_idle (--idle-timeout).",
		}, []string{"timeout"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_connections_refused_total",
			Help: "Traffic connections closed at accept because --max-connections were open, by listener (http, https).",
		}, []string{"listener"}),
		headerTooLarge: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_request_header_too_large_total",
			Help: "HTTP/1.1 requests answered 431 because their header was larger than --max-header-bytes.",
		}),
		h2Floods: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http2_floods_total",
			Help: "HTTP/2 connections ended with GOAWAY ENHANCE_YOUR_CALM because the client flooded the server with frames that cost it work without being requests, by the frame that overdrew its budget: settings (more SETTINGS frames than requests allow), or data, headers, continuation (empty ones), ping, priority, priority_update, rst_stream, window_update, goaway, unknown (more than 1000 beyond what responses and time give back).",
		}, []string{"frame"}),
	}
	for _, f := range h2.FrameNames {
		m.h2Floods.WithLabelValues(f)
	}
	for _, t := range []string{timeoutReadHeader, timeoutBodyIdle, timeoutWriteIdle, timeoutKeepAlive} {
		m.timeouts.WithLabelValues(t)
	}
	if r == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.state, m.drainSeconds, m.closed, m.accepted, m.active, m.handoffs, m.timeouts, m.refused, m.headerTooLarge, m.h2Floods} {
		if err := r.Register(c); err != nil {
			return nil, fmt.Errorf("registering lifecycle metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) setState(st State) {
	for s := StateServing; s <= StateExited; s++ {
		v := 0.0
		if s == st {
			v = 1
		}
		m.state.WithLabelValues(s.String()).Set(v)
	}
}

func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", s.serveHealth)
	mux.HandleFunc("/readyz", s.serveHealth)
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	if s.o.Gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(s.o.Gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}

// errNotReady is what /healthz says before the first routing table loads.
var errNotReady = errors.New("not ready")

// health reports whether the load balancer and the kubelet should send
// traffic: only while serving and once the routing table is loaded.
func (s *Server) health() error {
	if st := s.State(); st != StateServing {
		return fmt.Errorf("%s", st)
	}
	if s.o.Ready != nil && !s.o.Ready() {
		return errNotReady
	}
	return nil
}

// serveHealth answers /healthz and /readyz: 200 "ok" while healthy, 503
// with the reason otherwise. Never cached.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.health(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, err.Error()+"\n")
		return
	}
	io.WriteString(w, "ok\n")
}
