// Package manager wires sluice's reconcilers into one leader-elected
// controller-runtime manager: shared caches of Pods, Nodes, Ingresses,
// IngressClasses and LoadBalancerBindings; the binding, pod-status and
// ingress-status reconcilers; metrics and health endpoints. It is the
// control plane's composition root, called by `sluice controller`.
//
//	binding reconciler ─► snapshot.Store ─► Notifier ─► pod-status reconciler
//	ingress-status reconciler (independent)
//	DNS reconciler (independent, when DNS is configured)
//	ingress-problems reconciler (independent): translation problems as Events
//	ingressdaemonset reconciler (when enabled): per-node replicas, reads snapshot.Store to see nodes drain
package manager

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/admission"
	"sluice.dev/sluice/internal/controller/binding"
	dnsctl "sluice.dev/sluice/internal/controller/dns"
	"sluice.dev/sluice/internal/controller/ingressstatus"
	"sluice.dev/sluice/internal/controller/lbcache"
	"sluice.dev/sluice/internal/controller/managedlb"
	"sluice.dev/sluice/internal/controller/notices"
	"sluice.dev/sluice/internal/controller/podstatus"
	"sluice.dev/sluice/internal/controller/problems"
	"sluice.dev/sluice/internal/controller/routeclaims"
	"sluice.dev/sluice/internal/controller/snapshot"
	dnsmodel "sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/lb/aws"
	"sluice.dev/sluice/internal/lb/haproxy"
	"sluice.dev/sluice/internal/translate"
)

// Options configures New.
type Options struct {
	// Config reaches the API server. Required.
	Config *rest.Config
	// IngressClass is the class whose Ingresses get status. Default "sluice".
	IngressClass string
	// IngressNginx, when non-nil, also serves ingress-nginx classes
	// (--ingress-nginx-compat): their Ingresses get status and Events.
	IngressNginx *translate.IngressNginx
	// AllowEndpointsWithoutPod matches the proxies' flag of the name, so
	// the problems reconciler reports the endpoints they refuse.
	AllowEndpointsWithoutPod bool
	// ForwardAuthAnyURL matches the proxies' --forward-auth-any-url, so
	// the Events say what they do.
	ForwardAuthAnyURL bool
	// ReadTLSSecrets: the Ingress status and problem reconcilers read TLS
	// Secrets (--read-tls-secrets), and a missing or invalid one is an
	// Event on its Ingress. False: no Secret is read or cached.
	ReadTLSSecrets bool
	// LeaderElection on a Lease named LeaderElectionID in
	// LeaderElectionNamespace (default: the pod's namespace in-cluster).
	LeaderElection          bool
	LeaderElectionNamespace string
	LeaderElectionID        string // default "sluice-controller"
	// MetricsAddress serves /metrics ("0" disables). Default ":9091".
	MetricsAddress string
	// HealthAddress serves /healthz and /readyz ("0" disables). Default ":9092".
	HealthAddress string
	// SyncPeriod is the informers' resync period. Default 10m.
	SyncPeriod time.Duration
	// FastRequeue and SlowRequeue are the binding poll intervals while
	// targets move and when they are settled. Defaults 1s and 10s.
	FastRequeue, SlowRequeue time.Duration
	// HAProxy is the template for HAProxy providers (check interval,
	// rise/fall, weight, max drain). Zero: the haproxy package defaults.
	HAProxy haproxy.Options
	// AWS is the template for AWS providers (endpoint override, rates,
	// retries); Region comes from each binding, Registerer and Logger are
	// set here. Zero: the aws package defaults, the standard credential
	// chain.
	AWS aws.Options
	// AWSCluster is the cluster name AWS bindings without target group
	// ARNs discover their groups by (tag sluice.dev/cluster). Empty: such
	// bindings are invalid.
	AWSCluster string
	// Namespace is the controller's own namespace: its bindings serve the
	// IngressClasses that name no binding in spec.parameters. Empty: those
	// classes get no addresses (no Ingress status, no DNS).
	Namespace string
	// HostOwnership and DefaultBackendNamespaces are the proxies'
	// translate.Options of the same names (tenancy): Events, Ingress status
	// and DNS records follow the same ownership decision as the routes.
	HostOwnership            string
	DefaultBackendNamespaces []string
	// DNS configures the DNS reconciler. Nil: no DNS records.
	DNS *DNSOptions
	// EvictionWebhook, when not nil, serves the zone floor's eviction
	// webhook (package admission); Client, Handler and Logger are set here.
	EvictionWebhook *admission.Options
	// Access says which bindings the controller may act on (namespaces,
	// HAProxy runtime APIs, AWS target groups). Zero: every binding.
	Access binding.Access
	// IngressDaemonSets runs the IngressDaemonSet reconciler, which
	// writes Deployments, DaemonSets and PodDisruptionBudgets in the
	// IngressDaemonSet namespaces (Access.IngressDaemonSets) and annotates
	// Nodes. False: it is not started,
	// and none of those are watched.
	IngressDaemonSets bool
	// NodeHealthImage is the image of IngressDaemonSets' health checkers
	// that name none. Empty: nodes.DefaultHealthCheckerImage.
	NodeHealthImage string
	// Gateway, when non-nil, writes the statuses of the Gateway API
	// objects of sluice's GatewayClasses (package gatewaystatus) with the
	// proxies' listener ports; nil: Gateway API is not read.
	Gateway *gateway.Options
	// Logger is required.
	Logger *slog.Logger
}

// DNSOptions configures the DNS reconciler (package controller/dns).
type DNSOptions struct {
	// Provider reads and writes the zones. Required.
	Provider dnsmodel.Provider
	// Aliases: the provider writes Route53 ALIAS records.
	Aliases bool
	// OwnerID, Policy, TTL, DeleteDelay and DryRun are the --dns-* flags.
	OwnerID     string
	Policy      dnsmodel.Policy
	TTL         time.Duration
	DeleteDelay time.Duration
	DryRun      bool
	// Interval is --dns-interval: the periodic reconcile when nothing
	// changes (default 1m).
	Interval time.Duration
	// Keys sign and verify ownership records (--dns-ownership-key-file).
	// Required.
	Keys *dnsmodel.Keys
	// AdoptUnsigned, AllowApex and NamespaceDomains are
	// --dns-adopt-unsigned, --dns-allow-apex and --dns-namespace-domains.
	AdoptUnsigned    bool
	AllowApex        bool
	NamespaceDomains dnsmodel.NamespaceDomains
}

// New returns a manager with every sluice reconciler registered. Start it
// with Start(ctx); it returns when ctx ends or leadership is lost.
func New(o Options) (ctrl.Manager, error) {
	if o.Config == nil || o.Logger == nil {
		return nil, errors.New("creating controller manager: Config and Logger are required")
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), v1alpha1.AddToScheme(scheme), gatewayv1.Install(scheme)); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	sync := cmp.Or(o.SyncPeriod, 10*time.Minute)
	mgr, err := ctrl.NewManager(o.Config, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        logr.FromSlogHandler(o.Logger.Handler()),
		LeaderElection:                o.LeaderElection,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionID:              cmp.Or(o.LeaderElectionID, "sluice-controller"),
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: cmp.Or(o.MetricsAddress, ":9091")},
		HealthProbeBindAddress:        cmp.Or(o.HealthAddress, ":9092"),
		// The webhook configurations are read directly: a cached read
		// would watch them, and the RBAC grants only get, create, update.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{
			&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfiguration{}}}},
		Cache: cache.Options{
			SyncPeriod:       &sync,
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject:         cacheByObject(o.Access.Namespaces, o.Access.IngressDaemonSets),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating controller manager: %w", err)
	}
	if err := errors.Join(mgr.AddHealthzCheck("ping", healthz.Ping), mgr.AddReadyzCheck("ping", healthz.Ping)); err != nil {
		return nil, fmt.Errorf("adding health checks: %w", err)
	}

	store, timeline := snapshot.NewStore(), snapshot.NewTimeline()
	awsOpts := o.AWS
	awsOpts.Registerer = ctrlmetrics.Registry
	awsOpts.Logger = o.Logger.With("provider", "aws")
	recorder := mgr.GetEventRecorder("sluice-controller")
	notifier := podstatus.NewNotifier(4096)
	providers := lbcache.New(lbcache.Options{HAProxy: o.HAProxy, AWS: awsOpts, AWSCluster: o.AWSCluster,
		Logger: o.Logger.With("provider", "haproxy")})
	// The providers' HAProxy watch (restoring servers after a reload) runs
	// on the leader only.
	if err := mgr.Add(providers); err != nil {
		return nil, fmt.Errorf("adding the haproxy watch: %w", err)
	}
	br, err := binding.New(binding.Options{
		Client:      mgr.GetClient(),
		Providers:   providers,
		Store:       store,
		Timeline:    timeline,
		Recorder:    recorder,
		Notify:      notifier.Notify,
		Registerer:  ctrlmetrics.Registry,
		Logger:      o.Logger.With("controller", "loadbalancerbinding"),
		FastRequeue: o.FastRequeue,
		SlowRequeue: o.SlowRequeue,
		Access:      o.Access,
	})
	if err != nil {
		return nil, err
	}
	pr, err := podstatus.New(podstatus.Options{
		Client:     mgr.GetClient(),
		Store:      store,
		Timeline:   timeline,
		Recorder:   recorder,
		Registerer: ctrlmetrics.Registry,
		Logger:     o.Logger.With("controller", "podstatus"),
	})
	if err != nil {
		return nil, err
	}
	// A binding the controller may not act on lends no address to an
	// Ingress (status, DNS) either.
	allowed := func(b *v1alpha1.LoadBalancerBinding) bool { return o.Access.Check(b) == nil }
	// With Gateway API, attached HTTPRoutes own hosts as Ingresses do, for
	// the Ingress status and problems as for the proxies; the reader
	// lists them once setupGateway finds the CRDs served.
	var routes *routeclaims.Reader
	if o.Gateway != nil {
		routes = routeclaims.New(routeclaims.Options{Client: mgr.GetClient(), Gateway: *o.Gateway, ReadSecrets: o.ReadTLSSecrets})
	}
	serving := ingressstatus.ServingOptions{IngressClass: o.IngressClass, IngressNginx: o.IngressNginx, Namespace: o.Namespace, Allowed: allowed, HostOwnership: o.HostOwnership}
	ir, err := ingressstatus.New(ingressstatus.Options{
		Client:                   mgr.GetClient(),
		IngressClass:             o.IngressClass,
		IngressNginx:             o.IngressNginx,
		Namespace:                o.Namespace,
		HostOwnership:            o.HostOwnership,
		DefaultBackendNamespaces: o.DefaultBackendNamespaces,
		ReadSecrets:              o.ReadTLSSecrets,
		Allowed:                  allowed,
		Routes:                   routes,
		Logger:                   o.Logger.With("controller", "ingressstatus"),
	})
	if err != nil {
		return nil, err
	}
	instance, err := os.Hostname() // the pod's name
	if err != nil {
		return nil, fmt.Errorf("finding the controller's instance name: %w", err)
	}
	standing, err := notices.New(notices.Options{Client: mgr.GetClient(), Controller: "sluice-controller",
		Instance: instance, Action: problems.EventAction})
	if err != nil {
		return nil, err
	}
	pods, podChanges, err := podWatch(mgr, o.Logger)
	if err != nil {
		return nil, err
	}
	probs, err := problems.New(problems.Options{
		Client:                   mgr.GetClient(),
		Pods:                     pods,
		PodChanges:               podChanges,
		Notices:                  standing,
		IngressClass:             o.IngressClass,
		IngressNginx:             o.IngressNginx,
		HostOwnership:            o.HostOwnership,
		DefaultBackendNamespaces: o.DefaultBackendNamespaces,
		AllowEndpointsWithoutPod: o.AllowEndpointsWithoutPod,
		ForwardAuthAnyURL:        o.ForwardAuthAnyURL,
		ReadSecrets:              o.ReadTLSSecrets,
		Routes:                   routes,
		Logger:                   o.Logger.With("controller", "ingressproblems"),
	})
	if err != nil {
		return nil, err
	}
	if o.IngressDaemonSets {
		if err := setupIngressDaemonSets(mgr, o, store, recorder); err != nil {
			return nil, err
		}
	}
	mr, err := managedlb.New(managedlb.Options{
		Client:     mgr.GetClient(),
		Clouds:     managedlb.Clouds(awsOpts),
		Cluster:    o.AWSCluster,
		Serving:    serving,
		Allowed:    allowed,
		Recorder:   recorder,
		Registerer: ctrlmetrics.Registry,
		Logger:     o.Logger.With("controller", "managedlb"),
	})
	if err != nil {
		return nil, err
	}
	if err := errors.Join(br.Setup(mgr), pr.Setup(mgr, notifier), ir.Setup(mgr), probs.Setup(mgr), mr.Setup(mgr)); err != nil {
		return nil, err
	}
	if o.Gateway != nil {
		if err := setupGateway(mgr, o, allowed, routes); err != nil {
			return nil, err
		}
	}
	if o.DNS != nil {
		dnsNotices, err := notices.New(notices.Options{Client: mgr.GetClient(), Controller: "sluice-controller",
			Instance: instance, Action: "DNS"})
		if err != nil {
			return nil, err
		}
		dr, err := dnsctl.New(dnsctl.Options{
			Client:           mgr.GetClient(),
			Provider:         o.DNS.Provider,
			Aliases:          o.DNS.Aliases,
			OwnerID:          o.DNS.OwnerID,
			Policy:           o.DNS.Policy,
			TTL:              o.DNS.TTL,
			DeleteDelay:      o.DNS.DeleteDelay,
			Interval:         o.DNS.Interval,
			DryRun:           o.DNS.DryRun,
			Keys:             o.DNS.Keys,
			AdoptUnsigned:    o.DNS.AdoptUnsigned,
			AllowApex:        o.DNS.AllowApex,
			NamespaceDomains: o.DNS.NamespaceDomains,
			Serving:          serving,
			Routes:           routes,
			Recorder:         recorder,
			Notices:          dnsNotices,
			Registerer:       ctrlmetrics.Registry,
			Logger:           o.Logger.With("controller", "dns"),
		})
		if err != nil {
			return nil, err
		}
		if err := dr.Setup(mgr); err != nil {
			return nil, err
		}
	}
	if w := o.EvictionWebhook; w != nil {
		wo := *w
		wo.Namespaces = o.Access.Namespaces
		wo.Client = mgr.GetClient()
		wo.Logger = o.Logger.With("webhook", "eviction")
		// Every replica serves the webhooks: the leader from the snapshots
		// its reconciles store, the others from the same snapshot built
		// from their cache and a read-only provider listing.
		snaps := leaderOrView(mgr.Elected(), store, br)
		wo.Handler = &admission.Handler{Client: mgr.GetClient(), Snapshots: snaps, Logger: wo.Logger}
		wo.Steer = &admission.Steer{Client: mgr.GetClient(), Snapshots: snaps, Logger: o.Logger.With("webhook", "zone-steer")}
		ws, err := admission.New(wo)
		if err != nil {
			return nil, err
		}
		if err := errors.Join(mgr.Add(ws), mgr.Add(warmCache(mgr.GetCache()))); err != nil {
			return nil, fmt.Errorf("adding the eviction webhook: %w", err)
		}
	}
	return mgr, nil
}
