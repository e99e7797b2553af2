// Package binding is the LoadBalancerBinding reconciler: it keeps each
// load-balancer group of a binding (an HAProxy backend; one or more ELBv2
// target groups) holding exactly the targets of the pods the binding
// selects. It is the thin, stateful edge around the pure target flow:
//
//	pods, nodes (cache) ─► targets.Desired ─┐
//	provider.Targets(group) ────────────────┴► targets.Diff ─► Register / Deregister ─► status, Events, state.Store
//	                        (once per group)
//
// Everything it needs comes from the cache and the provider's listings, so
// a restarted controller (or a new leader) picks up where the last one
// stopped. The Snapshot it stores, one listing per group, feeds the
// pod-status reconciler (readiness gate and drain handshake).
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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	provider "sluice.dev/sluice/internal/controller/lbcache"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/aws"
	"sluice.dev/sluice/internal/problem"
	"sluice.dev/sluice/internal/targets"
)

// Finalizer holds a deleted binding until its targets are deregistered.
const Finalizer = "sluice.dev/deregister-targets"

// Providers resolves a binding's spec.provider to a provider and the
// binding's groups (at least one). Errors wrapping lb.ErrInvalid or
// provider.ErrNotSupported are configuration errors, not retried; others
// (discovery failing) are retried with backoff.
type Providers interface {
	For(ctx context.Context, b *v1alpha1.LoadBalancerBinding) (lb.Provider, []string, error)
}

var _ Providers = (*provider.Cache)(nil)

// DelayChecker is a provider whose groups drain on their own timer (AWS's
// deregistration delay). Check returns an error matching
// aws.ErrDelayTooLong when a group drains for longer than podGrace, the
// pods' termination grace period, leaves room for.
type DelayChecker interface {
	Check(ctx context.Context, group string, podGrace time.Duration) error
}

var _ DelayChecker = (*aws.Provider)(nil)

// HealthCheckPortReader is a provider whose groups carry their own
// health-check port, set outside sluice (AWS target groups), which the
// binding's healthCheckPort is compared with.
type HealthCheckPortReader interface {
	HealthCheckPort(ctx context.Context, group string) (string, error)
}

var _ HealthCheckPortReader = (*aws.Provider)(nil)

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
	// CheckInterval is how often a group's drain time is checked against
	// the pods' grace period (providers that are DelayCheckers), and so
	// how often a DeregistrationDelayTooLong Event may repeat. A changed
	// grace period is checked at once. Default 5m.
	CheckInterval time.Duration
	// Access says which bindings may be acted on; the others get the
	// Forbidden condition and Event. Zero: every binding.
	Access Access
}

// Reconciler reconciles LoadBalancerBindings.
type Reconciler struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	checks  *checks
	views   views
	// forbidden: the cause last announced for each binding refused by
	// Access (types.NamespacedName → string), so that its Event is not
	// repeated where its Forbidden condition cannot be written.
	forbidden problem.Latest[types.NamespacedName]
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
	o.CheckInterval = cmp.Or(o.CheckInterval, 5*time.Minute)
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	return &Reconciler{opts: o, log: o.Logger, metrics: m, checks: newChecks(), views: views{snaps: map[types.NamespacedName]view{}}}, nil
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
	if err := r.opts.Access.Check(&b); err != nil {
		return r.forbid(ctx, &b, err)
	}
	r.forbidden.Forget(req.NamespacedName)
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
	owner, err := r.conflict(ctx, &b)
	if err != nil {
		return reconcile.Result{}, err
	}
	if owner != nil {
		return r.refuse(ctx, &b, owner)
	}
	prov, groups, err := r.opts.Providers.For(ctx, &b)
	if err != nil {
		return r.providerFailed(ctx, &b, err)
	}
	pods, nodes, err := r.read(ctx, &b)
	if err != nil {
		if errors.Is(err, errSelector) {
			r.event(&b, nil, corev1.EventTypeWarning, "InvalidSelector", "Configure", err.Error())
			return reconcile.Result{}, r.writeStatus(ctx, &b, nil, "InvalidSelector", err)
		}
		return reconcile.Result{}, err
	}
	return r.sync(ctx, &b, prov, groups, pods, nodes)
}

// providerFailed handles a binding whose provider or groups could not be
// resolved: a configuration error is reported and not retried (the next
// spec change reconciles again); anything else is a provider error.
func (r *Reconciler) providerFailed(ctx context.Context, b *v1alpha1.LoadBalancerBinding, err error) (reconcile.Result, error) {
	if !configError(err) {
		var counts []lb.Status
		if s := r.opts.Store.Get(types.NamespacedName{Namespace: b.Namespace, Name: b.Name}); s != nil {
			counts = s.Targets()
		}
		return r.failed(ctx, b, counts, fmt.Errorf("resolving the provider: %w", err))
	}
	reason := "InvalidProvider"
	if errors.Is(err, provider.ErrNotSupported) {
		reason = "ProviderNotSupported"
	}
	r.event(b, nil, corev1.EventTypeWarning, reason, "Configure", err.Error())
	return reconcile.Result{}, r.writeStatus(ctx, b, nil, reason, err)
}

func configError(err error) bool {
	return errors.Is(err, lb.ErrInvalid) || errors.Is(err, provider.ErrNotSupported)
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

// sync is one read → plan → apply → status round over every group.
func (r *Reconciler) sync(ctx context.Context, b *v1alpha1.LoadBalancerBinding, prov lb.Provider, groups []string,
	pods []*corev1.Pod, nodes map[string]*corev1.Node) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	now := r.opts.Now()
	for _, p := range pods {
		r.opts.Timeline.Observe(podKey(p), p.UID, p.Status.PodIP != "", p.DeletionTimestamp != nil, now)
	}
	spec := targetSpec(b)
	desired, problems := targets.Desired(spec, pods, nodes)
	prev := r.opts.Store.Get(key)

	snap := newSnapshot(b, spec, pods, nodes, desired)
	snap.Problems = problemStrings(problems)
	r.announceProblems(b, snap, prev)
	guard, held, guardErr := r.guard(ctx, b, nodes)
	var errs []error
	moving := false
	for _, name := range groups {
		g, current, plan := r.syncGroup(ctx, prov, name, desired, prev.Group(name), guard)
		snap.Groups = append(snap.Groups, g)
		if g.Err != nil {
			errs = append(errs, g.Err)
		}
		moving = moving || !plan.Empty()
		if current != nil {
			r.announce(b, snap, name, current, plan, g.Err == nil, pods)
		}
	}
	if err := guardErr(); err != nil {
		return reconcile.Result{}, err // nothing was deregistered
	}
	snap.Err = errors.Join(errs...)
	r.opts.Notify(ctx, r.opts.Store.Put(snap))
	r.setDeletionCosts(ctx, b, snap, pods)
	listed := snap.Targets()
	r.metrics.setTargets(key.String(), listed)
	zones := r.zones(key.String(), listed, zoneIndex(pods, nodes))
	heldMsg := ""
	if len(*held) > 0 {
		heldMsg = heldMessage(b, *held)
		r.log.Warn("deregistration held", "binding", key, "reason", heldMsg)
	}
	extra := []func(*v1alpha1.LoadBalancerBindingStatus){zones, r.reportHeld(b, key.String(), *held, heldMsg),
		r.timers(ctx, b, prov, groups, pods)}

	if snap.Err != nil {
		return r.failed(ctx, b, listed, snap.Err, extra...)
	}
	r.checkDelays(ctx, b, prov, groups, pods)
	r.checkHealthCheckPorts(ctx, b, prov, groups)
	addrs, err := addresses(ctx, b, prov, groups)
	if err != nil {
		r.log.Warn("finding load balancer addresses", "binding", key, "err", err)
	}
	r.log.Debug("binding reconciled", "binding", key, "groups", len(groups), "desired", len(desired), "listed", len(listed))
	extra = append(extra, func(st *v1alpha1.LoadBalancerBindingStatus) { st.Addresses = addrs })
	if err := r.writeStatus(ctx, b, listed, "", nil, extra...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: r.requeue(moving, listed)}, nil
}

// syncGroup lists one group, applies the plan for it and returns the
// group as the snapshot keeps it, the listing (nil if listing failed) and
// the plan. When listing fails, the group keeps prev's targets.
func (r *Reconciler) syncGroup(ctx context.Context, prov lb.Provider, name string, desired []lb.Target,
	prev *state.Group, guard func(targets.Plan, []lb.Status) targets.Plan) (state.Group, []lb.Status, targets.Plan) {
	current, err := prov.Targets(ctx, name)
	if err != nil {
		g := state.Group{Name: name}
		if prev != nil {
			g = *prev
		}
		g.Err = fmt.Errorf("listing targets of %s: %w", name, err)
		return g, nil, targets.Plan{}
	}
	plan := targets.Diff(desired, current)
	if guard != nil {
		plan = guard(plan, current)
	}
	var errs []error
	if len(plan.Register) > 0 {
		if err := prov.Register(ctx, name, plan.Register); err != nil {
			errs = append(errs, fmt.Errorf("registering %d targets in %s: %w", len(plan.Register), name, err))
		}
	}
	if len(plan.Deregister) > 0 {
		if err := prov.Deregister(ctx, name, plan.Deregister); err != nil {
			errs = append(errs, fmt.Errorf("deregistering %d targets from %s: %w", len(plan.Deregister), name, err))
		}
	}
	g := state.Group{Name: name, Synced: true, Targets: afterPlan(current, plan), Err: errors.Join(errs...)}
	return g, current, plan
}

// failed records a provider error: metric, Event and status (counts are
// the targets last known). It returns the error so that the controller
// retries with backoff.
func (r *Reconciler) failed(ctx context.Context, b *v1alpha1.LoadBalancerBinding, counts []lb.Status, err error,
	extra ...func(*v1alpha1.LoadBalancerBindingStatus)) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	r.metrics.providerErrors.WithLabelValues(key.String()).Inc()
	r.log.Warn("provider error", "binding", key, "err", err)
	r.event(b, nil, corev1.EventTypeWarning, "ProviderError", "Sync", err.Error())
	if serr := r.writeStatus(ctx, b, counts, errorReason(err), err, extra...); serr != nil {
		err = errors.Join(err, serr)
	}
	return reconcile.Result{}, err
}

// requeue: fast while the group is moving, slow when it is settled.
func (r *Reconciler) requeue(changed bool, listed []lb.Status) time.Duration {
	if changed {
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

// finalize deregisters every target of a deleted binding from every group,
// then lets it go. A binding whose provider is misconfigured is let go at
// once; one whose groups cannot be resolved now (discovery failing) is
// retried, and reports DeletionBlocked past its drain timeout. A binding
// annotated to abandon its targets (abandon.go) is let go at once, the
// provider untouched.
func (r *Reconciler) finalize(ctx context.Context, b *v1alpha1.LoadBalancerBinding) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	if !controllerutil.ContainsFinalizer(b, Finalizer) {
		r.forget(ctx, key)
		return reconcile.Result{}, nil
	}
	switch d := decideAbandon(b); {
	case d.Abandon:
		return r.abandon(ctx, b)
	case d.Ignored != "":
		v := b.Annotations[v1alpha1.AnnotationAbandonTargets]
		if r.checks.due(checkKey{binding: key, group: "\x00abandon:" + v}, 0, r.opts.Now(), time.Hour) {
			r.log.Warn("abandon annotation ignored", "binding", key, "reason", d.Ignored)
			r.event(b, nil, corev1.EventTypeWarning, ReasonAbandonIgnored, "Delete", d.Ignored)
		}
	}
	owner, err := r.conflict(ctx, b)
	if err != nil {
		return reconcile.Result{}, err
	}
	if owner != nil {
		// A refused binding registered nothing: the owner's targets stay.
		return r.removeFinalizer(ctx, b, key)
	}
	// A blocked deletion probes the provider with a short deadline, so
	// that an abandon annotation arriving meanwhile is seen in seconds,
	// not after the provider's retries.
	pctx, cancel := blockedProbe(ctx, b)
	defer cancel()
	prov, groups, err := r.opts.Providers.For(pctx, b)
	switch {
	case err != nil && errors.Is(err, lb.ErrGroupNotFound):
		// Nothing tagged for it (any more): nothing to deregister.
	case err != nil && !configError(err):
		return r.finalizeFailed(ctx, b, fmt.Errorf("resolving the provider of a deleted binding: %w", err))
	case err == nil:
		stays := func(lb.Target) bool { return false }
		if !confirmed(b) {
			var nodeList corev1.NodeList
			if err := r.opts.Client.List(ctx, &nodeList); err != nil {
				return reconcile.Result{}, fmt.Errorf("listing nodes: %w", err)
			}
			nodes := make(map[string]*corev1.Node, len(nodeList.Items))
			for i := range nodeList.Items {
				nodes[nodeList.Items[i].Name] = &nodeList.Items[i]
			}
			if stays, err = r.staying(ctx, b, nodes); err != nil {
				return reconcile.Result{}, err
			}
		}
		var all []lb.Status
		pending, held := false, 0
		for _, group := range groups {
			listed, err := prov.Targets(pctx, group)
			if err != nil && !errors.Is(err, lb.ErrGroupNotFound) {
				return r.finalizeFailed(ctx, b, fmt.Errorf("listing targets of %s of a deleted binding: %w", group, err))
			}
			all = append(all, listed...)
			var out []lb.Target
			for _, s := range listed {
				switch {
				case s.State == lb.Unused:
				case stays(s.Target):
					held++ // its pod still runs: kept until confirmed
				default:
					out = append(out, s.Target)
				}
			}
			if len(out) == 0 {
				continue
			}
			pending = true
			if err := prov.Deregister(pctx, group, out); err != nil {
				return r.finalizeFailed(ctx, b, fmt.Errorf("deregistering targets from %s of a deleted binding: %w", group, err))
			}
		}
		if pending {
			r.metrics.setTargets(key.String(), all)
			return reconcile.Result{RequeueAfter: r.opts.FastRequeue}, nil
		}
		if held > 0 {
			return r.holdDeletion(ctx, b, all, held)
		}
	}
	return r.removeFinalizer(ctx, b, key)
}

// refuse reports a binding whose group an older binding drives, and touches
// nothing else; it checks again later, in case the owner goes away.
func (r *Reconciler) refuse(ctx context.Context, b *v1alpha1.LoadBalancerBinding, owner *v1alpha1.LoadBalancerBinding) (reconcile.Result, error) {
	msg := fmt.Sprintf("binding %s/%s, created earlier, already drives a load-balancer group this binding names; "+
		"two bindings on one group would deregister each other's targets, so this one does nothing until that binding is gone or this spec names another group",
		owner.Namespace, owner.Name)
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != ReasonGroupConflict {
		r.event(b, nil, corev1.EventTypeWarning, ReasonGroupConflict, "Configure", msg)
	}
	return reconcile.Result{RequeueAfter: r.opts.SlowRequeue}, r.writeStatus(ctx, b, nil, ReasonGroupConflict, errors.New(msg))
}

// removeFinalizer lets a deleted binding go.
func (r *Reconciler) removeFinalizer(ctx context.Context, b *v1alpha1.LoadBalancerBinding, key types.NamespacedName) (reconcile.Result, error) {
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
	r.checks.forget(key)
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
