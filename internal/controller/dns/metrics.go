package dns

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	model "sluice.dev/sluice/internal/dns"
)

// states are the name states reported by sluice_dns_names.
var states = []string{model.StatePublished, model.StatePending, model.StateConflict, model.StateKept, model.StateUnwanted, model.StateDeleting}

type metrics struct {
	names          *prometheus.GaugeVec
	changes        *prometheus.CounterVec
	providerErrors *prometheus.CounterVec
	conflicts      prometheus.Counter
	foreign        prometheus.Counter
	publishLatency prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		names: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_dns_names",
			Help: "DNS names of the zones sluice manages, by state (published, pending, conflict, kept, unwanted, deleting), as of the last reconcile.",
		}, []string{"state"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_dns_changes_total",
			Help: "Record-set changes applied (create, update, delete), ownership records included.",
		}, []string{"type"}),
		providerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_dns_provider_errors_total",
			Help: "DNS provider calls that failed (zones, records, apply); each is retried with backoff.",
		}, []string{"op"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_dns_write_conflicts_total",
			Help: "Change batches refused because the zone changed since it was read (compare-and-swap); planned again.",
		}),
		foreign: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_dns_foreign_records_total",
			Help: "Reconciles that found a wanted name held by records sluice does not own (left untouched), counted per name.",
		}),
		publishLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_dns_publish_latency_seconds",
			Help:    "Time from the controller seeing an Ingress change to the provider answering that its records are written.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}),
	}
	for _, s := range states {
		m.names.WithLabelValues(s)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.names, m.changes, m.providerErrors, m.conflicts, m.foreign, m.publishLatency} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering DNS metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) setStates(counts map[string]int) {
	for _, s := range states {
		m.names.WithLabelValues(s).Set(float64(counts[s]))
	}
}
