// Package managedlb is the reconciler of managed AWS load balancers
// (spec.provider.aws.managed): it creates the load balancer, target group
// and listeners a binding asks for, keeps them as the spec says (in place;
// replacing only what AWS cannot change, only when confirmed, new first),
// attaches the ACM certificates of the hosts of the binding's Ingresses,
// and deletes what it created once the binding is deleted and its targets
// are deregistered. It is thin: read → managed.Build → apply → status.
//
//	binding, Ingresses ─► managed.Select + managed.DesiredFor ─┐
//	AWS (tags) ─► Cloud.Find ────────────────────────────────┴► managed.Build ─► Cloud.Apply ─► status.managed, Events
//
// The target group carries sluice.dev/cluster and sluice.dev/frontend, so
// the binding reconciler discovers it and registers the targets (through
// the drain handshake); status.addresses (DNS name, canonical hosted zone)
// follow from the group's load balancer as for any AWS binding.
package managedlb

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	"sluice.dev/sluice/internal/controller/ingressstatus"
	"sluice.dev/sluice/internal/lb/aws/managed"
)

// Finalizer holds a deleted managed binding until what sluice created for
// it is deleted. It is released after binding.Finalizer (the targets'
// deregistration through the drain handshake).
const Finalizer = "sluice.dev/managed-load-balancer"

// Cloud reads and changes a region's ELBv2 and ACM.
type Cloud interface {
	// Find lists what exists for a binding (managed.Found).
	Find(ctx context.Context, cluster, frontend, uid string) (managed.Found, error)
	// Apply runs one action.
	Apply(ctx context.Context, d managed.Desired, a managed.Action) error
	// Certificates lists the ACM certificates.
	Certificates(ctx context.Context) ([]managed.Cert, error)
	// Subnets lists the subnets carrying every one of tags.
	Subnets(ctx context.Context, tags map[string]string) ([]managed.Subnet, error)
}

// Recorder emits Kubernetes Events.
type Recorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Options configures a Reconciler.
type Options struct {
	// Client reads bindings, Ingresses and IngressClasses and writes
	// binding status and finalizers. Required.
	Client client.Client
	// Clouds returns the Cloud of a region ("" : the environment's).
	// Required.
	Clouds func(ctx context.Context, region string) (Cloud, error)
	// Cluster is the --aws-cluster name everything is tagged with.
	// Empty: managed bindings get a condition saying it is required.
	Cluster string
	// Serving selects the Ingresses of a binding (as for Ingress status).
	Serving ingressstatus.ServingOptions
	// Allowed says which bindings the controller may act on (the binding
	// reconciler reports the others). Nil: every binding.
	Allowed func(*v1alpha1.LoadBalancerBinding) bool
	// Recorder emits Events. Nil: none.
	Recorder Recorder
	// Registerer receives the metrics. Nil: not registered.
	Registerer prometheus.Registerer
	// Logger: nil discards.
	Logger *slog.Logger
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
	// Recheck is how often certificates and drift are checked when
	// nothing changes. Default 10m.
	Recheck time.Duration
	// Settle is the requeue while resources are being created or an old
	// set waits for the new one. Default 5s.
	Settle time.Duration
	// Rounds bounds the plan → apply rounds of one reconcile (creates
	// need a second round for the listeners). Default 4.
	Rounds int
}

// Reconciler reconciles managed load balancers.
type Reconciler struct {
	opts    Options
	log     *slog.Logger
	actions *prometheus.CounterVec
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// New returns a Reconciler.
func New(o Options) (*Reconciler, error) {
	if o.Client == nil || o.Clouds == nil {
		return nil, errors.New("creating managed load balancer reconciler: Client and Clouds are required")
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Recheck = cmp.Or(o.Recheck, 10*time.Minute)
	o.Settle = cmp.Or(o.Settle, 5*time.Second)
	o.Rounds = cmp.Or(o.Rounds, 4)
	actions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_managed_lb_actions_total",
		Help: "ELBv2 actions on managed load balancers by kind and outcome (ok, error, refused).",
	}, []string{"kind", "outcome"})
	if o.Registerer != nil {
		if err := o.Registerer.Register(actions); err != nil {
			return nil, fmt.Errorf("registering managed load balancer metrics: %w", err)
		}
	}
	return &Reconciler{opts: o, log: o.Logger, actions: actions}, nil
}

// Actions is the sluice_managed_lb_actions_total counter (for tests).
func (r *Reconciler) Actions() *prometheus.CounterVec { return r.actions }

// Managed reports whether a binding asks for a managed load balancer.
func Managed(b *v1alpha1.LoadBalancerBinding) bool {
	return b.Spec.Provider.AWS != nil && b.Spec.Provider.AWS.Managed != nil
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var b v1alpha1.LoadBalancerBinding
	if err := r.opts.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading binding %s: %w", req.NamespacedName, err)
	}
	if r.opts.Allowed != nil && !r.opts.Allowed(&b) {
		// The binding reconciler reports it; a deleted one only loses
		// our finalizer (deleting its load balancer would be acting on it).
		if b.DeletionTimestamp != nil {
			return reconcile.Result{}, r.release(ctx, &b)
		}
		return reconcile.Result{}, nil
	}
	if !Managed(&b) {
		// Never managed, or managed dropped from the spec: what was
		// created stays (an edit never deletes a load balancer); the
		// finalizer goes.
		return reconcile.Result{}, r.release(ctx, &b)
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
	if r.opts.Cluster == "" {
		err := errors.New("a managed load balancer needs the controller's --aws-cluster (everything sluice creates is tagged with it)")
		return reconcile.Result{}, r.writeStatus(ctx, &b, nil, "NoCluster", err)
	}
	cloud, err := r.opts.Clouds(ctx, b.Spec.Provider.AWS.Region)
	if err != nil {
		return r.failed(ctx, &b, nil, "ProviderError", fmt.Errorf("creating aws clients: %w", err))
	}
	return r.sync(ctx, &b, cloud)
}

// sync runs plan → apply rounds until nothing is left to do (or Rounds).
func (r *Reconciler) sync(ctx context.Context, b *v1alpha1.LoadBalancerBinding, cloud Cloud) (reconcile.Result, error) {
	hosts, err := r.hosts(ctx, b)
	if err != nil {
		return reconcile.Result{}, err
	}
	found, err := cloud.Find(ctx, r.opts.Cluster, b.Name, string(b.UID))
	if err != nil {
		return r.failed(ctx, b, nil, "ProviderError", err)
	}
	st := &v1alpha1.ManagedStatus{}
	var chosen []string
	if secure(b) {
		all, err := cloud.Certificates(ctx)
		if err != nil {
			return r.failed(ctx, b, nil, "CertificatesUnavailable", err)
		}
		sel := managed.Select(hosts, all, r.opts.Now(), currentDefault(found))
		chosen = sel.Certificates
		st.Certificates = sel.Certificates
		st.HostsWithoutCertificate = append(slices.Clone(sel.Uncovered), sel.Excess...)
		slices.Sort(st.HostsWithoutCertificate)
		if len(sel.Excess) > 0 {
			r.event(b, corev1.EventTypeWarning, "TooManyCertificates", fmt.Sprintf("more than %d certificates needed; hosts left without one: %s",
				managed.MaxCertificates, strings.Join(sel.Excess, ", ")))
		}
	}
	d, err := managed.DesiredFor(b, r.opts.Cluster, chosen)
	if err != nil {
		return reconcile.Result{}, r.writeStatus(ctx, b, st, "InvalidSpec", err)
	}
	if len(d.SubnetTags) > 0 {
		found, err := cloud.Subnets(ctx, d.SubnetTags)
		if err != nil {
			return r.failed(ctx, b, st, "ProviderError", err)
		}
		subnets, vpc, err := managed.PickSubnets(found)
		if err != nil {
			return r.failed(ctx, b, st, "SubnetsNotFound", fmt.Errorf("finding subnets tagged %v: %w", d.SubnetTags, err))
		}
		d.Subnets = subnets
		if d.VPCID == "" {
			d.VPCID = vpc
		}
	}
	var plan managed.Plan
	for round := range r.opts.Rounds {
		if round > 0 {
			if found, err = cloud.Find(ctx, r.opts.Cluster, b.Name, string(b.UID)); err != nil {
				return r.failed(ctx, b, st, "ProviderError", err)
			}
		}
		plan = managed.Build(d, found)
		if len(plan.Actions) == 0 {
			break
		}
		if err := r.apply(ctx, b, cloud, d, plan.Actions); err != nil {
			return r.failed(ctx, b, st, "ProviderError", err)
		}
	}
	st.LoadBalancerARN, st.TargetGroupARN = plan.Current.LoadBalancer, plan.Current.TargetGroup
	for _, l := range found.Listeners {
		if l.LoadBalancer == plan.Current.LoadBalancer {
			st.ListenerARNs = append(st.ListenerARNs, l.ARN)
		}
	}
	switch {
	case len(plan.Refused) > 0:
		for range plan.Refused {
			r.actions.WithLabelValues("Replace", "refused").Inc()
		}
		msg := strings.Join(plan.Refused, "; ")
		if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionLoadBalancerManaged); c == nil || c.Reason != "ReplaceNotConfirmed" || c.ObservedGeneration != b.Generation {
			r.event(b, corev1.EventTypeWarning, "ReplaceNotConfirmed", msg)
		}
		return reconcile.Result{RequeueAfter: r.opts.Recheck}, r.writeStatus(ctx, b, st, "ReplaceNotConfirmed", errors.New(msg))
	case len(plan.Actions) > 0 || len(plan.Waiting) > 0:
		msg := strings.Join(append(plan.Waiting, "changes still in progress"), "; ")
		return reconcile.Result{RequeueAfter: r.opts.Settle}, r.writeStatus(ctx, b, st, "Progressing", errors.New(msg))
	case secure(b) && len(chosen) == 0:
		msg := "no certificate chosen (no Ingress host of the binding's classes has a usable ACM certificate): the TLS/HTTPS listeners wait"
		return reconcile.Result{RequeueAfter: r.opts.Recheck}, r.writeStatus(ctx, b, st, "CertificatesMissing", errors.New(msg))
	case len(st.HostsWithoutCertificate) > 0:
		msg := "no usable ACM certificate (ISSUED, valid for 7 more days) covers " + strings.Join(st.HostsWithoutCertificate, ", ")
		return reconcile.Result{RequeueAfter: r.opts.Recheck}, r.writeStatus(ctx, b, st, "CertificatesMissing", errors.New(msg))
	}
	return reconcile.Result{RequeueAfter: r.opts.Recheck}, r.writeStatus(ctx, b, st, "", nil)
}

// apply runs actions in order, stopping at the first error.
func (r *Reconciler) apply(ctx context.Context, b *v1alpha1.LoadBalancerBinding, cloud Cloud, d managed.Desired, actions []managed.Action) error {
	for _, a := range actions {
		err := cloud.Apply(ctx, d, a)
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		r.actions.WithLabelValues(string(a.Kind), outcome).Inc()
		if err != nil {
			return err
		}
		r.log.Info("managed load balancer changed", "binding", b.Namespace+"/"+b.Name, "action", a.String())
		r.event(b, corev1.EventTypeNormal, string(a.Kind), a.String())
	}
	return nil
}

// finalize deletes what sluice created once the targets are deregistered
// (binding.Finalizer gone), then releases the binding.
func (r *Reconciler) finalize(ctx context.Context, b *v1alpha1.LoadBalancerBinding) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(b, Finalizer) {
		return reconcile.Result{}, nil
	}
	if controllerutil.ContainsFinalizer(b, binding.Finalizer) {
		return reconcile.Result{RequeueAfter: r.opts.Settle}, nil // the drain handshake first
	}
	if r.opts.Cluster == "" {
		return reconcile.Result{}, r.release(ctx, b)
	}
	cloud, err := r.opts.Clouds(ctx, b.Spec.Provider.AWS.Region)
	if err != nil {
		return r.failed(ctx, b, b.Status.Managed, "ProviderError", fmt.Errorf("creating aws clients: %w", err))
	}
	found, err := cloud.Find(ctx, r.opts.Cluster, b.Name, string(b.UID))
	if err != nil {
		return r.failed(ctx, b, b.Status.Managed, "ProviderError", err)
	}
	if err := r.apply(ctx, b, cloud, managed.Desired{}, managed.Teardown(found)); err != nil {
		return r.failed(ctx, b, b.Status.Managed, "ProviderError", fmt.Errorf("deleting the managed load balancer: %w", err))
	}
	return reconcile.Result{}, r.release(ctx, b)
}

// release removes the finalizer.
func (r *Reconciler) release(ctx context.Context, b *v1alpha1.LoadBalancerBinding) error {
	if !controllerutil.ContainsFinalizer(b, Finalizer) {
		return nil
	}
	orig := b.DeepCopy()
	controllerutil.RemoveFinalizer(b, Finalizer)
	if err := r.opts.Client.Patch(ctx, b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer from binding %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

// hosts are the hosts of the Ingresses the binding serves.
func (r *Reconciler) hosts(ctx context.Context, b *v1alpha1.LoadBalancerBinding) ([]string, error) {
	var ings networkingv1.IngressList
	if err := r.opts.Client.List(ctx, &ings); err != nil {
		return nil, fmt.Errorf("listing ingresses: %w", err)
	}
	var classes networkingv1.IngressClassList
	if err := r.opts.Client.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing ingress classes: %w", err)
	}
	serving := ingressstatus.NewServing(classes.Items, []v1alpha1.LoadBalancerBinding{*b}, r.opts.Serving)
	return serving.Hosts(b, ings.Items), nil
}

// currentDefault is the default certificate of the newest set's first
// TLS/HTTPS listener ("" when none): Select keeps it first.
func currentDefault(f managed.Found) string {
	var newest int64 = -1
	var lbARN string
	for _, l := range f.LoadBalancers {
		if l.Set > newest {
			newest, lbARN = l.Set, l.ARN
		}
	}
	for _, l := range f.Listeners {
		if l.LoadBalancer == lbARN && len(l.Certificates) > 0 {
			return l.Certificates[0]
		}
	}
	return ""
}

func secure(b *v1alpha1.LoadBalancerBinding) bool {
	return slices.ContainsFunc(b.Spec.Provider.AWS.Managed.Listeners, func(l v1alpha1.ManagedListener) bool {
		return l.Protocol == "TLS" || l.Protocol == "HTTPS"
	})
}

// failed reports an error (condition, Event) and returns it for backoff.
func (r *Reconciler) failed(ctx context.Context, b *v1alpha1.LoadBalancerBinding, st *v1alpha1.ManagedStatus, reason string, err error) (reconcile.Result, error) {
	r.log.Warn("managed load balancer", "binding", b.Namespace+"/"+b.Name, "err", err)
	r.event(b, corev1.EventTypeWarning, reason, err.Error())
	if serr := r.writeStatus(ctx, b, st, reason, err); serr != nil {
		err = errors.Join(err, serr)
	}
	return reconcile.Result{}, err
}

// writeStatus patches status.managed and the LoadBalancerManaged
// condition (cause nil: True).
func (r *Reconciler) writeStatus(ctx context.Context, b *v1alpha1.LoadBalancerBinding, st *v1alpha1.ManagedStatus, reason string, cause error) error {
	conds := slices.Clone(b.Status.Conditions)
	c := metav1.Condition{Type: v1alpha1.ConditionLoadBalancerManaged, Status: metav1.ConditionTrue, Reason: "InSync",
		Message: "the load balancer, listeners and target group match the spec", ObservedGeneration: b.Generation}
	if cause != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, truncate(cause.Error())
	}
	meta.SetStatusCondition(&conds, c)
	if st == nil {
		st = b.Status.Managed
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds, "managed": st}})
	if err != nil {
		return fmt.Errorf("encoding status of binding %s/%s: %w", b.Namespace, b.Name, err)
	}
	if err := r.opts.Client.Status().Patch(ctx, b, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing status of binding %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

func truncate(s string) string {
	if len(s) <= 1024 {
		return s
	}
	return strings.ToValidUTF8(s[:1021], "") + "..."
}

func (r *Reconciler) event(b *v1alpha1.LoadBalancerBinding, typ, reason, note string) {
	if r.opts.Recorder != nil {
		r.opts.Recorder.Eventf(b, nil, typ, reason, "ManageLoadBalancer", "%s", note)
	}
}
