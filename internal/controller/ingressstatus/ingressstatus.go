// Package ingressstatus is the Ingress-status reconciler: it publishes the
// load balancer's addresses in status.loadBalancer.ingress of every Ingress
// sluice serves, so that tools reading Ingress status (external-dns, kubectl,
// Argo CD health) see where the Ingress is reachable.
//
//	Ingress, IngressClasses, LoadBalancerBindings ─► Serving (pure) ─► Ingress status patch
//
// The addresses are those of the binding(s) of the Ingress's class only
// (Serving: the class's spec.parameters, else the bindings in the
// controller's namespace), so no namespace can put addresses on another's
// Ingresses. While they are not known (binding missing, no address yet,
// controller just started) the status is left as it is: it is never
// emptied by a blip. When an Ingress leaves our classes its status is
// cleared, but only if every address it lists is one of a binding of
// ours: another controller's addresses are never touched. The DNS
// controller uses the same Serving.
package ingressstatus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/routeclaims"
	"sluice.dev/sluice/internal/translate"
)

// Options configures a Reconciler.
type Options struct {
	// Client reads Ingresses, IngressClasses and bindings and patches
	// Ingress status. Required.
	Client client.Client
	// IngressClass is the class name sluice serves. Default "sluice".
	IngressClass string
	// IngressNginx also serves ingress-nginx classes; nil: off.
	IngressNginx *translate.IngressNginx
	// ControllerName is the IngressClass spec.controller sluice serves.
	// Default translate.ControllerName.
	ControllerName string
	// Namespace is the controller's namespace: its bindings serve the
	// classes without binding parameters. Empty: those get no addresses.
	Namespace string
	// HostOwnership and DefaultBackendNamespaces are the proxies'
	// translate.Options of the same names (tenancy): an Ingress refused
	// for every host it names gets no status.
	HostOwnership            string
	DefaultBackendNamespaces []string
	// ReadSecrets: the Ingress's TLS Secrets are read for the translation.
	// False (the default): none is read, and every Secret it names counts
	// as valid (translate.Options.SecretsUnread).
	ReadSecrets bool
	// Allowed filters the bindings that may lend addresses (see
	// ServingOptions.Allowed). Nil: every binding.
	Allowed func(*v1alpha1.LoadBalancerBinding) bool
	// Routes reads the HTTPRoutes that claim hosts too; nil: Ingresses
	// alone own hosts (Gateway API off).
	Routes *routeclaims.Reader
	// Logger: nil discards.
	Logger *slog.Logger
}

// Reconciler reconciles Ingress status.
type Reconciler struct {
	opts Options
	log  *slog.Logger
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// New returns a Reconciler.
func New(o Options) (*Reconciler, error) {
	if o.Client == nil {
		return nil, errors.New("creating ingress-status reconciler: Client is required")
	}
	o.IngressClass = cmp.Or(o.IngressClass, "sluice")
	o.ControllerName = cmp.Or(o.ControllerName, translate.ControllerName)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return &Reconciler{opts: o, log: o.Logger}, nil
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var ing networkingv1.Ingress
	if err := r.opts.Client.Get(ctx, req.NamespacedName, &ing); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading ingress %s: %w", req.NamespacedName, err)
	}
	var classes networkingv1.IngressClassList
	if err := r.opts.Client.List(ctx, &classes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing ingress classes: %w", err)
	}
	var bindings v1alpha1.LoadBalancerBindingList
	if err := r.opts.Client.List(ctx, &bindings); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing bindings: %w", err)
	}
	serving := NewServing(classes.Items, bindings.Items, ServingOptions{
		IngressClass: r.opts.IngressClass, ControllerName: r.opts.ControllerName, IngressNginx: r.opts.IngressNginx, Namespace: r.opts.Namespace, Allowed: r.opts.Allowed})
	cur := ing.Status.LoadBalancer.Ingress
	var want []networkingv1.IngressLoadBalancerIngress
	if serving.Serves(&ing) {
		ok, err := r.servable(ctx, &ing, classes.Items)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !ok {
			// Not written, and one written before is kept: a Service
			// missing for a moment must not empty it (and what reads it,
			// DNS).
			r.log.Debug("ingress status not written: nothing of the Ingress is served", "ingress", req.NamespacedName)
			return reconcile.Result{}, nil
		}
		addrs, known := serving.Addresses(&ing)
		if !known {
			r.log.Debug("ingress status kept: its load balancer's addresses are not known", "ingress", req.NamespacedName)
			return reconcile.Result{}, nil
		}
		want = StatusOf(addrs)
	} else if len(cur) == 0 || !subset(cur, StatusOf(serving.AllAddresses())) {
		return reconcile.Result{}, nil // not ours, and nothing of ours to clear
	}
	if equal(cur, want) {
		return reconcile.Result{}, nil
	}
	orig := ing.DeepCopy()
	ing.Status.LoadBalancer.Ingress = want
	if err := r.opts.Client.Status().Patch(ctx, &ing, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("writing status of ingress %s: %w", req.NamespacedName, err)
	}
	r.log.Info("ingress status", "ingress", req.NamespacedName, "addresses", addresses(want))
	return reconcile.Result{}, nil
}

// servable reports whether the proxies' own translation serves anything of
// ing: a rule, its default backend or a certificate. An Ingress of which
// nothing is served (translate.Fatal) gets no status, since an address there
// would claim it works. ing is translated alone, with its namespace's TLS
// Secrets and the host ownership of all Ingresses of our classes: path
// conflicts with other Ingresses do not count here (they are reported as
// Events by the problems reconciler), hosts owned by another namespace do.
func (r *Reconciler) servable(ctx context.Context, ing *networkingv1.Ingress, classes []networkingv1.IngressClass) (bool, error) {
	var secrets corev1.SecretList
	if r.opts.ReadSecrets {
		if err := r.opts.Client.List(ctx, &secrets, client.InNamespace(ing.Namespace)); err != nil {
			return false, fmt.Errorf("listing secrets of %s: %w", ing.Namespace, err)
		}
	}
	opts := translate.Options{IngressClass: r.opts.IngressClass, ControllerName: r.opts.ControllerName, IngressNginx: r.opts.IngressNginx,
		HostOwnership: r.opts.HostOwnership, DefaultBackendNamespaces: r.opts.DefaultBackendNamespaces,
		SecretsUnread: !r.opts.ReadSecrets}
	in := translate.Input{Ingresses: []*networkingv1.Ingress{ing}}
	for i := range classes {
		in.IngressClasses = append(in.IngressClasses, &classes[i])
	}
	if r.opts.HostOwnership != translate.HostOwnershipNone {
		var all networkingv1.IngressList
		if err := r.opts.Client.List(ctx, &all); err != nil {
			return false, fmt.Errorf("listing ingresses: %w", err)
		}
		// The proxies' decision (translate.HostOwnership): Ingresses of
		// every class of ours and attached HTTPRoutes claim hosts.
		claims := translate.Input{IngressClasses: in.IngressClasses}
		for i := range all.Items {
			if o := &all.Items[i]; o.DeletionTimestamp == nil {
				claims.Ingresses = append(claims.Ingresses, o)
			}
		}
		gw, gopts, err := r.opts.Routes.Read(ctx)
		if err != nil {
			return false, err
		}
		if claims.Secrets, err = r.opts.Routes.Secrets(ctx); err != nil {
			return false, err
		}
		claims.Gateway = gw
		withRoutes := opts
		withRoutes.Gateway = gopts
		in.Ownership = translate.HostOwnership(claims, withRoutes)
	}
	for i := range secrets.Items {
		if secrets.Items[i].Type == corev1.SecretTypeTLS {
			in.Secrets = append(in.Secrets, &secrets.Items[i])
		}
	}
	_, ps := translate.Build(in, opts)
	return !translate.Fatal(ps, ing.Namespace, ing.Name), nil
}

// StatusOf converts binding addresses to Ingress status entries, sorted by
// IP then hostname, without duplicates or empty entries.
func StatusOf(addrs []v1alpha1.LoadBalancerAddress) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, a := range addrs {
		if a.IP == "" && a.Hostname == "" {
			continue
		}
		out = append(out, networkingv1.IngressLoadBalancerIngress{IP: a.IP, Hostname: a.Hostname})
	}
	slices.SortFunc(out, compare)
	return slices.CompactFunc(out, func(a, b networkingv1.IngressLoadBalancerIngress) bool { return compare(a, b) == 0 })
}

func compare(a, b networkingv1.IngressLoadBalancerIngress) int {
	return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.Hostname, b.Hostname))
}

// subset: every entry of cur is one we publish (ports and errors aside).
func subset(cur, published []networkingv1.IngressLoadBalancerIngress) bool {
	for _, c := range cur {
		if !slices.ContainsFunc(published, func(p networkingv1.IngressLoadBalancerIngress) bool { return compare(c, p) == 0 }) {
			return false
		}
	}
	return true
}

func equal(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y networkingv1.IngressLoadBalancerIngress) bool {
		return compare(x, y) == 0 && len(x.Ports) == 0 && len(y.Ports) == 0
	})
}

func addresses(lbs []networkingv1.IngressLoadBalancerIngress) []string {
	out := make([]string, 0, len(lbs))
	for _, l := range lbs {
		out = append(out, cmp.Or(l.IP, l.Hostname))
	}
	return out
}
