// Package binding is the LoadBalancerBinding reconciler: it keeps a
// load-balancer group holding exactly the targets of the pods a binding
// selects. It is the thin, stateful edge around the pure target flow:
//
//	pods, nodes (cache) ─► targets.Desired ─┐
//	provider.Targets ───────────────────────┴► targets.Diff ─► Register / Deregister ─► status, Events, state.Store
//
// Everything it needs comes from the cache and the provider's listing, so a
// restarted controller (or a new leader) picks up where the last one
// stopped. The Snapshot it stores feeds the pod-status reconciler
// (readiness gate and drain handshake).
package binding

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/provider"
	"sluice.dev/sluice/internal/controller/state"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/targets"
)

// Finalizer holds a deleted binding until its targets are deregistered.
const Finalizer = "sluice.dev/deregister-targets"

// Providers resolves a binding's spec.provider to a provider and group.
type Providers interface {
	For(spec v1alpha1.ProviderSpec) (lb.Provider, string, error)
}

var _ Providers = (*provider.Cache)(nil)

// Recorder emits Kubernetes Events (events.k8s.io EventRecorder).
type Recorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Options configures a Reconciler.
type Options struct {
	// Client reads pods, nodes and bindings (from the cache) and writes
	// binding status and finalizers. Required.
	Client client.Client
	// Providers builds providers from binding specs. Required.
	Providers Providers
	// Store receives a Snapshot after every reconcile. Required.
	Store *state.Store
	// Timeline times the register-latency metric. Nil: a private one.
	Timeline *state.Timeline
	// Recorder emits Events. Nil: none.
	Recorder Recorder
	// Notify is told which pods' view changed, so that their conditions
	// are recomputed. Nil: nobody is told.
	Notify func(ctx context.Context, pods []types.NamespacedName)
	// Registerer receives the metrics. Nil: not registered.
	Registerer prometheus.Registerer
	// Logger: nil discards.
	Logger *slog.Logger
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
	// FastRequeue is the poll interval while any target is initial,
	// unhealthy or draining, or the last reconcile changed something.
	// Default 1s.
	FastRequeue time.Duration
	// SlowRequeue is the poll interval otherwise. Default 10s.
	SlowRequeue time.Duration
}

// Reconciler reconciles LoadBalancerBindings.
type Reconciler struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// New returns a Reconciler.
func New(o Options) (*Reconciler, error) {
	if o.Client == nil || o.Providers == nil || o.Store == nil {
		return nil, errors.New("creating binding reconciler: Client, Providers and Store are required")
	}
	o.Timeline = cmp.Or(o.Timeline, state.NewTimeline())
	o.Logger = cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Notify == nil {
		o.Notify = func(context.Context, []types.NamespacedName) {}
	}
	o.FastRequeue = cmp.Or(o.FastRequeue, time.Second)
	o.SlowRequeue = cmp.Or(o.SlowRequeue, 10*time.Second)
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	return &Reconciler{opts: o, log: o.Logger, metrics: m}, nil
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var b v1alpha1.LoadBalancerBinding
	if err := r.opts.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(ctx, req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading binding %s: %w", req.NamespacedName, err)
	}
	if b.DeletionTimestamp != nil {
		return r.finalize(ctx, &b)
	}
	if !controllerutil.ContainsFinalizer(&b, Finalizer) {
		orig := b.DeepCopy()
		controllerutil.AddFinalizer(&b, Finalizer)
		if err := r.opts.Client.Patch(ctx, &b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer to binding %s: %w", req.NamespacedName, err)
		}
	}
	prov, group, err := r.opts.Providers.For(b.Spec.Provider)
	if err != nil {
		reason := "InvalidProvider"
		if errors.Is(err, provider.ErrNotSupported) {
			reason = "ProviderNotSupported"
		}
		r.event(&b, nil, corev1.EventTypeWarning, reason, "Configure", err.Error())
		return reconcile.Result{}, r.writeStatus(ctx, &b, nil, reason, err)
	}
	pods, nodes, err := r.read(ctx, &b)
	if err != nil {
		if errors.Is(err, errSelector) {
			r.event(&b, nil, corev1.EventTypeWarning, "InvalidSelector", "Configure", err.Error())
			return reconcile.Result{}, r.writeStatus(ctx, &b, nil, "InvalidSelector", err)
		}
		return reconcile.Result{}, err
	}
	return r.sync(ctx, &b, prov, group, pods, nodes)
}

var errSelector = errors.New("invalid selector")

// read lists the binding's pods (deleting ones included) and all nodes.
func (r *Reconciler) read(ctx context.Context, b *v1alpha1.LoadBalancerBinding) ([]*corev1.Pod, map[string]*corev1.Node, error) {
	sel, err := metav1.LabelSelectorAsSelector(&b.Spec.Selector)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing selector: %w: %w", errSelector, err)
	}
	var podList corev1.PodList
	if err := r.opts.Client.List(ctx, &podList, client.InNamespace(b.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, nil, fmt.Errorf("listing pods of binding %s/%s: %w", b.Namespace, b.Name, err)
	}
	var nodeList corev1.NodeList
	if err := r.opts.Client.List(ctx, &nodeList); err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	pods := make([]*corev1.Pod, len(podList.Items))
	for i := range podList.Items {
		pods[i] = &podList.Items[i]
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	nodes := make(map[string]*corev1.Node, len(nodeList.Items))
	for i := range nodeList.Items {
		nodes[nodeList.Items[i].Name] = &nodeList.Items[i]
	}
	return pods, nodes, nil
}

// sync is one read → plan → apply → status round.
func (r *Reconciler) sync(ctx context.Context, b *v1alpha1.LoadBalancerBinding, prov lb.Provider, group string,
	pods []*corev1.Pod, nodes map[string]*corev1.Node) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	now := r.opts.Now()
	for _, p := range pods {
		r.opts.Timeline.Observe(podKey(p), p.UID, p.Status.PodIP != "", p.DeletionTimestamp != nil, now)
	}
	spec := targetSpec(b)
	desired, problems := targets.Desired(spec, pods, nodes)
	prev := r.opts.Store.Get(key)

	current, err := prov.Targets(ctx, group)
	if err != nil {
		return r.failed(ctx, b, prev, fmt.Errorf("listing targets: %w", err))
	}
	plan := targets.Diff(desired, current)
	var errs []error
	if len(plan.Register) > 0 {
		if err := prov.Register(ctx, group, plan.Register); err != nil {
			errs = append(errs, fmt.Errorf("registering %d targets: %w", len(plan.Register), err))
		}
	}
	if len(plan.Deregister) > 0 {
		if err := prov.Deregister(ctx, group, plan.Deregister); err != nil {
			errs = append(errs, fmt.Errorf("deregistering %d targets: %w", len(plan.Deregister), err))
		}
	}
	applyErr := errors.Join(errs...)

	snap := newSnapshot(b, spec, pods, desired, current, plan)
	snap.Problems = problemStrings(problems)
	snap.Err = applyErr
	r.announce(b, snap, prev, current, plan, applyErr == nil, pods)
	r.opts.Notify(ctx, r.opts.Store.Put(snap))
	r.metrics.setTargets(key.String(), snap.Targets)

	if applyErr != nil {
		return r.failed(ctx, b, nil, applyErr)
	}
	r.log.Debug("binding reconciled", "binding", key, "desired", len(desired),
		"registered", len(plan.Register), "deregistered", len(plan.Deregister), "listed", len(current))
	if err := r.writeStatus(ctx, b, snap.Targets, "", nil); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: r.requeue(plan, snap.Targets)}, nil
}

// failed records a provider error: metric, Event, status and the previous
// snapshot marked with the error. It returns the error so that the
// controller retries with backoff.
func (r *Reconciler) failed(ctx context.Context, b *v1alpha1.LoadBalancerBinding, prev *state.Snapshot, err error) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	r.metrics.providerErrors.WithLabelValues(key.String()).Inc()
	r.log.Warn("provider error", "binding", key, "err", err)
	r.event(b, nil, corev1.EventTypeWarning, "ProviderError", "Sync", err.Error())
	if prev != nil {
		failed := *prev
		failed.Err = err
		r.opts.Store.Put(&failed)
	} else if r.opts.Store.Get(key) == nil {
		r.opts.Store.Put(&state.Snapshot{Binding: key, Generation: b.Generation, Err: err})
	}
	var counts []lb.Status
	if s := r.opts.Store.Get(key); s != nil {
		counts = s.Targets
	}
	if serr := r.writeStatus(ctx, b, counts, errorReason(err), err); serr != nil {
		err = errors.Join(err, serr)
	}
	return reconcile.Result{}, err
}

// requeue: fast while the group is moving, slow when it is settled.
func (r *Reconciler) requeue(plan targets.Plan, listed []lb.Status) time.Duration {
	if !plan.Empty() {
		return r.opts.FastRequeue
	}
	for _, s := range listed {
		switch s.State {
		case lb.Initial, lb.Unhealthy, lb.Draining:
			return r.opts.FastRequeue
		}
	}
	return r.opts.SlowRequeue
}

// finalize deregisters every target of a deleted binding, then lets it go.
func (r *Reconciler) finalize(ctx context.Context, b *v1alpha1.LoadBalancerBinding) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	if !controllerutil.ContainsFinalizer(b, Finalizer) {
		r.forget(ctx, key)
		return reconcile.Result{}, nil
	}
	prov, group, err := r.opts.Providers.For(b.Spec.Provider)
	if err == nil {
		listed, err := prov.Targets(ctx, group)
		if err != nil && !errors.Is(err, lb.ErrGroupNotFound) {
			return r.failed(ctx, b, nil, fmt.Errorf("listing targets of a deleted binding: %w", err))
		}
		var out []lb.Target
		for _, s := range listed {
			if s.State != lb.Unused {
				out = append(out, s.Target)
			}
		}
		if len(out) > 0 {
			if err := prov.Deregister(ctx, group, out); err != nil {
				return r.failed(ctx, b, nil, fmt.Errorf("deregistering targets of a deleted binding: %w", err))
			}
			r.metrics.setTargets(key.String(), listed)
			return reconcile.Result{RequeueAfter: r.opts.FastRequeue}, nil
		}
	}
	orig := b.DeepCopy()
	controllerutil.RemoveFinalizer(b, Finalizer)
	if err := r.opts.Client.Patch(ctx, b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("removing finalizer from binding %s: %w", key, err)
	}
	r.forget(ctx, key)
	return reconcile.Result{}, nil
}

// forget drops a binding that is gone.
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) {
	r.metrics.forget(key.String())
	r.opts.Notify(ctx, r.opts.Store.Delete(key))
}

func (r *Reconciler) event(regarding, related runtime.Object, typ, reason, action, note string) {
	if r.opts.Recorder != nil {
		r.opts.Recorder.Eventf(regarding, related, typ, reason, action, "%s", note)
	}
}

// errorReason names a provider error for conditions.
func errorReason(err error) string {
	switch {
	case errors.Is(err, lb.ErrUnreachable):
		return "ProviderUnreachable"
	case errors.Is(err, lb.ErrGroupNotFound):
		return "GroupNotFound"
	case errors.Is(err, lb.ErrNotDynamic):
		return "GroupNotDynamic"
	case errors.Is(err, lb.ErrInvalid):
		return "InvalidTarget"
	default:
		return "ProviderError"
	}
}

func podKey(p *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}
