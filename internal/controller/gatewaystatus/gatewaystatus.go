// Package gatewaystatus is the Gateway API status reconciler: it writes the
// status of every GatewayClass of sluice's controller (Accepted), every
// Gateway of those classes (Accepted, Programmed, listener conditions and
// attachedRoutes, status.addresses from the class's load balancer binding)
// and sluice's entries of HTTPRoute and GRPCRoute status.parents
// (Accepted, ResolvedRefs, PartiallyInvalid) and of BackendTLSPolicy
// status.ancestors (Accepted, ResolvedRefs).
//
//	GatewayClasses, Gateways, HTTPRoutes, ReferenceGrants, Namespaces,
//	Services, bindings ─► gateway.Build (pure, as the proxies) ─► status patches
//
// The statuses are what the proxies' own translation decides, so they say
// what is served. The reconciler is thin and idempotent: one key for the
// whole set (a route's status depends on Gateways, grants and Services of
// other namespaces), a patch only where something changed, other
// controllers' route parent entries untouched.
package gatewaystatus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/gateway"
)

// Options configures a Reconciler.
type Options struct {
	// Client reads the objects and patches statuses. Required.
	Client client.Client
	// Namespace is the controller's namespace: its bindings serve the
	// GatewayClasses without parametersRef. Empty: those get no address.
	Namespace string
	// Gateway are the proxies' listener ports (gateway.Options HTTPPort,
	// HTTPSPort); the class and SecretsUnread are set here.
	Gateway gateway.Options
	// ReadSecrets: certificateRefs are checked against the TLS Secrets.
	// False: every referenced Secret counts as present.
	ReadSecrets bool
	// GRPCRoutes: the API server serves GRPCRoutes; they are read and
	// their statuses written (grpc.go).
	GRPCRoutes bool
	// BackendTLSPolicies: the API server serves BackendTLSPolicies; they
	// are read, with the ConfigMaps they name, and their statuses written
	// (backendtls.go).
	BackendTLSPolicies bool
	// Reader reads the ConfigMaps BackendTLSPolicies name, uncached (the
	// manager's API reader); nil means Client.
	Reader client.Reader
	// Allowed filters the bindings that may lend addresses; nil: every one.
	Allowed func(*v1alpha1.LoadBalancerBinding) bool
	// Now is the clock for LastTransitionTime; nil means time.Now.
	Now func() time.Time
	// Logger: nil discards.
	Logger *slog.Logger
}

// Reconciler writes Gateway API statuses.
type Reconciler struct {
	opts Options
	log  *slog.Logger
	// Kinds served only since after Setup (setup.go).
	grpcLater, tlsLater late
	caRefs              caRefs // backendtls.go
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// New returns a Reconciler.
func New(o Options) (*Reconciler, error) {
	if o.Client == nil {
		return nil, errors.New("creating gateway-status reconciler: Client is required")
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Reader == nil {
		o.Reader = o.Client
	}
	o.Gateway.GatewayClass = "" // every class of ours
	o.Gateway.SecretsUnread = !o.ReadSecrets
	return &Reconciler{opts: o, log: o.Logger}, nil
}

// Reconcile implements reconcile.Reconciler; every request means "all".
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	c := r.opts.Client
	var (
		classes  gatewayv1.GatewayClassList
		gws      gatewayv1.GatewayList
		routes   gatewayv1.HTTPRouteList
		grants   gatewayv1.ReferenceGrantList
		nss      corev1.NamespaceList
		svcs     corev1.ServiceList
		secrets  corev1.SecretList
		bindings v1alpha1.LoadBalancerBindingList
	)
	lists := []client.ObjectList{&classes, &gws, &routes, &grants, &nss, &svcs, &bindings}
	if r.opts.ReadSecrets {
		lists = append(lists, &secrets)
	}
	for _, l := range lists {
		if err := c.List(ctx, l); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	in := gateway.Input{}
	for i := range classes.Items {
		in.GatewayClasses = append(in.GatewayClasses, &classes.Items[i])
	}
	for i := range gws.Items {
		in.Gateways = append(in.Gateways, &gws.Items[i])
	}
	for i := range routes.Items {
		in.HTTPRoutes = append(in.HTTPRoutes, &routes.Items[i])
	}
	for i := range grants.Items {
		in.ReferenceGrants = append(in.ReferenceGrants, &grants.Items[i])
	}
	for i := range nss.Items {
		in.Namespaces = append(in.Namespaces, &nss.Items[i])
	}
	for i := range svcs.Items {
		in.Services = append(in.Services, &svcs.Items[i])
	}
	for i := range secrets.Items {
		if secrets.Items[i].Type == corev1.SecretTypeTLS {
			in.Secrets = append(in.Secrets, &secrets.Items[i])
		}
	}
	grpcs, err := r.listGRPCRoutes(ctx, &in) // grpc.go
	if err != nil {
		return reconcile.Result{}, err
	}
	policies, err := r.listBackendTLS(ctx, &in) // backendtls.go
	if err != nil {
		return reconcile.Result{}, err
	}
	res := gateway.Build(in, r.opts.Gateway)
	now := metav1.NewTime(r.opts.Now().Truncate(time.Second))
	var errs []error

	byName := map[string]*gatewayv1.GatewayClass{}
	for i := range classes.Items {
		byName[classes.Items[i].Name] = &classes.Items[i]
	}
	for _, st := range res.GatewayClasses {
		gc := byName[st.Name]
		want := classStatus(gc.Status, st.Status, now)
		errs = append(errs, r.patch(ctx, gc, !equality.Semantic.DeepEqual(gc.Status, want), func() { gc.Status = want }))
	}
	gwByKey := map[string]*gatewayv1.Gateway{}
	for i := range gws.Items {
		gwByKey[gws.Items[i].Namespace+"/"+gws.Items[i].Name] = &gws.Items[i]
	}
	// Each Gateway's binding(s); with spec.gatewayAddresses, each Gateway
	// holds one address of its own (addresses.go).
	bindingsOf := map[*gatewayv1.Gateway][]*v1alpha1.LoadBalancerBinding{}
	accepted := map[*gatewayv1.Gateway]bool{}
	served := make([]*gatewayv1.Gateway, 0, len(res.Gateways))
	for _, st := range res.Gateways {
		gw := gwByKey[st.Namespace+"/"+st.Name]
		bindingsOf[gw] = classBindings(byName[string(gw.Spec.GatewayClassName)], bindings.Items, r.opts.Namespace, r.opts.Allowed)
		accepted[gw] = acceptedIn(st.Status)
		served = append(served, gw)
	}
	own := assignAddresses(served, func(gw *gatewayv1.Gateway) bool { return accepted[gw] },
		func(gw *gatewayv1.Gateway) []netip.Addr { return addressPool(bindingsOf[gw]) })
	for _, st := range res.Gateways {
		gw := gwByKey[st.Namespace+"/"+st.Name]
		var addrs []v1alpha1.LoadBalancerAddress
		for _, b := range bindingsOf[gw] {
			addrs = append(addrs, b.Status.Addresses...)
		}
		var why *metav1.Condition // why a Gateway has no address
		asks := len(gateway.RequestedAddresses(gw)) > 0
		if msg, ok := own.unusable[gw]; ok {
			addrs, why = nil, &metav1.Condition{Reason: string(gatewayv1.GatewayReasonAddressNotUsable), Message: msg}
		} else if asks || len(addressPool(bindingsOf[gw])) > 0 {
			addrs, why = nil, &metav1.Condition{Reason: string(gatewayv1.GatewayReasonAddressNotAssigned),
				Message: "every address of the LoadBalancerBinding's spec.gatewayAddresses is held by an older Gateway"}
			if a, ok := own.assigned[gw]; ok {
				addrs = []v1alpha1.LoadBalancerAddress{{IP: a.String()}}
			}
		}
		want := gatewayStatus(gw.Status, st.Status, addrs, why, now)
		errs = append(errs, r.patch(ctx, gw, !equality.Semantic.DeepEqual(gw.Status, want), func() { gw.Status = want }))
	}
	errs = append(errs, patchEntries(ctx, r, routes.Items, routeEntries(res.HTTPRoutes),
		func(rt *gatewayv1.HTTPRoute) *[]gatewayv1.RouteParentStatus { return &rt.Status.Parents }, routeParents, now)...)
	errs = append(errs, r.patchGRPCRoutes(ctx, grpcs, res, now)...)
	errs = append(errs, r.patchBackendTLS(ctx, policies, res, now)...)
	return reconcile.Result{}, errors.Join(errs...)
}

// patch writes obj's status when changed (set applies the new status to
// obj). A vanished object is not an error.
func (r *Reconciler) patch(ctx context.Context, obj client.Object, changed bool, set func()) error {
	if !changed {
		return nil
	}
	orig, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("copying %T", obj)
	}
	set()
	if err := r.opts.Client.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing status of %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	r.log.Info("gateway api status", "kind", fmt.Sprintf("%T", obj), "object", obj.GetNamespace()+"/"+obj.GetName())
	return nil
}

// classBindings returns the binding(s) serving a class: its
// parametersRef's LoadBalancerBinding, else every binding in the
// controller's namespace.
func classBindings(gc *gatewayv1.GatewayClass, bindings []v1alpha1.LoadBalancerBinding, ns string, allowed func(*v1alpha1.LoadBalancerBinding) bool) []*v1alpha1.LoadBalancerBinding {
	var out []*v1alpha1.LoadBalancerBinding
	for i := range bindings {
		b := &bindings[i]
		if allowed != nil && !allowed(b) {
			continue
		}
		if gc != nil && gc.Spec.ParametersRef != nil {
			p := gc.Spec.ParametersRef
			if p.Namespace == nil || string(*p.Namespace) != b.Namespace || p.Name != b.Name {
				continue
			}
		} else if ns == "" || b.Namespace != ns {
			continue
		}
		out = append(out, b)
	}
	return out
}
