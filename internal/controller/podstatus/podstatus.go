// Package podstatus is the pod-status reconciler: it writes the two pod
// conditions sluice owns, from what the binding reconciler last learned
// from the load balancers (state.Store):
//
//   - sluice.dev/load-balancer-healthy, the readiness gate: a new ingress
//     pod becomes Ready only once every load balancer in front of it checks
//     it healthy, so a rollout never outruns the load balancer;
//
//   - sluice.dev/drained, the drain handshake: a deleted pod learns when no
//     load balancer sends it new traffic, so the proxy stops then instead of
//     after a fixed sleep.
//
//     state.Store (binding snapshots) ─► Decide (pure) ─► pod status patch (only these conditions), Events, metrics
//
// The kubelet writes the same pods' status; the reconciler patches only its
// own condition types with a strategic merge patch keyed by type, so the
// kubelet's conditions are never overwritten.
package podstatus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	state "sluice.dev/sluice/internal/controller/snapshot"
)

// Recorder emits Kubernetes Events (events.k8s.io EventRecorder).
type Recorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Options configures a Reconciler.
type Options struct {
	// Client reads pods and bindings and patches pod status. Required.
	Client client.Client
	// Store holds the binding snapshots. Required.
	Store *state.Store
	// Timeline times the healthy and drain latency metrics. Nil: a
	// private one (no healthy latency then).
	Timeline *state.Timeline
	// Recorder emits Events. Nil: none.
	Recorder Recorder
	// Registerer receives the metrics. Nil: not registered.
	Registerer prometheus.Registerer
	// Logger: nil discards.
	Logger *slog.Logger
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// Reconciler reconciles the sluice conditions of pods.
type Reconciler struct {
	opts           Options
	log            *slog.Logger
	healthyLatency prometheus.Histogram
	drainLatency   prometheus.Histogram
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// New returns a Reconciler.
func New(o Options) (*Reconciler, error) {
	if o.Client == nil || o.Store == nil {
		return nil, errors.New("creating pod-status reconciler: Client and Store are required")
	}
	o.Timeline = cmp.Or(o.Timeline, state.NewTimeline())
	o.Logger = cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Reconciler{
		opts: o,
		log:  o.Logger,
		healthyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_controller_healthy_latency_seconds",
			Help:    "Time from a pod's first registration to its readiness gate turning True.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 13),
		}),
		drainLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_controller_drain_latency_seconds",
			Help:    "Time from a pod's deletion to its drained condition turning True.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 13),
		}),
	}
	if o.Registerer != nil {
		if err := errors.Join(o.Registerer.Register(r.healthyLatency), o.Registerer.Register(r.drainLatency)); err != nil {
			return nil, fmt.Errorf("registering pod-status metrics: %w", err)
		}
	}
	return r, nil
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pod corev1.Pod
	if err := r.opts.Client.Get(ctx, req.NamespacedName, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			r.opts.Timeline.Forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading pod %s: %w", req.NamespacedName, err)
	}
	now := r.opts.Now()
	r.opts.Timeline.Observe(req.NamespacedName, pod.UID, pod.Status.PodIP != "", pod.DeletionTimestamp != nil, now)
	if !declaresGate(&pod) && pod.DeletionTimestamp == nil {
		return reconcile.Result{}, nil
	}
	bindings, err := binding.Selecting(ctx, r.opts.Client, &pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	views := make([]View, 0, len(bindings))
	for i := range bindings {
		b := &bindings[i]
		if b.DeletionTimestamp != nil {
			continue // on its way out: it no longer fronts the pod
		}
		gate, handshake, timeout := binding.Settings(b)
		key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
		views = append(views, View{Binding: key.String(), Gate: gate, Handshake: handshake, DrainTimeout: timeout, Snap: r.opts.Store.Get(key)})
	}
	d := Decide(&pod, views, now)
	if err := r.write(ctx, &pod, d, now); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: d.Wait}, nil
}

// write patches the decided conditions and reports the transitions.
func (r *Reconciler) write(ctx context.Context, pod *corev1.Pod, d Decision, now time.Time) error {
	var conds []corev1.PodCondition
	add := func(typ corev1.PodConditionType, c *Condition) {
		if c == nil {
			return
		}
		pc := corev1.PodCondition{Type: typ, Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: metav1.NewTime(now)}
		if cur := findCondition(pod, typ); cur != nil && cur.Status == c.Status {
			pc.LastTransitionTime = cur.LastTransitionTime
		}
		conds = append(conds, pc)
	}
	add(v1alpha1.ReadinessGateHealthy, d.Gate)
	add(v1alpha1.PodConditionDrained, d.Drained)
	if len(conds) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return fmt.Errorf("encoding pod status patch: %w", err)
	}
	if err := r.opts.Client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching conditions of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if c := d.Gate; c != nil {
		r.log.Info("readiness gate", "pod", key, "status", c.Status, "reason", c.Reason, "message", c.Message)
		switch c.Status {
		case corev1.ConditionTrue:
			r.event(pod, corev1.EventTypeNormal, "Healthy", "SetReadinessGate", c.Message)
			if at, ok := r.opts.Timeline.RegisteredAt(key, pod.UID); ok {
				r.healthyLatency.Observe(max(now.Sub(at), 0).Seconds())
			}
		default:
			if c.Reason == "TargetNotHealthy" {
				r.event(pod, corev1.EventTypeWarning, "Unhealthy", "SetReadinessGate", c.Message)
			}
		}
	}
	if c := d.Drained; c != nil {
		r.log.Info("pod drained", "pod", key, "reason", c.Reason, "message", c.Message)
		r.event(pod, corev1.EventTypeNormal, "Drained", "SetDrained", c.Message)
		start, ok := r.opts.Timeline.DeletionSeen(key, pod.UID)
		if !ok {
			start = pod.DeletionTimestamp.Time
		}
		r.drainLatency.Observe(max(now.Sub(start), 0).Seconds())
	}
	return nil
}

func (r *Reconciler) event(pod *corev1.Pod, typ, reason, action, note string) {
	if r.opts.Recorder != nil {
		r.opts.Recorder.Eventf(pod, nil, typ, reason, action, "%s", note)
	}
}
