package gatewaystatus

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
)

// GRPCRoutes (Options.GRPCRoutes): listed beside the HTTPRoutes, and their
// sluice entries of status.parents written alike.

// listGRPCRoutes lists the GRPCRoutes into in; nothing without
// Options.GRPCRoutes.
func (r *Reconciler) listGRPCRoutes(ctx context.Context, in *gateway.Input) (*gatewayv1.GRPCRouteList, error) {
	list := &gatewayv1.GRPCRouteList{}
	if !r.opts.GRPCRoutes {
		return list, nil
	}
	if err := r.opts.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing %T: %w", list, err)
	}
	for i := range list.Items {
		in.GRPCRoutes = append(in.GRPCRoutes, &list.Items[i])
	}
	return list, nil
}

// patchGRPCRoutes writes the GRPCRoutes' parent statuses of res.
func (r *Reconciler) patchGRPCRoutes(ctx context.Context, list *gatewayv1.GRPCRouteList, res gateway.Result, now metav1.Time) []error {
	ours := map[string][]gatewayv1.RouteParentStatus{}
	for _, st := range res.GRPCRoutes {
		ours[st.Namespace+"/"+st.Name] = st.Parents
	}
	var errs []error
	for i := range list.Items {
		rt := &list.Items[i]
		want := routeParents(rt.Status.Parents, ours[rt.Namespace+"/"+rt.Name], now)
		errs = append(errs, r.patch(ctx, rt, !equality.Semantic.DeepEqual(rt.Status.Parents, want), func() { rt.Status.Parents = want }))
	}
	return errs
}

// ServeGRPCRoutes sets Options.GRPCRoutes; call it before Setup (the
// manager finds out with gateway.GRPCRoutesServed once the other kinds are
// served).
func (r *Reconciler) ServeGRPCRoutes(served bool) { r.opts.GRPCRoutes = served }
