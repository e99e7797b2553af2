// Package routeclaims reads the Gateway API objects that claim hosts
// (HTTPRoutes attached to Gateways of sluice's GatewayClasses) for the
// reconcilers that decide host ownership as the proxies do: Ingress status
// (internal/controller/ingressstatus) and problem Events
// (internal/controller/problems).
//
//	GatewayClasses, Gateways, HTTPRoutes, ReferenceGrants, Namespaces
//	(and TLS Secrets) ─► Read ─► translate.Input.Gateway, Options.Gateway
//	─► translate.HostOwnership / translate.Build (pure, as the proxies)
//
// A Reader lists nothing until Serve says the API server serves the
// Gateway API CRDs (the manager finds out, and looks again while they are
// absent), so a cluster without them works as before: Ingresses alone
// own hosts.
package routeclaims

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/translate"
)

// Options configures a Reader.
type Options struct {
	// Client lists the objects. Required.
	Client client.Reader
	// Gateway are the proxies' listener ports (gateway.Options HTTPPort,
	// HTTPSPort); every GatewayClass of sluice's controller claims.
	Gateway gateway.Options
	// ReadSecrets: certificateRefs are checked against the TLS Secrets
	// (an HTTPS listener without its certificate takes no routes). False:
	// every referenced Secret counts as present.
	ReadSecrets bool
}

// Reader reads the Gateway API input of host ownership. A nil *Reader
// reads nothing.
type Reader struct {
	opts      Options
	served    atomic.Bool
	grpc      atomic.Bool
	ready     chan struct{} // closed by the first Serve
	readyOnce sync.Once
}

// New returns a Reader that reads nothing until Serve.
func New(o Options) *Reader {
	o.Gateway.GatewayClass = ""
	o.Gateway.SecretsUnread = !o.ReadSecrets
	return &Reader{opts: o, ready: make(chan struct{})}
}

// Serve records that the API server serves the Gateway API CRDs.
func (r *Reader) Serve() {
	if r != nil {
		r.served.Store(true)
		r.readyOnce.Do(func() { close(r.ready) })
	}
}

// Served is closed once Serve was called (a reconciler then watches the
// Gateway API objects); for a nil Reader it is never closed.
func (r *Reader) Served() <-chan struct{} {
	if r == nil {
		return nil
	}
	return r.ready
}

// GRPCRoutesServed reports what ServeGRPCRoutes last recorded.
func (r *Reader) GRPCRoutesServed() bool {
	return r != nil && r.grpc.Load()
}

// ServeGRPCRoutes records whether the API server serves GRPCRoutes too:
// then they claim hosts as HTTPRoutes do.
func (r *Reader) ServeGRPCRoutes(served bool) {
	if r != nil {
		r.grpc.Store(served)
	}
}

// Read returns the Gateway API objects and the translate.Options.Gateway
// value to decide host ownership with; the zero input and nil for a nil
// Reader or before Serve.
func (r *Reader) Read(ctx context.Context) (translate.GatewayInput, *gateway.Options, error) {
	var in translate.GatewayInput
	if r == nil || !r.served.Load() {
		return in, nil, nil
	}
	var (
		classes gatewayv1.GatewayClassList
		gws     gatewayv1.GatewayList
		routes  gatewayv1.HTTPRouteList
		grants  gatewayv1.ReferenceGrantList
		nss     corev1.NamespaceList
	)
	for _, l := range []client.ObjectList{&classes, &gws, &routes, &grants, &nss} {
		if err := r.opts.Client.List(ctx, l); err != nil {
			return in, nil, fmt.Errorf("listing %T for host ownership: %w", l, err)
		}
	}
	for i := range classes.Items {
		in.GatewayClasses = append(in.GatewayClasses, &classes.Items[i])
	}
	for i := range gws.Items {
		in.Gateways = append(in.Gateways, &gws.Items[i])
	}
	for i := range routes.Items {
		if routes.Items[i].DeletionTimestamp == nil {
			in.HTTPRoutes = append(in.HTTPRoutes, &routes.Items[i])
		}
	}
	for i := range grants.Items {
		in.ReferenceGrants = append(in.ReferenceGrants, &grants.Items[i])
	}
	for i := range nss.Items {
		in.Namespaces = append(in.Namespaces, &nss.Items[i])
	}
	if r.grpc.Load() {
		var grpcs gatewayv1.GRPCRouteList
		if err := r.opts.Client.List(ctx, &grpcs); err != nil {
			return in, nil, fmt.Errorf("listing %T for host ownership: %w", &grpcs, err)
		}
		for i := range grpcs.Items {
			if grpcs.Items[i].DeletionTimestamp == nil {
				in.GRPCRoutes = append(in.GRPCRoutes, &grpcs.Items[i])
			}
		}
	}
	opts := r.opts.Gateway
	return in, &opts, nil
}

// Secrets lists the TLS Secrets the Gateway listeners' certificates are
// checked against (only with Options.ReadSecrets and after Serve); the
// caller adds them to translate.Input.Secrets.
func (r *Reader) Secrets(ctx context.Context) ([]*corev1.Secret, error) {
	if r == nil || !r.served.Load() || !r.opts.ReadSecrets {
		return nil, nil
	}
	var list corev1.SecretList
	if err := r.opts.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing secrets for host ownership: %w", err)
	}
	var out []*corev1.Secret
	for i := range list.Items {
		if list.Items[i].Type == corev1.SecretTypeTLS {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}
