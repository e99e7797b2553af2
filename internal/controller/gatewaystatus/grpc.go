package gatewaystatus

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
)

// GRPCRoutes (Options.GRPCRoutes): listed beside the HTTPRoutes, and their
// sluice entries of status.parents written alike.

// listGRPCRoutes lists the GRPCRoutes into in; nothing without
// Options.GRPCRoutes or WatchGRPCRoutes.
func (r *Reconciler) listGRPCRoutes(ctx context.Context, in *gateway.Input) (*gatewayv1.GRPCRouteList, error) {
	list := &gatewayv1.GRPCRouteList{}
	if !r.opts.GRPCRoutes && !r.grpcLater.on.Load() {
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
	return patchEntries(ctx, r, list.Items, routeEntries(res.GRPCRoutes), func(rt *gatewayv1.GRPCRoute) *[]gatewayv1.RouteParentStatus { return &rt.Status.Parents },
		routeParents, now)
}

// ServeGRPCRoutes sets Options.GRPCRoutes; call it before Setup (the
// manager finds out with gateway.GRPCRoutesServed once the other kinds are
// served).
func (r *Reconciler) ServeGRPCRoutes(served bool) { r.opts.GRPCRoutes = served }

// WatchGRPCRoutes makes a reconciler set up without GRPCRoutes read them
// (their CRD was installed since): it watches them from now on, and the
// next reconcile reads them and writes their statuses. Call it after
// Setup, once.
func (r *Reconciler) WatchGRPCRoutes() error { return r.grpcLater.start("GRPCRoutes") }
