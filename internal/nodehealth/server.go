package nodehealth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Options configure a Checker.
type Options struct {
	Client    kubernetes.Interface
	NodeName  string
	Namespace string
	Selector  labels.Selector
	Rules     Rules
	// Resync of the informers; zero means none.
	Resync time.Duration
	// Logger defaults to slog.Default(); verdict changes are logged.
	Logger *slog.Logger
}

// Checker serves the node's health from two informers: the node itself
// and the pods on it (field selector spec.nodeName) in the namespace.
type Checker struct {
	o      Options
	nodes  listerscorev1.NodeLister
	pods   listerscorev1.PodLister
	synced []cache.InformerSynced
	start  func(<-chan struct{})
	last   atomic.Value // string: the last reason, to log changes only
}

// New builds a Checker; Start runs its informers.
func New(o Options) *Checker {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	nodeF := informers.NewSharedInformerFactoryWithOptions(o.Client, o.Resync,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.NodeName).String()
		}))
	podF := informers.NewSharedInformerFactoryWithOptions(o.Client, o.Resync,
		informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.NodeName).String()
			lo.LabelSelector = o.Selector.String()
		}))
	c := &Checker{o: o}
	ni := nodeF.Core().V1().Nodes()
	pi := podF.Core().V1().Pods()
	c.nodes, c.pods = ni.Lister(), pi.Lister()
	c.synced = []cache.InformerSynced{ni.Informer().HasSynced, pi.Informer().HasSynced}
	c.start = func(stop <-chan struct{}) { nodeF.Start(stop); podF.Start(stop) }
	return c
}

// Start runs the informers until ctx ends.
func (c *Checker) Start(ctx context.Context) { c.start(ctx.Done()) }

// Check returns the current verdict.
func (c *Checker) Check() Verdict {
	for _, s := range c.synced {
		if !s() {
			return Verdict{Reason: "not synced with the API server yet"}
		}
	}
	node, err := c.nodes.Get(c.o.NodeName)
	if err != nil {
		node = nil
	}
	pods, err := c.pods.Pods(c.o.Namespace).List(c.o.Selector)
	if err != nil {
		return Verdict{Reason: fmt.Sprintf("listing pods: %v", err)}
	}
	return Decide(c.o.Rules, node, pods)
}

// ServeHTTP answers 200 or 503 with the verdict's reason.
func (c *Checker) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	v := c.Check()
	if prev, _ := c.last.Swap(v.Reason).(string); prev != v.Reason && !sameKind(prev, v) {
		c.o.Logger.Info("node health changed", "healthy", v.Healthy, "reason", v.Reason)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !v.Healthy {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, v.Reason)
}

// sameKind: both healthy (the ready counts may differ without a log line).
func sameKind(prev string, v Verdict) bool {
	return v.Healthy && len(prev) > 3 && prev[:3] == "ok:"
}
