// Package rebuild keeps the proxy's routing table in step with its source:
// it waits for the source to report a change, takes a snapshot, runs the pure
// translation, compiles the table and hands it to the proxy, which swaps it
// atomically. Changes arriving while a table is being built are coalesced into
// the next build, so a burst of object updates costs one build, not many. The
// loop keeps the parsed TLS Secrets between builds (translate.KeyPairCache),
// so a rebuild parses only the certificates that changed, and the last
// translation with its index (translate.Update), so a rebuild translates
// only the hosts the change touches and compiles only those
// (route.NewFrom).
//
// Data flow: source.Source → Loop (here) → translate.Update → route.New →
// Updater (the proxy).
package rebuild

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/translate"
)

// Source is what the loop reads objects from.
type Source interface {
	Run(ctx context.Context, notify func()) error
	Snapshot() translate.Input
	Synced() bool
}

// Updater receives each new table. The proxy implements it.
type Updater interface {
	Update(t *route.Table)
}

// Options configure a Loop.
type Options struct {
	Source    Source
	Updater   Updater
	Translate translate.Options
	// Registerer receives the table metrics; nil means none.
	Registerer prometheus.Registerer
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// OnTable, if set, is called after each table is live (tests, benchmarks).
	OnTable func(t *route.Table, problems []translate.Problem)
}

// Loop runs the source and rebuilds the table on every change.
type Loop struct {
	o       Options
	log     *slog.Logger
	ready   atomic.Bool
	kick    chan struct{}
	gen     atomic.Uint64
	changed atomic.Int64 // unix nanos of the oldest change not yet live; 0 if none

	generation   prometheus.Gauge
	buildSeconds prometheus.Histogram
	liveSeconds  prometheus.Histogram
	rejected     *prometheus.GaugeVec
	certExpiry   *prometheus.GaugeVec
	routes       prometheus.Gauge
	endpoints    prometheus.Gauge
	refused      prometheus.Gauge
	translations *prometheus.CounterVec

	lastProblems map[string]bool
	lastExpiry   map[string]int64        // certExpiry as set: Secret → Unix seconds
	keyPairs     *translate.KeyPairCache // parsed TLS Secrets, used by rebuild only
	last         *translate.Result       // the last translation, consumed by the next; used by rebuild only
	table        *route.Table            // the last table, whose unchanged hosts the next reuses; used by rebuild only
}

// New returns a Loop. Call Run to start it.
func New(o Options) (*Loop, error) {
	l := &Loop{o: o, log: o.Logger, kick: make(chan struct{}, 1), lastProblems: map[string]bool{},
		lastExpiry: map[string]int64{},
		keyPairs:   translate.NewKeyPairCache()}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.generation = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "sluice", Name: "table_generation", Help: "Generation of the routing table in use; increases on every swap."})
	l.buildSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "sluice", Name: "table_build_duration_seconds", Help: "Time to translate objects into a routing table and compile it.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	l.liveSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "sluice", Name: "table_change_to_live_seconds", Help: "Time from the source reporting a change to the new table serving requests.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	l.rejected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "sluice", Name: "objects_rejected", Help: "Problems found in the last translation, by object kind, namespace and reason (the log names each object)."},
		[]string{"kind", "namespace", "reason"})
	l.certExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "sluice", Name: "certificate_expiry_timestamp_seconds", Help: "When each certificate the routing table serves expires (Unix seconds), by the Secret it came from (\"namespace/name\")."},
		[]string{"secret"})
	l.routes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "sluice", Name: "table_routes", Help: "Routes in the routing table in use."})
	l.endpoints = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "sluice", Name: "table_endpoints", Help: "Distinct endpoint addresses in the routing table in use."})
	l.refused = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "sluice", Name: "endpoints_refused", Help: "Endpoints of the Services the routing table uses that the endpoint checks refused (no Pod of the Service's namespace, an address that is not the targetRef Pod's, or a special address); they get no traffic. Each is named in an EndpointsRefused problem."})
	l.translations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "table_translations_total", Help: "Translations of objects into a routing table, by kind: \"full\" (every Ingress) or \"incremental\" (only the Ingresses linked to the changed objects by hosts, Services and Secrets)."},
		[]string{"kind"})
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{l.generation, l.buildSeconds, l.liveSeconds, l.rejected, l.certExpiry, l.routes, l.endpoints, l.refused, l.translations} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering table metrics: %w", err)
			}
		}
	}
	return l, nil
}

// Ready reports whether the first complete table is live.
func (l *Loop) Ready() bool { return l.ready.Load() }

// Run starts the source and rebuilds on change until ctx ends.
func (l *Loop) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		errc <- l.o.Source.Run(ctx, func() {
			l.changed.CompareAndSwap(0, time.Now().UnixNano())
			select {
			case l.kick <- struct{}{}:
			default:
			}
		})
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("running source: %w", err)
			}
			return nil
		case <-l.kick:
			if !l.o.Source.Synced() {
				continue
			}
			l.rebuild()
		}
	}
}

func (l *Loop) rebuild() {
	since := l.changed.Swap(0)
	start := time.Now()
	in := l.o.Source.Snapshot()
	res := translate.Update(l.last, in, l.o.Translate, l.keyPairs)
	l.last = res
	cfg, problems := res.Config, res.Problems
	t := route.NewFrom(l.table, cfg)
	l.table = t
	built := time.Since(start)
	l.o.Updater.Update(t)
	gen := l.gen.Add(1)
	l.generation.Set(float64(gen))
	l.buildSeconds.Observe(built.Seconds())
	kind := "incremental"
	if res.Full {
		kind = "full"
	}
	l.translations.WithLabelValues(kind).Inc()
	if since != 0 {
		l.liveSeconds.Observe(time.Since(time.Unix(0, since)).Seconds())
	}
	l.record(&cfg, problems)
	if !l.ready.Swap(true) {
		l.log.Info("first routing table live", "generation", gen, "ingresses", len(in.Ingresses), "hosts", len(cfg.VirtualHosts), "build", built)
	} else {
		l.log.Debug("routing table live", "generation", gen, "hosts", len(cfg.VirtualHosts), "build", built,
			"translation", kind, "retranslated", res.Retranslated)
	}
	if l.o.OnTable != nil {
		l.o.OnTable(t, problems)
	}
}

// record updates metrics and logs each problem once while it persists.
func (l *Loop) record(cfg *route.Config, problems []translate.Problem) {
	nroutes := 0
	addrs := map[string]struct{}{}
	refused := map[[3]string]int{} // Service port → refused endpoints; policy variants share them
	countRefused := func(be *route.Backend) {
		if be != nil && be.RefusedEndpoints > 0 {
			refused[[3]string{be.Namespace, be.Service, be.Port}] = be.RefusedEndpoints
		}
	}
	for _, vh := range cfg.VirtualHosts {
		nroutes += len(vh.Routes)
		for _, r := range vh.Routes {
			if r.Backend != nil {
				for _, ep := range r.Backend.Endpoints {
					addrs[ep.Address] = struct{}{}
				}
			}
			countRefused(r.Backend)
		}
	}
	countRefused(cfg.DefaultBackend)
	nrefused := 0
	for _, n := range refused {
		nrefused += n
	}
	l.routes.Set(float64(nroutes))
	l.endpoints.Set(float64(len(addrs)))
	l.refused.Set(float64(nrefused))

	// Only the series that changed: with 10,000s of certificates,
	// resetting and setting every one was a cost of every change.
	certs := cfg.Certificates
	if cfg.DefaultCertificate != nil {
		certs = append(certs[:len(certs):len(certs)], *cfg.DefaultCertificate)
	}
	expiry := make(map[string]int64, len(certs))
	for _, c := range certs {
		if c.Cert != nil && c.Cert.Leaf != nil {
			expiry[c.Source] = c.Cert.Leaf.NotAfter.Unix()
		}
	}
	for src := range l.lastExpiry {
		if _, ok := expiry[src]; !ok {
			l.certExpiry.DeleteLabelValues(src)
		}
	}
	for src, t := range expiry {
		if last, ok := l.lastExpiry[src]; !ok || last != t {
			l.certExpiry.WithLabelValues(src).Set(float64(t))
		}
	}
	l.lastExpiry = expiry

	l.rejected.Reset()
	counts := map[[3]string]int{}
	now := make(map[string]bool, len(problems))
	for _, p := range problems {
		counts[[3]string{p.Kind, p.Namespace, p.Reason}]++
		key := p.Kind + "/" + p.Namespace + "/" + p.Name + "/" + p.Reason + "/" + p.Message
		now[key] = true
		if !l.lastProblems[key] {
			l.log.Warn("object rejected", "kind", p.Kind, "namespace", p.Namespace, "name", p.Name, "reason", p.Reason, "message", p.Message)
		}
	}
	for k, n := range counts {
		l.rejected.WithLabelValues(k[0], k[1], k[2]).Set(float64(n))
	}
	l.lastProblems = now
}
