package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"sluice.dev/sluice/internal/nodehealth"
	"sluice.dev/sluice/internal/version"
)

// nodeHealthConfig is `sluice node-health`'s flags.
type nodeHealthConfig struct {
	healthAddress string
	kubeconfig    string
	nodeName      string
	namespace     string
	selector      labels.Selector
	rules         nodehealth.Rules
	logFormat     string
	logLevel      string
	selectorFlag  string
	// warnings name the deprecated spellings the command line used.
	warnings []string
}

// flags declares `sluice node-health`'s flags into c.
func (c *nodeHealthConfig) flags(stderr io.Writer) *flagSet {
	fs := newFlagSet("sluice node-health", stderr)
	fs.StringVar(&c.healthAddress, "health-address", ":10254", "address of the health endpoint (host network: the load balancer's health-check port, e.g. the IngressDaemonSet's healthCheckNodePort); required")
	fs.alias("listen", "health-address")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: in-cluster configuration")
	fs.StringVar(&c.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME, from the downward API spec.nodeName)")
	fs.StringVar(&c.namespace, "namespace", "", "namespace of the ingress replicas (default: this pod's namespace)")
	fs.StringVar(&c.selectorFlag, "selector", "", "label selector of the ingress replicas (required)")
	fs.StringVar(&c.rules.DetachAnnotation, "detach-annotation", nodehealth.DefaultDetachAnnotation, "node annotation that marks the node as being detached from the load balancer (empty: no check)")
	fs.StringVar(&c.rules.DetachValue, "detach-value", nodehealth.DefaultDetachValue, "value of --detach-annotation that means detaching (empty: any value)")
	fs.StringVar(&c.rules.UpdatePendingAnnotation, "update-pending-annotation", nodehealth.DefaultUpdatePendingAnnotation, "node annotation whose value (anything but empty or \"false\") means the node's replicas are about to be replaced (empty: no check)")
	fs.IntVar(&c.rules.MinReady, "min-ready", 0, "replicas that must be ready (ContainersReady): 0 means every replica on the node")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return fs
}

func parseNodeHealthFlags(args []string, stderr io.Writer) (*nodeHealthConfig, error) {
	c := &nodeHealthConfig{}
	fs := c.flags(stderr)
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	c.warnings = fs.warnings
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if c.nodeName == "" {
		return nil, errors.New("--node-name (or $NODE_NAME) is required")
	}
	if c.selectorFlag == "" {
		return nil, errors.New("--selector is required")
	}
	var err error
	if c.selector, err = labels.Parse(c.selectorFlag); err != nil {
		return nil, fmt.Errorf("--selector: %w", err)
	}
	if c.namespace = controllerNamespace(c.namespace, ""); c.namespace == "" {
		return nil, errors.New("--namespace is required outside a pod")
	}
	if c.rules.MinReady < 0 {
		return nil, fmt.Errorf("--min-ready must not be negative, not %d", c.rules.MinReady)
	}
	c.healthAddress = listenAddress(c.healthAddress)
	if _, _, err := net.SplitHostPort(c.healthAddress); err != nil {
		return nil, fmt.Errorf("--health-address: %w", err)
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return nil, fmt.Errorf("--log-format must be text or json, not %q", c.logFormat)
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		return nil, err
	}
	return c, nil
}

// runNodeHealth runs `sluice node-health`, the per-node health check of
// instance-mode load balancers (internal/nodehealth has the contract).
func runNodeHealth(args []string, stdout, stderr io.Writer) int {
	c, err := parseNodeHealthFlags(args, stderr)
	if err != nil {
		return usageError(stderr, "node-health", err)
	}
	log := newLogger(c.logFormat, c.logLevel, stderr)
	logDeprecated(log, c.warnings)
	klog.SetSlogLogger(log.With("component", "client-go"))
	if err := serveNodeHealth(c, log); err != nil {
		log.Error("sluice node-health failed", "error", err)
		return 1
	}
	return 0
}

func serveNodeHealth(c *nodeHealthConfig, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := kubeConfig(c.kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	checker := nodehealth.New(nodehealth.Options{
		Client: client, NodeName: c.nodeName, Namespace: c.namespace, Selector: c.selector,
		Rules: c.rules, Resync: 10 * time.Minute, Logger: log,
	})
	checker.Start(ctx)
	ln, err := net.Listen("tcp", c.healthAddress)
	if err != nil {
		return fmt.Errorf("binding %s: %w", c.healthAddress, err)
	}
	srv := &http.Server{Handler: checker, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("sluice node-health started", "version", version.Get().Version, "address", ln.Addr(), "node", c.nodeName,
		"namespace", c.namespace, "selector", c.selector.String())
	select {
	case err := <-errc:
		return fmt.Errorf("serving %s: %w", c.healthAddress, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// deprecations are the deprecated spellings the command line used.
func (c *nodeHealthConfig) deprecations() []string {
	if c == nil {
		return nil
	}
	return c.warnings
}
