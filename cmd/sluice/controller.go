package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"sluice.dev/sluice/internal/controller/admission"
	"sluice.dev/sluice/internal/controller/binding"
	"sluice.dev/sluice/internal/controller/manager"
	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/lb/aws"
	"sluice.dev/sluice/internal/lb/haproxy"
	"sluice.dev/sluice/internal/version"
)

// controllerConfig is everything `sluice controller` is told on its command line.
type controllerConfig struct {
	kubeconfig               string
	metricsAddress           string
	healthAddress            string
	ingressClass             string
	allowEndpointsWithoutPod bool
	anyAuthURL               bool // --forward-auth-any-url
	readTLSSecrets           bool
	resyncPeriod             time.Duration
	leaderElect              bool
	leaderElectionNamespace  string
	leaderElectionID         string
	pollInterval             time.Duration
	fastPollInterval         time.Duration
	haproxyCheckInterval     time.Duration
	haproxyMaxDrain          time.Duration
	haproxyWatchInterval     time.Duration
	webhookAddress           string
	webhookCertDir           string
	webhookService           string
	webhookURL               string
	webhookConfig            string
	steerConfig              string
	webhookCreate            bool
	ingressDaemonSets        bool
	awsEndpoint              string
	awsCluster               string
	logFormat                string
	logLevel                 string
	namespace                string
	nodeHealthImage          string
	dns                      dnsConfig
	tenancy                  tenancyFlags
	nginx                    nginxCompatFlags
	access                   binding.Access
	accessFlags              accessFlags
	// warnings name the deprecated spellings the command line used.
	warnings         []string
	gatewayAPI       bool
	gatewayHTTPPort  int
	gatewayHTTPSPort int
	gatewayPorts     gatewayPortFlags // gatewayports.go
}

// flags declares `sluice controller`'s flags into c.
func (c *controllerConfig) flags(stderr io.Writer) *flagSet {
	fs := newFlagSet("sluice controller", stderr)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: in-cluster configuration")
	fs.StringVar(&c.metricsAddress, "metrics-address", ":9091", `address for /metrics (empty disables; "0", the old spelling, too)`)
	fs.StringVar(&c.healthAddress, "health-address", ":9092", `address for /healthz and /readyz (empty disables; "0", the old spelling, too)`)
	fs.StringVar(&c.ingressClass, "ingress-class", "sluice", "name of the IngressClass whose Ingresses get status.loadBalancer")
	fs.BoolVar(&c.allowEndpointsWithoutPod, "allow-endpoints-without-pod", false, "as the proxies' flag: endpoints without a targetRef are used, so not reported (Event EndpointsRefused) as refused")
	fs.BoolVar(&c.anyAuthURL, "forward-auth-any-url", false, "as the proxies' flag: a sluice.dev/auth-url naming any http(s) URL is not reported (Event InvalidAnnotation)")
	fs.BoolVar(&c.gatewayAPI, "gateway-api", false, "write the status of the Gateway API objects (gateway.networking.k8s.io/v1) of every GatewayClass whose spec.controllerName is "+string(gateway.ControllerName)+": GatewayClass, Gateway (with the addresses of the class's LoadBalancerBinding), HTTPRoute and GRPCRoute (when its CRD is served); attached routes own their hosts for Ingress status, Events and DNS as for the proxies; needs the CRDs (looked for again every 30s while absent)")
	fs.IntVar(&c.gatewayHTTPPort, "gateway-http-port", 80, "as the proxies' flag: the port Gateway HTTP listeners must name")
	fs.IntVar(&c.gatewayHTTPSPort, "gateway-https-port", 443, "as the proxies' flag: the port Gateway HTTPS listeners must name")
	c.gatewayPorts.declare(fs, "as the proxies' flag: ")
	fs.BoolVar(&c.readTLSSecrets, "read-tls-secrets", false, "read the Ingresses' TLS Secrets (needs get, list and watch on secrets in every namespace with Ingresses) so that a missing or invalid one is an Event on its Ingress; off: the controller reads no Secret, and the proxies report Secret problems in their logs and metrics")
	fs.DurationVar(&c.resyncPeriod, "resync-period", 10*time.Minute, "how often the informers replay every object to the reconcilers")
	fs.BoolVar(&c.leaderElect, "leader-elect", true, "elect a leader on a Lease so that only one replica acts")
	fs.StringVar(&c.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace; required outside a cluster)")
	fs.StringVar(&c.leaderElectionID, "leader-election-id", "sluice-controller", "name of the leader-election Lease")
	fs.DurationVar(&c.pollInterval, "poll-interval", 10*time.Second, "how often a settled binding's targets are read from the load balancer")
	fs.DurationVar(&c.fastPollInterval, "fast-poll-interval", time.Second, "how often a binding's targets are read while any is initial, unhealthy or draining")
	fs.DurationVar(&c.haproxyCheckInterval, "haproxy-check-interval", time.Second, "health-check interval of the HAProxy servers sluice adds")
	fs.DurationVar(&c.haproxyMaxDrain, "haproxy-max-drain", 60*time.Second, "longest an HAProxy server stays in drain while it still has sessions")
	fs.DurationVar(&c.haproxyWatchInterval, "haproxy-watch-interval", 250*time.Millisecond, "how often HAProxy's runtime API is asked whether a reload or restart forgot sluice's servers, which are then restored in their last state (0: off; a negative value, the old spelling, too)")
	fs.StringVar(&c.webhookAddress, "eviction-webhook-address", "", `address of the zone floor's webhooks, eviction and zone steering of new pods (HTTPS, e.g. ":9443"; "": off)`)
	fs.StringVar(&c.webhookCertDir, "eviction-webhook-cert-dir", "", "directory keeping the webhook's generated CA and serving certificate (default: memory, new at each start)")
	fs.StringVar(&c.webhookService, "eviction-webhook-service", "", "Service in front of the controller that the API server calls: namespace/name[:port]")
	fs.StringVar(&c.webhookURL, "eviction-webhook-url", "", "instead of a Service, the https:// URL the API server calls (a controller outside the cluster)")
	fs.StringVar(&c.webhookConfig, "eviction-webhook-configuration", "sluice-eviction-floor", "name of the ValidatingWebhookConfiguration of the eviction webhook, whose caBundle the controller keeps current")
	fs.StringVar(&c.steerConfig, "zone-steer-webhook-configuration", "sluice-zone-steer", "name of the MutatingWebhookConfiguration of the zone steering webhook, whose caBundle the controller keeps current")
	fs.BoolVar(&c.webhookCreate, "eviction-webhook-create-configurations", false, "create both webhook configurations and keep their rules, instead of only patching the caBundle of existing ones (the Helm chart creates them); needs get, create and update on webhook configurations")
	fs.BoolVar(&c.ingressDaemonSets, "ingress-daemonsets", true, "run the IngressDaemonSet controller (needs RBAC to write Deployments, DaemonSets and PodDisruptionBudgets in --ingressdaemonset-namespaces and to annotate Nodes)")
	fs.StringVar(&c.awsEndpoint, "aws-endpoint", "", "ELBv2 API endpoint URL for every region (tests, the awsfake); default: AWS's regional endpoint")
	fs.StringVar(&c.awsCluster, "aws-cluster", "", "cluster name for AWS target group discovery: a binding that lists no targetGroupARNs uses the groups tagged sluice.dev/cluster=NAME and sluice.dev/frontend=<binding name>")
	c.accessFlags.register(fs.FlagSet)
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.namespace, "namespace", "", "the controller's namespace: its bindings serve IngressClasses without binding parameters (default: $POD_NAMESPACE, the service account's namespace, else --leader-election-namespace)")
	fs.StringVar(&c.nodeHealthImage, "node-health-image", "sluice", "image of IngressDaemonSets' health checkers (`sluice node-health`) that name none")
	c.dns.register(fs.FlagSet)
	c.tenancy.register(fs.FlagSet)
	c.nginx.register(fs.FlagSet)
	return fs
}

func parseControllerFlags(args []string, stderr io.Writer) (*controllerConfig, error) {
	c := &controllerConfig{}
	fs := c.flags(stderr)
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	// "" turns a listener off; "0" did before and still does.
	for _, a := range []struct {
		name string
		addr *string
	}{{"--metrics-address", &c.metricsAddress}, {"--health-address", &c.healthAddress}} {
		if *a.addr == "0" {
			fs.deprecate(`%s="0" is deprecated and goes in the next release: an empty value turns the listener off`, a.name)
			*a.addr = ""
		}
	}
	if c.haproxyWatchInterval < 0 {
		fs.deprecate("a negative --haproxy-watch-interval is deprecated and goes in the next release: 0 turns restoring off")
		c.haproxyWatchInterval = 0
	}
	c.warnings = fs.warnings
	c.metricsAddress, c.healthAddress, c.webhookAddress = listenAddress(c.metricsAddress), listenAddress(c.healthAddress), listenAddress(c.webhookAddress)
	if c.logFormat != "text" && c.logFormat != "json" {
		return nil, fmt.Errorf("--log-format must be text or json, not %q", c.logFormat)
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		return nil, err
	}
	for name, d := range map[string]time.Duration{"--resync-period": c.resyncPeriod, "--poll-interval": c.pollInterval,
		"--fast-poll-interval": c.fastPollInterval, "--haproxy-check-interval": c.haproxyCheckInterval, "--haproxy-max-drain": c.haproxyMaxDrain} {
		if d <= 0 {
			return nil, fmt.Errorf("%s must be positive", name)
		}
	}
	if c.awsEndpoint != "" {
		u, err := url.Parse(c.awsEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--aws-endpoint must be an http:// or https:// URL, not %q", c.awsEndpoint)
		}
	}
	if c.webhookAddress != "" && (c.webhookService == "") == (c.webhookURL == "") {
		return nil, errors.New("--eviction-webhook-address needs exactly one of --eviction-webhook-service and --eviction-webhook-url")
	}
	if c.ingressClass == "" || c.leaderElectionID == "" || c.webhookConfig == "" || c.steerConfig == "" {
		return nil, errors.New("--ingress-class, --leader-election-id and the webhook configuration names must not be empty")
	}
	for name, p := range map[string]int{"--gateway-http-port": c.gatewayHTTPPort, "--gateway-https-port": c.gatewayHTTPSPort} {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("%s must be from 1 to 65535, not %d", name, p)
		}
	}
	if err := c.gatewayPorts.check(c.gatewayHTTPPort, c.gatewayHTTPSPort); err != nil {
		return nil, err
	}
	if err := c.dns.check(); err != nil {
		return nil, err
	}
	if err := c.tenancy.check(); err != nil {
		return nil, err
	}
	// The controller's own namespace (--namespace, the pod's, else the
	// leader-election namespace) is the default of --binding-namespaces
	// and --ingressdaemonset-namespaces.
	access, err := c.accessFlags.parse(func() string { return controllerNamespace(c.namespace, c.leaderElectionNamespace) })
	if err != nil {
		return nil, err
	}
	c.access = access
	return c, nil
}

// runController runs `sluice controller`: the leader-elected control plane
// that registers ingress pods in load balancers, drives their readiness
// gates and drain handshake, and publishes Ingress status.
func runController(args []string, stdout, stderr io.Writer) int {
	c, err := parseControllerFlags(args, stderr)
	if err != nil {
		return usageError(stderr, "controller", err)
	}
	log := newLogger(c.logFormat, c.logLevel, stderr)
	logDeprecated(log, c.warnings)
	if err := serveController(c, log); err != nil {
		log.Error("sluice controller failed", "error", err)
		return 1
	}
	return 0
}

func serveController(c *controllerConfig, log *slog.Logger) error {
	// controller-runtime and client-go (leader election) log through
	// their own globals; send both to slog.
	lr := logr.FromSlogHandler(log.Handler())
	ctrl.SetLogger(lr)
	klog.SetLogger(lr)

	cfg, err := kubeConfig(c.kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "sluice-controller"
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	dnsOpts, err := c.dns.options(ctx, log)
	if err != nil {
		return err
	}
	namespace := controllerNamespace(c.namespace, c.leaderElectionNamespace)
	nginxCompat, err := c.nginx.options()
	if err != nil {
		return err
	}
	mgr, err := manager.New(manager.Options{
		Namespace:                namespace,
		DNS:                      dnsOpts,
		Config:                   cfg,
		IngressClass:             c.ingressClass,
		IngressNginx:             nginxCompat,
		AllowEndpointsWithoutPod: c.allowEndpointsWithoutPod,
		ForwardAuthAnyURL:        c.anyAuthURL,
		ReadTLSSecrets:           c.readTLSSecrets,
		Gateway:                  c.gatewayOptions(),
		HostOwnership:            c.tenancy.hostOwnership,
		DefaultBackendNamespaces: c.tenancy.namespaces(namespace),
		LeaderElection:           c.leaderElect,
		LeaderElectionNamespace:  c.leaderElectionNamespace,
		LeaderElectionID:         c.leaderElectionID,
		MetricsAddress:           offAddress(c.metricsAddress),
		HealthAddress:            offAddress(c.healthAddress),
		SyncPeriod:               c.resyncPeriod,
		FastRequeue:              c.fastPollInterval,
		SlowRequeue:              c.pollInterval,
		HAProxy:                  haproxy.Options{CheckInterval: c.haproxyCheckInterval, MaxDrain: c.haproxyMaxDrain, WatchInterval: watchInterval(c.haproxyWatchInterval)},
		AWS:                      aws.Options{Endpoint: c.awsEndpoint},
		AWSCluster:               c.awsCluster,
		EvictionWebhook:          c.webhook(),
		Access:                   c.access,
		IngressDaemonSets:        c.ingressDaemonSets,
		NodeHealthImage:          c.nodeHealthImage,
		Logger:                   log,
	})
	if err != nil {
		return err
	}
	if err := ctrlmetrics.Registry.Register(version.Collector()); err != nil {
		return fmt.Errorf("registering sluice_build_info: %w", err)
	}
	log.Info("sluice controller starting", "version", version.Get().Version, "namespace", namespace, "dnsProvider", c.dns.provider, "ingressClass", c.ingressClass, "leaderElect", c.leaderElect,
		"metrics", c.metricsAddress, "health", c.healthAddress, "awsEndpoint", c.awsEndpoint, "awsCluster", c.awsCluster,
		"bindingNamespaces", c.access.Namespaces, "ingressDaemonSets", c.ingressDaemonSets, "ingressDaemonSetNamespaces", c.access.IngressDaemonSets, "readTLSSecrets", c.readTLSSecrets, "allowedHAProxyRuntimeAPIs", c.access.HAProxyRuntimeAPIs, "allowedAWSTargetGroups", c.access.AWSTargetGroups)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running controller manager: %w", err)
	}
	log.Info("sluice controller stopped")
	return nil
}

// offAddress is a listener address for the manager, where "0" (not "")
// turns a listener off.
func offAddress(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

// watchInterval is --haproxy-watch-interval for the HAProxy provider,
// where a negative interval (not 0) turns restoring off.
func watchInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// webhook turns the --eviction-webhook-* flags into the webhook's options
// (nil: off). The serving certificate names the Service's DNS names, or
// the URL's host.
func (c *controllerConfig) webhook() *admission.Options {
	if c.webhookAddress == "" {
		return nil
	}
	o := &admission.Options{Address: c.webhookAddress, CertDir: c.webhookCertDir, Service: c.webhookService, URL: c.webhookURL,
		ConfigName: c.webhookConfig, SteerConfigName: c.steerConfig, CreateConfigurations: c.webhookCreate}
	if c.webhookURL != "" {
		if u, err := url.Parse(c.webhookURL); err == nil {
			o.Hosts = []string{u.Hostname()}
		}
		return o
	}
	nsName, _, _ := strings.Cut(c.webhookService, ":")
	if ns, name, ok := strings.Cut(nsName, "/"); ok {
		o.Hosts = []string{name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"}
	}
	return o
}

// deprecations are the deprecated spellings the command line used.
func (c *controllerConfig) deprecations() []string {
	if c == nil {
		return nil
	}
	return c.warnings
}

// gatewayOptions is the Gateway API status writing of --gateway-api; nil
// when it is off.
func (c *controllerConfig) gatewayOptions() *gateway.Options {
	if !c.gatewayAPI {
		return nil
	}
	o := &gateway.Options{HTTPPort: int32(c.gatewayHTTPPort), HTTPSPort: int32(c.gatewayHTTPSPort)}
	c.gatewayPorts.apply(o)
	return o
}
