package manager

import (
	"context"
	"fmt"
	"log/slog"
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
		grpc := gateway.GRPCRoutesServed(disco)
		routes.ServeGRPCRoutes(grpc)
		routes.Serve() // host ownership counts attached routes from now on
		r.ServeGRPCRoutes(grpc)
		r.ServeBackendTLSPolicies(gateway.BackendTLSPoliciesServed(disco))
		if err := r.Setup(mgr); err != nil || grpc {
			return err
		}
		// The GRPCRoute CRD is optional: looked for every gatewayCRDPoll.
		log.Info("GRPCRoutes are not served by the API server; their statuses are written once they are", "recheck", gatewayCRDPoll)
		err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			return waitGRPCRoutes(ctx, disco, gatewayCRDPoll, log, func() error {
				routes.ServeGRPCRoutes(true)
				return r.WatchGRPCRoutes()
			})
		}))
		if err != nil {
			return fmt.Errorf("adding the GRPCRoute CRD watch: %w", err)
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

// waitGRPCRoutes calls watch once the API server serves GRPCRoutes
// (looking every poll), then returns; nil also when ctx ends first.
func waitGRPCRoutes(ctx context.Context, disco discovery.DiscoveryInterface, poll time.Duration, log *slog.Logger, watch func() error) error {
	return waitServed(ctx, poll, func() bool { return gateway.GRPCRoutesServed(disco) }, func() error {
		log.Info("GRPCRoutes are served by the API server: writing their statuses")
		return watch()
	})
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
