// Package ingressdaemonset is the IngressDaemonSet reconciler: it runs an
// IngressDaemonSet's per-node Deployments, its health-checker DaemonSet
// and its eviction budget, and rolls template changes node by node,
// detaching each node from the load balancer first.
//
//	IngressDaemonSet, Nodes, its Deployments, bindings' snapshots ─► nodes.Compute (pure) ─► apply ─► status, Events
//
// Every piece of rollout state lives in the cluster (node annotations,
// the Deployments' object-hash, their status), so a restarted or newly
// elected controller picks a rollout up where it was.
package ingressdaemonset

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/nodes"
	"sluice.dev/sluice/internal/problem"
	"sluice.dev/sluice/internal/targets"
)

// Finalizer lets the reconciler reattach the nodes an IngressDaemonSet
// detached before it goes.
const Finalizer = "sluice.dev/ingress-daemonset"

// Options configures a Reconciler.
type Options struct {
	// Client reads and writes the objects. Required.
	Client client.Client
	// Snapshots returns a binding's last snapshot (the binding
	// reconciler's snapshot.Store.Get). Nil: no binding is ever synced, so
	// nodes served by an Instance binding wait for its drain timeout.
	Snapshots func(types.NamespacedName) *snapshot.Snapshot
	// Recorder receives Events (node failed, detached, reattached). Nil:
	// none.
	Recorder Recorder
	// HealthCheckerImage is the health checker's image when the spec
	// names none. Default nodes.DefaultHealthCheckerImage.
	HealthCheckerImage string
	// Check says whether IngressDaemonSets in a namespace may be acted on
	// (binding.Access.CheckIngressDaemonSet): one refused gets the
	// Progressing condition False with reason Forbidden and one Event, and
	// nothing is created for it. Nil: every namespace.
	Check func(namespace string) error
	// Poll is how often a rolling IngressDaemonSet is looked at again
	// (the load balancer's view changes without an event). Default 1s.
	Poll time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger: nil discards.
	Logger *slog.Logger
}

// Recorder emits Kubernetes Events (events.k8s.io EventRecorder).
type Recorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler reconciles IngressDaemonSets.
type Reconciler struct {
	opts Options
	log  *slog.Logger
	// forbidden: the cause last announced for each refused
	// IngressDaemonSet (owner → string), so that its Event is not repeated
	// where its Forbidden condition cannot be written.
	forbidden problem.Latest[string]
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// New returns a Reconciler.
func New(o Options) (*Reconciler, error) {
	if o.Client == nil {
		return nil, errors.New("creating the ingressdaemonset reconciler: Client is required")
	}
	o.Poll = cmp.Or(o.Poll, time.Second)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Snapshots == nil {
		o.Snapshots = func(types.NamespacedName) *snapshot.Snapshot { return nil }
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Reconciler{opts: o, log: log}, nil
}

// ReasonForbidden is the Progressing condition's reason and the Event of
// an IngressDaemonSet in a namespace the controller may not act on
// (--ingressdaemonset-namespaces). An IngressDaemonSet pins pods to nodes
// by nodeName, past taints, and runs a health checker of its choosing on
// the host network, so whoever may create one outside the namespaces the
// operator named gets nothing: no finalizer, Deployment, DaemonSet, budget
// or node annotation.
const ReasonForbidden = "Forbidden"

// Reconcile brings one IngressDaemonSet one step closer to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := r.opts.Client
	var ids v1alpha1.IngressDaemonSet
	if err := c.Get(ctx, req.NamespacedName, &ids); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.opts.Check != nil && ids.DeletionTimestamp == nil {
		if err := r.opts.Check(ids.Namespace); err != nil {
			return reconcile.Result{}, r.forbid(ctx, &ids, err)
		}
		r.forbidden.Forget(owner(&ids))
	}
	log := r.log.With("ingressdaemonset", req.String())
	var nodeList corev1.NodeList
	if err := c.List(ctx, &nodeList); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	ns := make([]*corev1.Node, len(nodeList.Items))
	for i := range nodeList.Items {
		ns[i] = &nodeList.Items[i]
	}
	if ids.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, &ids, ns)
	}
	if controllerutil.AddFinalizer(&ids, Finalizer) {
		if err := c.Update(ctx, &ids); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	deploys, err := r.owned(ctx, &ids)
	if err != nil {
		return reconcile.Result{}, err
	}
	var bindings v1alpha1.LoadBalancerBindingList
	if err := c.List(ctx, &bindings, client.InNamespace(ids.Namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing bindings: %w", err)
	}
	now := r.opts.Now()
	plan := nodes.Compute(nodes.Input{
		IDS: &ids, Nodes: ns, Deployments: deploys, Now: now,
		LB: LBView(&ids, bindings.Items, r.opts.Snapshots, ns),
	})
	applyErr := r.apply(ctx, log, &ids, plan, now)
	if err := r.status(ctx, &ids, plan, applyErr); err != nil {
		applyErr = errors.Join(applyErr, err)
	}
	if applyErr != nil {
		return reconcile.Result{}, applyErr
	}
	if len(plan.Waiting) > 0 {
		log.Debug("rollout waiting", "waiting", plan.Waiting)
	}
	if plan.Rolling || len(plan.Detach)+len(plan.Reattach)+len(plan.Delete) > 0 || len(plan.Waiting) > 0 {
		return reconcile.Result{RequeueAfter: min(cmp.Or(plan.RequeueAfter, r.opts.Poll), r.opts.Poll)}, nil
	}
	return reconcile.Result{}, nil
}

// owned lists the Deployments ids controls.
func (r *Reconciler) owned(ctx context.Context, ids *v1alpha1.IngressDaemonSet) ([]*appsv1.Deployment, error) {
	var list appsv1.DeploymentList
	if err := r.opts.Client.List(ctx, &list, client.InNamespace(ids.Namespace),
		client.MatchingLabels{v1alpha1.LabelIngressDaemonSet: ids.Name}); err != nil {
		return nil, fmt.Errorf("listing deployments: %w", err)
	}
	var out []*appsv1.Deployment
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == ids.UID {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// apply carries out the plan; it goes on past errors and returns them
// joined.
func (r *Reconciler) apply(ctx context.Context, log *slog.Logger, ids *v1alpha1.IngressDaemonSet, plan nodes.Plan, now time.Time) error {
	c := r.opts.Client
	var errs []error
	errs = append(errs, r.healthChecker(ctx, ids), r.budget(ctx, ids))
	for _, d := range plan.Create {
		if err := c.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("creating deployment %s: %w", d.Name, err))
			continue
		}
		log.Info("created per-node deployment", "deployment", d.Name)
	}
	for _, d := range plan.Update {
		errs = append(errs, r.updateDeployment(ctx, d))
		log.Info("updated per-node deployment", "deployment", d.Name)
	}
	for _, name := range plan.Delete {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ids.Namespace, Name: name}}
		if err := c.Delete(ctx, d); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting deployment %s: %w", name, err))
			continue
		}
		log.Info("deleted per-node deployment", "deployment", name)
	}
	for _, d := range plan.Detach {
		if err := r.detach(ctx, ids, d.Node, now); err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("detached node", "node", d.Node)
		r.event(ids, corev1.EventTypeNormal, "Detached", "Detach", "node %s detached from the load balancer", d.Node)
	}
	for _, n := range plan.Reattach {
		if err := r.reattach(ctx, ids, n); err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("reattached node", "node", n)
		r.event(ids, corev1.EventTypeNormal, "Reattached", "Reattach", "node %s updated and reattached", n)
	}
	return errors.Join(errs...)
}

// updateDeployment writes desired's labels, object-hash and spec over the
// live Deployment (the selector is immutable and never changes).
func (r *Reconciler) updateDeployment(ctx context.Context, desired *appsv1.Deployment) error {
	var live appsv1.Deployment
	if err := r.opts.Client.Get(ctx, client.ObjectKeyFromObject(desired), &live); err != nil {
		return fmt.Errorf("reading deployment %s: %w", desired.Name, err)
	}
	if live.Labels == nil {
		live.Labels = map[string]string{}
	}
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	maps.Copy(live.Labels, desired.Labels)
	maps.Copy(live.Annotations, desired.Annotations)
	live.Spec.Replicas = desired.Spec.Replicas
	live.Spec.Template = desired.Spec.Template
	live.Spec.Strategy = desired.Spec.Strategy
	live.Spec.ProgressDeadlineSeconds = desired.Spec.ProgressDeadlineSeconds
	if err := r.opts.Client.Update(ctx, &live); err != nil {
		return fmt.Errorf("updating deployment %s: %w", desired.Name, err)
	}
	return nil
}

// detach annotates the node (the detach annotation node-health and
// node-detacher read, the update-pending mark, who and when) and, unless it
// is there already, labels it node.kubernetes.io/exclude-from-external-
// load-balancers, so that Instance bindings deregister its target at once.
func (r *Reconciler) detach(ctx context.Context, ids *v1alpha1.IngressDaemonSet, name string, now time.Time) error {
	var node corev1.Node
	if err := r.opts.Client.Get(ctx, types.NamespacedName{Name: name}, &node); err != nil {
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	key, value := nodes.DetachAnnotation(ids)
	owner := owner(ids)
	ann := map[string]any{
		key: value, v1alpha1.AnnotationDetachStarted: now.UTC().Format(time.RFC3339),
		v1alpha1.AnnotationDetachedBy: owner, v1alpha1.AnnotationUpdatePending: "true",
	}
	var lbl map[string]any
	if _, ok := node.Labels[targets.LabelExcludeFromLB]; !ok {
		lbl = map[string]any{targets.LabelExcludeFromLB: "true"}
		ann[v1alpha1.AnnotationExcludedBy] = owner
	}
	return r.patchNode(ctx, name, ann, lbl)
}

// reattach removes what detach added.
func (r *Reconciler) reattach(ctx context.Context, ids *v1alpha1.IngressDaemonSet, name string) error {
	var node corev1.Node
	if err := r.opts.Client.Get(ctx, types.NamespacedName{Name: name}, &node); err != nil {
		return client.IgnoreNotFound(err)
	}
	key, _ := nodes.DetachAnnotation(ids)
	ann := map[string]any{key: nil, v1alpha1.AnnotationDetachStarted: nil, v1alpha1.AnnotationDetachedBy: nil, v1alpha1.AnnotationUpdatePending: nil}
	var lbl map[string]any
	if node.Annotations[v1alpha1.AnnotationExcludedBy] == owner(ids) {
		ann[v1alpha1.AnnotationExcludedBy] = nil
		lbl = map[string]any{targets.LabelExcludeFromLB: nil}
	}
	return r.patchNode(ctx, name, ann, lbl)
}

func owner(ids *v1alpha1.IngressDaemonSet) string { return ids.Namespace + "/" + ids.Name }

// patchNode merge-patches node annotations and labels (nil values remove).
func (r *Reconciler) patchNode(ctx context.Context, name string, annotations, labels map[string]any) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	patch, err := mergePatch(annotations, labels)
	if err != nil {
		return err
	}
	if err := r.opts.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotating node %s: %w", name, err)
	}
	return nil
}

// healthChecker creates or updates the health-checker DaemonSet and
// deletes the IngressDaemonSet's others (an older port).
func (r *Reconciler) healthChecker(ctx context.Context, ids *v1alpha1.IngressDaemonSet) error {
	c := r.opts.Client
	desired := nodes.HealthChecker(ids, r.opts.HealthCheckerImage)
	var list appsv1.DaemonSetList
	if err := c.List(ctx, &list, client.InNamespace(ids.Namespace), client.MatchingLabels{v1alpha1.LabelIngressDaemonSet: ids.Name}); err != nil {
		return fmt.Errorf("listing daemonsets: %w", err)
	}
	var errs []error
	found := false
	for i := range list.Items {
		live := &list.Items[i]
		if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != ids.UID {
			continue
		}
		if desired == nil || live.Name != desired.Name {
			if err := c.Delete(ctx, live); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("deleting daemonset %s: %w", live.Name, err))
			}
			continue
		}
		found = true
		if live.Annotations[v1alpha1.AnnotationObjectHash] == desired.Annotations[v1alpha1.AnnotationObjectHash] {
			continue
		}
		if live.Annotations == nil {
			live.Annotations = map[string]string{}
		}
		maps.Copy(live.Annotations, desired.Annotations)
		live.Spec.Template, live.Spec.UpdateStrategy = desired.Spec.Template, desired.Spec.UpdateStrategy
		if err := c.Update(ctx, live); err != nil {
			errs = append(errs, fmt.Errorf("updating daemonset %s: %w", live.Name, err))
		}
	}
	if desired != nil && !found {
		if err := c.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("creating daemonset %s: %w", desired.Name, err))
		}
	}
	return errors.Join(errs...)
}

// budget creates the PodDisruptionBudget if it is missing.
func (r *Reconciler) budget(ctx context.Context, ids *v1alpha1.IngressDaemonSet) error {
	desired := nodes.DisruptionBudget(ids)
	var live policyv1.PodDisruptionBudget
	err := r.opts.Client.Get(ctx, client.ObjectKeyFromObject(desired), &live)
	if apierrors.IsNotFound(err) {
		err = r.opts.Client.Create(ctx, desired)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("ensuring poddisruptionbudget %s: %w", desired.Name, err)
	}
	return nil
}

// status writes the node counts and the Progressing condition, and sends
// an Event when a node fails.
func (r *Reconciler) status(ctx context.Context, ids *v1alpha1.IngressDaemonSet, plan nodes.Plan, applyErr error) error {
	st := ids.Status.DeepCopy()
	st.ObservedGeneration = ids.Generation
	st.Nodes = plan.Counts
	cond := metav1.Condition{Type: v1alpha1.ConditionProgressing, ObservedGeneration: ids.Generation}
	switch {
	case len(plan.Failed) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonNodeFailed
		var msgs []string
		for _, n := range plan.Failed {
			msgs = append(msgs, n+": "+plan.Waiting[n])
		}
		cond.Message = "rollout stopped: " + strings.Join(msgs, "; ")
	case applyErr != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "ApplyFailed", applyErr.Error()
	case plan.Rolling:
		cond.Status, cond.Reason = metav1.ConditionTrue, "RollingUpdate"
		cond.Message = waitingMessage(plan.Waiting)
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Complete", "every node runs the current template"
	}
	if len(plan.Problems) > 0 {
		cond.Message = strings.TrimPrefix(cond.Message+"; "+strings.Join(plan.Problems, "; "), "; ")
	}
	old := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing)
	if cond.Reason == v1alpha1.ReasonNodeFailed && (old == nil || old.Reason != v1alpha1.ReasonNodeFailed) {
		r.event(ids, corev1.EventTypeWarning, v1alpha1.ReasonNodeFailed, "Rollout", "%s", cond.Message)
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	if equalStatus(&ids.Status, st) {
		return nil
	}
	ids.Status = *st
	if err := r.opts.Client.Status().Update(ctx, ids); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// forbid reports an IngressDaemonSet outside the allowed namespaces and
// leaves everything alone; what it made while it was allowed stays (a
// deleted one still reattaches the nodes it detached: finalize).
func (r *Reconciler) forbid(ctx context.Context, ids *v1alpha1.IngressDaemonSet, cause error) error {
	old := meta.FindStatusCondition(ids.Status.Conditions, v1alpha1.ConditionProgressing)
	if old != nil && old.Reason == ReasonForbidden && old.Message == cause.Error() && old.ObservedGeneration == ids.Generation {
		return nil
	}
	key := owner(ids)
	if (old == nil || old.Reason != ReasonForbidden) && r.forbidden.Changed(key, cause.Error()) {
		r.log.Warn("ingressdaemonset forbidden", "ingressdaemonset", key, "err", cause)
		r.event(ids, corev1.EventTypeWarning, ReasonForbidden, "Configure", "%s", cause.Error())
	}
	meta.SetStatusCondition(&ids.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionFalse,
		Reason: ReasonForbidden, Message: cause.Error(), ObservedGeneration: ids.Generation})
	ids.Status.ObservedGeneration = ids.Generation
	// The chart lets the controller write IngressDaemonSets only in the
	// allowed namespaces: there the condition is written, elsewhere (403)
	// the Event is all its owner sees.
	if err := r.opts.Client.Status().Update(ctx, ids); err != nil && !apierrors.IsConflict(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// finalize reattaches the nodes ids detached and lets it go.
func (r *Reconciler) finalize(ctx context.Context, ids *v1alpha1.IngressDaemonSet, ns []*corev1.Node) error {
	if !controllerutil.ContainsFinalizer(ids, Finalizer) {
		return nil
	}
	for _, n := range ns {
		if n.Annotations[v1alpha1.AnnotationDetachedBy] != owner(ids) {
			continue
		}
		if err := r.reattach(ctx, ids, n.Name); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(ids, Finalizer)
	err := r.opts.Client.Update(ctx, ids)
	if apierrors.IsForbidden(err) {
		// Its namespace left the allowed ones after the finalizer was set:
		// the chart no longer lets the controller write it there. Its
		// nodes are reattached; the finalizer is the operator's.
		key := owner(ids)
		msg := "the controller may not write IngressDaemonSets in this namespace: its nodes are reattached, remove the finalizer " + Finalizer + " by hand"
		if r.forbidden.Changed(key, msg) {
			r.log.Warn("ingressdaemonset finalizer left", "ingressdaemonset", key, "err", err)
			r.event(ids, corev1.EventTypeWarning, ReasonForbidden, "Finalize", "%s", msg)
		}
		return nil
	}
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	return nil
}

func (r *Reconciler) event(ids *v1alpha1.IngressDaemonSet, typ, reason, action, format string, args ...any) {
	if r.opts.Recorder != nil {
		r.opts.Recorder.Eventf(ids, nil, typ, reason, action, format, args...)
	}
}

// waitingMessage lists what each waiting node waits for, sorted by node.
func waitingMessage(w map[string]string) string {
	keys := slices.Sorted(maps.Keys(w))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+w[k])
	}
	return strings.Join(parts, "; ")
}

func equalStatus(a, b *v1alpha1.IngressDaemonSetStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Nodes != b.Nodes || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}
