package manager

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/gatewaystatus"
	"sluice.dev/sluice/internal/controller/routeclaims"

	"sluice.dev/sluice/internal/gateway"
)

// gatewayCRDPoll is how often a controller without the Gateway API CRDs
// looks again.
const gatewayCRDPoll = 30 * time.Second

// setupGateway registers the Gateway API status reconciler once the API
// server serves the Gateway API CRDs: at once if it does, else from a
// runnable that looks every gatewayCRDPoll (logging once), so a cluster
// without them neither fails the controller nor restarts it.
func setupGateway(mgr ctrl.Manager, o Options, allowed func(*v1alpha1.LoadBalancerBinding) bool, routes *routeclaims.Reader) error {
	r, err := gatewaystatus.New(gatewaystatus.Options{
		Client:      mgr.GetClient(),
		Namespace:   o.Namespace,
		Gateway:     *o.Gateway,
		ReadSecrets: o.ReadTLSSecrets,
		Reader:      mgr.GetAPIReader(),
		Allowed:     allowed,
		Logger:      o.Logger.With("controller", "gatewaystatus"),
	})
	if err != nil {
		return err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(o.Config)
	if err != nil {
		return fmt.Errorf("creating discovery client: %w", err)
	}
	log := o.Logger.With("controller", "gatewaystatus")
	setup := func() error {
		grpc, tls := gateway.GRPCRoutesServed(disco), gateway.BackendTLSPoliciesServed(disco)
		routes.ServeGRPCRoutes(grpc)
		routes.Serve() // host ownership counts attached routes from now on
		r.ServeGRPCRoutes(grpc)
		r.ServeBackendTLSPolicies(tls)
		if err := r.Setup(mgr); err != nil {
			return err
		}
		// The GRPCRoute and BackendTLSPolicy CRDs are optional: looked
		// for every gatewayCRDPoll.
		var late []lateKind
		if !grpc {
			late = append(late, lateKind{"GRPCRoutes", func() bool { return gateway.GRPCRoutesServed(disco) }, func() error {
				routes.ServeGRPCRoutes(true)
				return r.WatchGRPCRoutes()
			}})
		}
		if !tls {
			late = append(late, lateKind{"BackendTLSPolicies", func() bool { return gateway.BackendTLSPoliciesServed(disco) }, r.WatchBackendTLSPolicies})
		}
		if len(late) == 0 {
			return nil
		}
		for _, k := range late {
			log.Info(k.name+" are not served by the API server; their statuses are written once they are", "recheck", gatewayCRDPoll)
		}
		err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			return waitLate(ctx, gatewayCRDPoll, log, late)
		}))
		if err != nil {
			return fmt.Errorf("adding the optional Gateway API CRDs' watch: %w", err)
		}
		return nil
	}
	if ok, _ := gatewayInstalled(disco); ok {
		return setup()
	}
	log.Warn("the Gateway API CRDs (gateway.networking.k8s.io/v1 GatewayClass, Gateway, HTTPRoute, ReferenceGrant) are not installed; Gateway API statuses are written once they are", "recheck", gatewayCRDPoll)
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return waitGatewayCRDs(ctx, disco, gatewayCRDPoll, log, setup)
	}))
	if err != nil {
		return fmt.Errorf("adding the Gateway API CRD watch: %w", err)
	}
	return nil
}

// waitGatewayCRDs calls setup once the CRDs are served (looking every
// poll), then returns; nil also when ctx ends first.
func waitGatewayCRDs(ctx context.Context, disco discovery.DiscoveryInterface, poll time.Duration, log *slog.Logger, setup func() error) error {
	return waitServed(ctx, poll, func() bool { ok, _ := gatewayInstalled(disco); return ok }, func() error {
		log.Info("the Gateway API CRDs are installed: writing Gateway API statuses")
		if err := setup(); err != nil {
			return fmt.Errorf("setting up the gateway-status controller: %w", err)
		}
		return nil
	})
}

// lateKind is an optional Gateway API kind the API server did not serve
// when the reconciler was set up.
type lateKind struct {
	name   string // plural, for the log
	served func() bool
	watch  func() error // once served
}

// waitLate calls each kind's watch once the API server serves it (looking
// every poll), and returns once every one is watched, or with the first
// watch's error; nil also when ctx ends first.
func waitLate(ctx context.Context, poll time.Duration, log *slog.Logger, late []lateKind) error {
	for len(late) > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
		var err error
		late = slices.DeleteFunc(late, func(k lateKind) bool {
			if err != nil || !k.served() {
				return false
			}
			log.Info(k.name + " are served by the API server: writing their statuses")
			err = k.watch()
			return true
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// waitServed calls then once served says yes, looking every poll.
func waitServed(ctx context.Context, poll time.Duration, served func() bool, then func() error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
		if served() {
			return then()
		}
	}
}

func gatewayInstalled(disco discovery.DiscoveryInterface) (bool, error) {
	return gateway.Served(disco)
}
