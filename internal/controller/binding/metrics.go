package binding

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/sluice/internal/lb"
)

// states are the target states reported by sluice_controller_targets.
var states = []lb.State{lb.Initial, lb.Healthy, lb.Unhealthy, lb.Draining, lb.Unused, lb.Unavailable}

type metrics struct {
	targets         *prometheus.GaugeVec
	providerErrors  *prometheus.CounterVec
	registerLatency prometheus.Histogram
	held            *prometheus.GaugeVec
	zoneHealthy     *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		targets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_controller_targets",
			Help: "Targets of a LoadBalancerBinding by load-balancer state, as last listed by the provider.",
		}, []string{"binding", "state"}),
		providerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_controller_provider_errors_total",
			Help: "Binding reconciles that failed on a provider error.",
		}, []string{"binding"}),
		registerLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_controller_register_latency_seconds",
			Help:    "Time from a pod getting its IP to its target being registered.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 13),
		}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_controller_held_targets",
			Help: "Targets the emptying guard keeps registered until the binding confirms their deregistration.",
		}, []string{"binding"}),
		zoneHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_controller_zone_healthy_targets",
			Help: "Healthy targets of a LoadBalancerBinding per zone, as last listed by the provider.",
		}, []string{"binding", "zone"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.targets, m.providerErrors, m.registerLatency, m.held, m.zoneHealthy} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering binding metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) setTargets(binding string, ts []lb.Status) {
	counts := map[lb.State]int{}
	for _, t := range ts {
		counts[t.State]++
	}
	for _, s := range states {
		m.targets.WithLabelValues(binding, string(s)).Set(float64(counts[s]))
	}
}

func (m *metrics) forget(binding string) {
	m.targets.DeletePartialMatch(prometheus.Labels{"binding": binding})
	m.providerErrors.DeleteLabelValues(binding)
	m.held.DeleteLabelValues(binding)
	m.zoneHealthy.DeletePartialMatch(prometheus.Labels{"binding": binding})
}
