package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"sluice.dev/sluice/internal/drain"
	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/gcfloor"
	"sluice.dev/sluice/internal/proxy"
	"sluice.dev/sluice/internal/proxyproto"
	"sluice.dev/sluice/internal/rebuild"
	"sluice.dev/sluice/internal/server"
	"sluice.dev/sluice/internal/source/kube"
	"sluice.dev/sluice/internal/source/manifests"
	"sluice.dev/sluice/internal/translate"
	"sluice.dev/sluice/internal/version"
)

// proxyConfig is everything `sluice proxy` is told on its command line.
type proxyConfig struct {
	manifests      string
	kubeconfig     string
	watchNamespace string
	ingressClasses classList // empty: every class of sluice's controller
	namespaces     []string  // --watch-namespace parsed; nil: every namespace
	tenancy        tenancyFlags
	sslRedirect    bool
	anyAuthURL     bool // --forward-auth-any-url
	defaultCert    string

	allowEndpointsWithoutPod bool
	allowLoopbackEndpoints   bool

	httpAddress  string
	httpsAddress string
	adminAddress string

	trustedProxiesFlag string
	trustedProxies     []netip.Prefix
	proxyProtocol      bool

	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	bodyIdleTimeout   time.Duration
	writeIdleTimeout  time.Duration
	tunnelIdleTimeout time.Duration
	maxHeaderBytes    int
	maxConnections    int
	h2MaxStreams      int
	dialTimeout       time.Duration
	responseTimeout   time.Duration
	retries           int
	upstreamIdle      time.Duration
	unsafeReuse       time.Duration
	maxConns          int
	queueTimeout      time.Duration

	drainMaxWait        time.Duration
	drainQuietPeriod    time.Duration
	shutdownTimeout     time.Duration
	healthOnTrafficPort bool
	fastHTTP1           bool
	gcHeapFloorMiB      int

	logFormat  string
	logLevel   string
	requestID  bool
	h2c        bool
	reusePort  bool
	maxStreams int
	splice     bool
	accessLog  bool
	// accessLogFields: --access-log-fields (nil: the default fields).
	accessLogFields listFlag

	allowEncodedSlashes bool

	// warnings name the deprecated spellings the command line used.
	warnings         []string
	gatewayClass     string // "": Gateway API not watched
	gateway          string // --gateway: namespace/name, "" for every Gateway of the class
	gatewayHTTPPort  int
	gatewayHTTPSPort int
	gatewayPorts     gatewayPortFlags // gatewayports.go
	// gatewayAddresses: --gateway-addresses, parsed.
	gatewayAddressesFlag string
	gatewayAddresses     []netip.Addr
	nginx                nginxCompatFlags
}

// flags declares `sluice proxy`'s flags into c.
func (c *proxyConfig) flags(stderr io.Writer) *flagSet {
	fs := newFlagSet("sluice proxy", stderr)
	fs.StringVar(&c.manifests, "manifests", "", "read Ingress, IngressClass, Service, EndpointSlice and Secret objects from the YAML files in this directory instead of the Kubernetes API")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: in-cluster configuration")
	fs.StringVar(&c.watchNamespace, "watch-namespace", "", "only read Ingresses, Services, EndpointSlices and Secrets in these comma-separated namespaces (default: all namespaces; IngressClasses are always read cluster-wide)")
	fs.Var(&c.ingressClasses, "ingress-class", "IngressClass this proxy serves (repeatable, or a comma-separated list): Ingresses of other classes get no route (404). Unset: the class \"sluice\" and every IngressClass whose spec.controller is "+translate.ControllerName+" (one fleet for all classes; logged at startup)")
	fs.BoolVar(&c.allowEndpointsWithoutPod, "allow-endpoints-without-pod", false, "also use EndpointSlice endpoints without a targetRef (selector-less Services whose slices are written by hand); endpoints whose targetRef is not a Pod of the Service's namespace stay refused")
	fs.BoolVar(&c.allowLoopbackEndpoints, "allow-loopback-endpoints", false, "use endpoints at loopback addresses (127.0.0.0/8, ::1): backends on the proxy's own host; only with --manifests")
	c.tenancy.register(fs.FlagSet)
	c.nginx.register(fs.FlagSet)
	fs.BoolVar(&c.sslRedirect, "ssl-redirect", false, `redirect plain-HTTP requests to hosts that have TLS (from their owner's spec.tls) to HTTPS with a 308, for Ingresses without the sluice.dev/ssl-redirect annotation (off by default, as the Ingress conformance suite expects)`)
	fs.BoolVar(&c.anyAuthURL, "forward-auth-any-url", false, "let the sluice.dev/auth-url annotation name any http(s) URL (an external identity service); off: only a Service of the Ingress's own namespace, so a tenant cannot make the proxy send requests elsewhere")
	fs.StringVar(&c.defaultCert, "default-certificate", "", "namespace/name of a kubernetes.io/tls Secret served when no certificate matches the SNI name (unset: the certificate of a Gateway HTTPS listener without a hostname, if any; else, or missing or invalid: a self-signed certificate generated at start)")
	fs.StringVar(&c.httpAddress, "http-address", ":8080", "address for plain HTTP traffic (empty disables)")
	fs.StringVar(&c.httpsAddress, "https-address", ":8443", "address for TLS traffic (empty disables)")
	fs.StringVar(&c.adminAddress, "admin-address", ":9090", "address for /healthz, /readyz and /metrics (empty disables)")
	fs.StringVar(&c.trustedProxiesFlag, "trusted-proxies", "", "comma-separated CIDRs whose X-Forwarded-* headers and PROXY protocol headers are trusted")
	fs.BoolVar(&c.proxyProtocol, "proxy-protocol", false, "accept PROXY protocol v1/v2 headers on the traffic listeners (from --trusted-proxies only)")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", 10*time.Second, "time allowed for a request's header to arrive, from the connection's accept or the request's first byte (HAProxy's timeout http-request; slowloris clients are cut by it)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 120*time.Second, "how long an idle client keep-alive connection (HTTP/1.1 or HTTP/2) is kept; longer than the load balancer's own idle timeout (ALB: 60s) so that the load balancer, not the proxy, closes idle connections and never sends on one the proxy is closing")
	fs.DurationVar(&c.bodyIdleTimeout, "body-idle-timeout", 60*time.Second, "longest time a request body may go without a byte from the client (not a total: a slow upload that keeps moving is never cut); the request is answered 408 (nginx's client_body_timeout; 0: none)")
	fs.DurationVar(&c.writeIdleTimeout, "write-idle-timeout", 60*time.Second, "longest time a client may take no byte of a response or a tunnel before its connection is closed (not a total: a slow download that keeps moving is never cut; nginx's send_timeout). With it on, --splice-bodies copies through user space (0: none)")
	fs.DurationVar(&c.tunnelIdleTimeout, "tunnel-idle-timeout", time.Hour, "close a WebSocket or other upgraded connection once no byte went either way for this long (HAProxy's timeout tunnel; 0: never)")
	fs.IntVar(&c.maxHeaderBytes, "max-header-bytes", 32<<10, "largest request header (request line and fields) accepted; a larger one is answered 431 (nginx's total of 4 x 8k header buffers; at least 4096)")
	fs.IntVar(&c.maxConnections, "max-connections", 16384, "most client connections open at once over the traffic listeners; new connections beyond it are closed at accept while the open ones keep working; the admin listener has no limit (ingress-nginx's max-worker-connections; 0: no limit)")
	fs.IntVar(&c.h2MaxStreams, "http2-max-concurrent-streams", 100, "most concurrent streams a client may open on one HTTP/2 connection (HAProxy's default, RFC 9113's recommended minimum); the HTTP/2 server's rapid-reset, CONTINUATION- and SETTINGS-flood protections apply too")
	fs.DurationVar(&c.dialTimeout, "upstream-connect-timeout", 5*time.Second, "time allowed to connect to a pod endpoint")
	fs.DurationVar(&c.responseTimeout, "upstream-response-timeout", 60*time.Second, "time allowed for a pod to send response headers")
	fs.IntVar(&c.retries, "retries", 2, "extra attempts on another endpoint after a connect failure (any method) or a reset (idempotent methods, or a request with an Idempotency-Key header)")
	fs.DurationVar(&c.upstreamIdle, "upstream-idle-timeout", 3*time.Second, "close a keep-alive connection to a pod once idle this long; keep it below the pods' own keep-alive timeout (Node.js and uvicorn 5s) so the proxy, not the pod, closes it")
	fs.DurationVar(&c.unsafeReuse, "upstream-unsafe-reuse-window", 500*time.Millisecond, "a request that could not be sent again (not idempotent and no Idempotency-Key, or a body over 64 KiB) reuses a pod connection only if that connection carried a request this recently, and opens a new one otherwise (0: always a new one)")
	fs.IntVar(&c.maxConns, "upstream-max-connections", 1024, "most requests in flight to one pod endpoint (HTTP/1.1: connections in use; HTTP/2: open streams, long gRPC streams included; open WebSocket tunnels do not count); more wait up to --upstream-queue-timeout for a slot, then get 503 (0: no limit)")
	fs.DurationVar(&c.queueTimeout, "upstream-queue-timeout", 5*time.Second, "longest wait for a slot under --upstream-max-connections before answering 503")
	fs.DurationVar(&c.drainMaxWait, "drain-max-wait", 60*time.Second, "longest time to keep serving after SIGTERM while waiting for the load balancer to let go (0: no draining)")
	fs.DurationVar(&c.drainQuietPeriod, "drain-quiet-period", 0, "end draining early once no new connection carried a request other than a health check for this long (0: off)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "time in-flight requests get to finish once draining ends (0: none)")
	fs.BoolVar(&c.healthOnTrafficPort, "health-on-traffic-port", false, "also answer /healthz on the traffic ports (the path is then reserved)")
	fs.BoolVar(&c.fastHTTP1, "http1-fast-path", true, "serve HTTP/1.1 keep-alive traffic, plain and over TLS, with sluice's own HTTP/1.1 loop (net/http takes the connections it leaves: HTTP/2 over TLS, HTTP/1.0, upgrades, Expect, chunked uploads, large headers); false: net/http serves everything")
	fs.IntVar(&c.gcHeapFloorMiB, "gc-heap-floor-mib", 64, "let the heap grow to this many MiB before the garbage collector runs (GOGC raised while the live heap is small and the proxy busy; at most a quarter of the cgroup memory limit; 0 or a GOGC variable: Go's default)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&c.accessLog, "access-log", false, "log one line per request")
	fs.Var(&c.accessLogFields, "access-log-fields", "the access log's fields, comma-separated, in a fixed order (default: all but query; durations in seconds): "+strings.Join(proxy.AccessLogFieldNames(), ","))
	fs.BoolVar(&c.reusePort, "reuse-port", false, "set SO_REUSEPORT on every listener (traffic and admin), so several proxies on one host network share the ports (per-node replicas); set net.ipv4.tcp_migrate_req=1 on the node so a stopping replica's queued connections move to another")
	fs.BoolVar(&c.h2c, "h2c", false, "also serve HTTP/2 without TLS (prior knowledge, as gRPC clients use) on the plain-HTTP listener")
	fs.IntVar(&c.maxStreams, "upstream-max-streams-per-connection", 100, "most concurrent requests on one HTTP/2 connection to a pod (h2c, grpc, grpcs backends); more open another connection")
	fs.BoolVar(&c.splice, "splice-bodies", false, "copy large Content-Length response bodies from the pod's connection to a plain-HTTP client's with splice(2) (less proxy CPU, more for the receiving client on loopback); needs --write-idle-timeout=0, since a splice cannot move the write deadline as bytes go")
	fs.BoolVar(&c.allowEncodedSlashes, "allow-encoded-slashes", false, "pass an encoded slash, backslash or dot (%2F, %5C, %2E) or a literal backslash in a request path to the pod unchanged (path rules see it decoded and normalised); false: refuse such requests with 400")
	fs.StringVar(&c.gatewayClass, "gateway-class", "", "serve the Gateways of this GatewayClass (spec.controllerName "+string(gateway.ControllerName)+") and the HTTPRoutes and GRPCRoutes attached to them, beside the Ingresses, in one routing table, with the BackendTLSPolicies of their backends (Gateway API, gateway.networking.k8s.io/v1; the CRDs must be installed, and are looked for again every 30s while absent); empty: Gateway API objects are not read")
	fs.IntVar(&c.gatewayHTTPPort, "gateway-http-port", 80, "the main port of Gateway HTTP listeners: the plain-HTTP port the load balancer in front exposes (listeners on ports neither main nor in --gateway-extra-http-ports are refused with PortUnavailable)")
	fs.IntVar(&c.gatewayHTTPSPort, "gateway-https-port", 443, "the port Gateway HTTPS listeners must name: the TLS port the load balancer in front exposes")
	c.gatewayPorts.declare(fs, "")
	fs.StringVar(&c.gateway, "gateway", "", "NAMESPACE/NAME: serve only this Gateway (of --gateway-class) and the routes attached to it, for a proxy fleet of its own; empty: every Gateway of the class")
	fs.StringVar(&c.gatewayAddressesFlag, "gateway-addresses", "", "comma-separated IP addresses of the load balancer that Gateways hold one each (the binding's spec.gatewayAddresses): a Gateway whose status.addresses holds one is served from a table of its own, to requests that reached that address (the destination of the load balancer's PROXY protocol header, so with --proxy-protocol; else the connection's local address); a Gateway holding none is not served; empty: every Gateway of the class shares one table")
	fs.BoolVar(&c.requestID, "request-id", false, "give every request an X-Request-Id (a trusted proxy's valid one is kept), passed to the pod and returned to the client")
	return fs
}

func parseProxyFlags(args []string, stderr io.Writer) (*proxyConfig, error) {
	c := &proxyConfig{}
	fs := c.flags(stderr)
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	c.warnings = fs.warnings
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	c.httpAddress, c.httpsAddress, c.adminAddress = listenAddress(c.httpAddress), listenAddress(c.httpsAddress), listenAddress(c.adminAddress)
	var err error
	if c.namespaces, err = splitList("--watch-namespace", c.watchNamespace, namespaceRE.MatchString); err != nil {
		return nil, err
	}
	if slices.Contains(c.namespaces, "*") {
		c.namespaces = nil
	}
	if c.trustedProxies, err = parseCIDRs(c.trustedProxiesFlag); err != nil {
		return nil, fmt.Errorf("--trusted-proxies: %w", err)
	}
	if err := proxy.CheckAccessLogFields(c.accessLogFields); err != nil {
		return nil, fmt.Errorf("--access-log-fields: %w", err)
	}
	if c.manifests != "" && c.kubeconfig != "" {
		return nil, errors.New("--manifests and --kubeconfig are exclusive")
	}
	if c.gatewayClass != "" && c.manifests != "" {
		return nil, errors.New("--gateway-class needs the Kubernetes API (Gateway API objects are not read from --manifests yet)")
	}
	if c.gatewayClass != "" && len(validation.IsDNS1123Subdomain(c.gatewayClass)) > 0 {
		return nil, fmt.Errorf("--gateway-class %q is not a valid object name", c.gatewayClass)
	}
	for name, p := range map[string]int{"--gateway-http-port": c.gatewayHTTPPort, "--gateway-https-port": c.gatewayHTTPSPort} {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("%s must be from 1 to 65535, not %d", name, p)
		}
	}
	if err := c.gatewayPorts.check(c.gatewayHTTPPort, c.gatewayHTTPSPort); err != nil {
		return nil, err
	}
	addrs, err := parseAddressList(c.gatewayAddressesFlag)
	if err != nil {
		return nil, fmt.Errorf("--gateway-addresses: %w", err)
	}
	c.gatewayAddresses = addrs
	if len(addrs) > 0 && c.gatewayClass == "" {
		return nil, errors.New("--gateway-addresses needs --gateway-class")
	}
	if c.gateway != "" {
		ns, name, ok := strings.Cut(c.gateway, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			return nil, fmt.Errorf("--gateway %q is not NAMESPACE/NAME", c.gateway)
		}
		if c.gatewayClass == "" {
			return nil, errors.New("--gateway needs --gateway-class")
		}
	}
	if c.allowLoopbackEndpoints && c.manifests == "" {
		return nil, errors.New("--allow-loopback-endpoints needs --manifests (the API server refuses loopback endpoints; in a cluster one would be the proxy's own pod)")
	}
	if c.proxyProtocol && len(c.trustedProxies) == 0 {
		return nil, errors.New("--proxy-protocol needs --trusted-proxies (the load balancer's addresses)")
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return nil, fmt.Errorf("--log-format must be text or json, not %q", c.logFormat)
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		return nil, err
	}
	for name, d := range map[string]time.Duration{"--drain-max-wait": c.drainMaxWait, "--shutdown-timeout": c.shutdownTimeout, "--drain-quiet-period": c.drainQuietPeriod,
		"--body-idle-timeout": c.bodyIdleTimeout, "--write-idle-timeout": c.writeIdleTimeout, "--tunnel-idle-timeout": c.tunnelIdleTimeout} {
		if d < 0 {
			return nil, fmt.Errorf("%s must not be negative", name)
		}
	}
	if err := c.tenancy.check(); err != nil {
		return nil, err
	}
	if c.upstreamIdle <= 0 {
		return nil, errors.New("--upstream-idle-timeout must be positive")
	}
	if c.unsafeReuse < 0 {
		return nil, errors.New("--upstream-unsafe-reuse-window must not be negative")
	}
	if c.maxConns < 0 {
		return nil, errors.New("--upstream-max-connections must not be negative")
	}
	if c.queueTimeout <= 0 {
		return nil, errors.New("--upstream-queue-timeout must be positive")
	}
	if c.maxHeaderBytes < 4096 {
		return nil, fmt.Errorf("--max-header-bytes must be at least 4096, not %d", c.maxHeaderBytes)
	}
	if c.maxConnections < 0 {
		return nil, fmt.Errorf("--max-connections must not be negative")
	}
	if c.h2MaxStreams < 1 {
		return nil, fmt.Errorf("--http2-max-concurrent-streams must be at least 1, not %d", c.h2MaxStreams)
	}
	if c.retries < 0 || c.retries > 10 {
		return nil, fmt.Errorf("--retries must be between 0 and 10, not %d", c.retries)
	}
	return c, nil
}

// classList is --ingress-class: repeatable, each value a comma-separated
// list of IngressClass names (DNS-1123 subdomains), kept in order without
// duplicates.
type classList []string

func (l *classList) String() string { return strings.Join(*l, ",") }

func (l *classList) Set(v string) error {
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return fmt.Errorf("IngressClass name %q: %s", n, strings.Join(errs, "; "))
		}
		if !slices.Contains(*l, n) {
			*l = append(*l, n)
		}
	}
	return nil
}

func parseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("parsing %q: %w", f, err)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("parsing %q: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level: %w", err)
	}
	return l, nil
}

func newLogger(format, level string, w io.Writer) *slog.Logger {
	lvl, _ := parseLevel(level)
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func runProxy(args []string, stdout, stderr io.Writer) int {
	c, err := parseProxyFlags(args, stderr)
	if err != nil {
		return usageError(stderr, "proxy", err)
	}
	log := newLogger(c.logFormat, c.logLevel, stderr)
	logDeprecated(log, c.warnings)
	klog.SetSlogLogger(log.With("component", "client-go"))
	if err := serveProxy(c, log); err != nil {
		log.Error("sluice proxy failed", "error", err)
		return 1
	}
	return 0
}

func serveProxy(c *proxyConfig, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	if c.gcHeapFloorMiB > 0 {
		if v := os.Getenv("GOGC"); v != "" {
			log.Info("GOGC is set: no heap floor", "GOGC", v)
		} else {
			floor := gcfloor.Floor(uint64(c.gcHeapFloorMiB)<<20, gcfloor.CgroupMemoryMax())
			defer gcfloor.Start(gcfloor.Options{Floor: floor, Base: 100, Logger: log}).Stop()
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(goCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.Collector())

	var (
		src     rebuild.Source
		client  kubernetes.Interface
		podName = os.Getenv("POD_NAME")
		podNS   = os.Getenv("POD_NAMESPACE")
	)
	if c.manifests != "" {
		ms, err := manifests.New(manifests.Options{Dir: c.manifests, Logger: log})
		if err != nil {
			return fmt.Errorf("reading manifests: %w", err)
		}
		src = ms
		log.Info("reading objects from manifests", "dir", c.manifests)
	} else {
		cfg, err := kubeConfig(c.kubeconfig)
		if err != nil {
			return err
		}
		cfg.UserAgent = "sluice-proxy/" + version.Get().Version
		if client, err = kubernetes.NewForConfig(cfg); err != nil {
			return fmt.Errorf("creating Kubernetes client: %w", err)
		}
		ko := kube.Options{Client: client, Namespaces: c.namespaces, Logger: log}
		if c.gatewayClass != "" {
			if ko.Gateway, err = gwclient.NewForConfig(cfg); err != nil {
				return fmt.Errorf("creating Gateway API client: %w", err)
			}
			log.Info("serving Gateway API", "gatewayClass", c.gatewayClass, "controller", gateway.ControllerName,
				"httpPort", c.gatewayHTTPPort, "httpsPort", c.gatewayHTTPSPort)
		}
		ks, err := kube.New(ko)
		if err != nil {
			return fmt.Errorf("watching the Kubernetes API: %w", err)
		}
		src = ks
		log.Info("reading objects from the Kubernetes API", "host", cfg.Host, "namespace", c.watchNamespace)
	}

	if len(c.ingressClasses) == 0 {
		logCompat := log.Warn
		if c.manifests != "" {
			logCompat = log.Info // one machine, no load balancers to keep apart
		}
		logCompat("no --ingress-class: serving the class sluice and every IngressClass of controller "+translate.ControllerName+
			"; give each proxy fleet its own classes with --ingress-class so an internal class is never served through an internet-facing load balancer",
			"controller", translate.ControllerName)
	} else {
		log.Info("serving only these IngressClasses; Ingresses of other classes get no route", "ingressClasses", []string(c.ingressClasses))
	}
	if c.allowEndpointsWithoutPod || c.allowLoopbackEndpoints {
		log.Info("endpoint checks relaxed", "allowEndpointsWithoutPod", c.allowEndpointsWithoutPod, "allowLoopbackEndpoints", c.allowLoopbackEndpoints)
	}

	var accessLog *slog.Logger
	if c.accessLog {
		accessLog = newLogger(c.logFormat, "info", os.Stdout)
	}
	px := proxy.New(proxy.Options{
		TrustedProxies:          c.trustedProxies,
		DialTimeout:             c.dialTimeout,
		ResponseHeaderTimeout:   c.responseTimeout,
		Retries:                 countOption(c.retries),
		Registerer:              reg,
		Logger:                  log,
		AccessLog:               accessLog,
		AccessLogFields:         c.accessLogFields,
		RequestID:               c.requestID,
		MaxStreamsPerConnection: c.maxStreams,
		SpliceBodies:            c.splice,
		IdleConnTimeout:         c.upstreamIdle,
		UnsafeReuseWindow:       zeroMeansNone(c.unsafeReuse),
		MaxConnsPerEndpoint:     countOption(c.maxConns),
		QueueTimeout:            c.queueTimeout,
		AllowEncodedSlashes:     c.allowEncodedSlashes,
		TunnelIdleTimeout:       zeroMeansNone(c.tunnelIdleTimeout),
	})
	// The catch-all is the release's: the proxy's own namespace in a
	// cluster; with --manifests (no cluster, one tenant) every namespace's.
	var dbNamespaces []string
	if c.manifests == "" {
		dbNamespaces = c.tenancy.namespaces(podNamespace())
	} else {
		dbNamespaces = c.tenancy.namespaces("")
	}
	log.Info("tenancy", "hostOwnership", c.tenancy.hostOwnership, "defaultBackendNamespaces", cmp.Or(strings.Join(dbNamespaces, ","), "*"), "sslRedirect", c.sslRedirect)
	nginxCompat, err := c.nginx.options()
	if err != nil {
		return err
	}
	if nginxCompat != nil {
		log.Info("ingress-nginx compatibility: serving ingress-nginx classes with nginx.ingress.kubernetes.io annotations", "class", nginxCompat.Class, "controller", translate.IngressNginxController)
	}
	loop, err := rebuild.New(rebuild.Options{
		Source:  src,
		Updater: px,
		Translate: translate.Options{
			IngressClasses:           c.ingressClasses,
			DefaultCertificate:       c.defaultCert,
			AllowEndpointsWithoutPod: c.allowEndpointsWithoutPod,
			AllowLoopbackEndpoints:   c.allowLoopbackEndpoints,
			HostOwnership:            c.tenancy.hostOwnership,
			DefaultBackendNamespaces: dbNamespaces,
			SSLRedirect:              c.sslRedirect,
			Gateway:                  c.gatewayOptions(),
			IngressNginx:             nginxCompat,
			ForwardAuthAnyURL:        c.anyAuthURL,
		},
		Registerer: reg,
		Logger:     log,
	})
	if err != nil {
		return err
	}

	var drained <-chan struct{}
	if client != nil && podName != "" && podNS != "" {
		drained = drain.Watch(ctx, client, podNS, podName, log)
		go warnGracePeriod(ctx, client, podNS, podName, c, log)
	} else if c.manifests == "" {
		log.Info("POD_NAME/POD_NAMESPACE not set: draining ends by --drain-max-wait or --drain-quiet-period only")
	}

	fallback, err := server.SelfSigned(time.Now())
	if err != nil {
		return err
	}
	if c.httpsAddress != "" {
		log.Info("generated a self-signed default certificate, served when no certificate matches a client's server name and --default-certificate is unset or its Secret unusable",
			"subject", server.SelfSignedName, "defaultCertificate", c.defaultCert)
	}

	srv, err := server.New(server.Options{
		HTTPAddress:          c.httpAddress,
		HTTPSAddress:         c.httpsAddress,
		AdminAddress:         c.adminAddress,
		Handler:              px,
		GetCertificate:       certificateFrom(px, fallback),
		ProxyProtocol:        c.proxyProtocol,
		TrustedProxies:       c.trustedProxies,
		ReadHeaderTimeout:    c.readHeaderTimeout,
		IdleTimeout:          c.idleTimeout,
		MaxHeaderBytes:       c.maxHeaderBytes,
		BodyIdleTimeout:      zeroMeansNone(c.bodyIdleTimeout),
		WriteIdleTimeout:     zeroMeansNone(c.writeIdleTimeout),
		MaxConnections:       zeroMeansNoLimit(c.maxConnections),
		MaxConcurrentStreams: c.h2MaxStreams,
		DrainMaxWait:         zeroMeansNone(c.drainMaxWait),
		DrainQuietPeriod:     c.drainQuietPeriod,
		ShutdownTimeout:      zeroMeansNone(c.shutdownTimeout),
		HealthOnTrafficPort:  c.healthOnTrafficPort,
		FastHTTP1:            c.fastHTTP1,
		H2C:                  c.h2c,
		ReusePort:            c.reusePort,
		Drained:              drained,
		Ready:                loop.Ready,
		Gatherer:             reg,
		Registerer:           reg,
		Logger:               log,
	})
	if err != nil {
		return err
	}

	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	loopErr := make(chan error, 1)
	go func() { loopErr <- loop.Run(ctx) }()
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx, sigs) }()
	log.Info("sluice proxy started", "version", version.Get().Version, "http", c.httpAddress, "https", c.httpsAddress, "admin", c.adminAddress)

	select {
	case err := <-runErr:
		cancel()
		if errors.Is(err, server.ErrForced) {
			log.Warn("stop forced by a third signal: connections were closed without waiting")
			return nil
		}
		return err
	case err := <-loopErr:
		// The source failed for good: stop serving rather than serve a
		// table that can no longer change.
		cancel()
		<-runErr
		if err == nil {
			err = errors.New("source stopped")
		}
		return err
	}
}

// countOption maps a count flag's 0 ("none": --retries,
// --upstream-max-connections) to proxy.Options, where 0 means the default
// and a negative value means none.
func countOption(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// zeroMeansNone maps a flag's 0 ("none") to the server's negative value; in
// server.Options 0 means "the default".
func zeroMeansNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// zeroMeansNoLimit maps a limit flag's 0 ("no limit") to the server's
// negative value; in server.Options 0 means "the default".
func zeroMeansNoLimit(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// certificateFrom selects the certificate for a TLS handshake from the
// routing table in use, so a certificate rotation is one more table swap:
// the server name's, else the table's default certificate, else fallback
// (also before the first table). Every handshake completes: a host whose
// Secret is missing still answers, with a certificate error for the
// client, and an ACME server that follows a redirect to HTTPS (without
// checking the certificate, as Let's Encrypt does) still gets its answer.
func certificateFrom(px *proxy.Proxy, fallback *tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if t := px.Table(); t != nil {
			if t.HasScopes() && hello.Conn != nil {
				t = t.For(proxyproto.Reached(hello.Conn.LocalAddr())) // route.Scope
			}
			if c := t.Certificate(hello.ServerName); c != nil {
				return c, nil
			}
		}
		return fallback, nil
	}
}

func kubeConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("loading in-cluster configuration (use --kubeconfig or --manifests outside a cluster): %w", err)
	}
	return cfg, nil
}

// warnGracePeriod warns when the pod may be killed before draining and
// shutdown can finish.
func warnGracePeriod(ctx context.Context, client kubernetes.Interface, ns, name string, c *proxyConfig, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	grace, err := drain.GracePeriod(ctx, client, ns, name)
	if err != nil {
		log.Warn("cannot read own pod's terminationGracePeriodSeconds", "error", err)
		return
	}
	if need := c.drainMaxWait + c.shutdownTimeout; grace < need {
		log.Warn("terminationGracePeriodSeconds is shorter than --drain-max-wait + --shutdown-timeout: the kubelet may kill the proxy before it has drained",
			"terminationGracePeriodSeconds", grace.Seconds(), "drainMaxWait", c.drainMaxWait, "shutdownTimeout", c.shutdownTimeout, "needSeconds", need.Seconds())
		return
	}
	log.Info("timers fit: terminationGracePeriodSeconds covers --drain-max-wait + --shutdown-timeout (the controller compares them with the load balancer in the binding's TimersConsistent condition)",
		"terminationGracePeriodSeconds", grace.Seconds(), "drainMaxWait", c.drainMaxWait, "shutdownTimeout", c.shutdownTimeout)
}

// goCollector exports the Go runtime's metrics with, beyond the defaults,
// the scheduler's latency histogram, the stop-the-world pauses and the GC's
// share of CPU (/sched/..., /gc/..., /cpu/classes/gc/...): what a tail
// latency comes from in a Go proxy. make bench reads them around its
// fixed-rate run.
func goCollector() prometheus.Collector {
	return collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.MetricsGC,
		collectors.MetricsScheduler,
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/gc/`)},
	))
}

// deprecations are the deprecated spellings the command line used.
func (c *proxyConfig) deprecations() []string {
	if c == nil {
		return nil
	}
	return c.warnings
}

// gatewayOptions is the Gateway API translation of --gateway-class; nil
// when it is unset.
func (c *proxyConfig) gatewayOptions() *gateway.Options {
	if c.gatewayClass == "" {
		return nil
	}
	o := &gateway.Options{GatewayClass: c.gatewayClass, Gateway: c.gateway, HTTPPort: int32(c.gatewayHTTPPort), HTTPSPort: int32(c.gatewayHTTPSPort), Addresses: c.gatewayAddresses}
	c.gatewayPorts.apply(o)
	return o
}

// parseAddressList parses comma-separated IP addresses (unmapped, sorted,
// without duplicates); "" is none.
func parseAddressList(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is not an IP address", f)
		}
		out = append(out, a.Unmap())
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), nil
}
