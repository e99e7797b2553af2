package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/explain"
)

// runExplain runs `sluice explain ingress NS/NAME` and `sluice explain
// binding NS/NAME`: it reads what the controller reads, with the caller's
// own credentials, and prints the chain with the cause of anything broken
// (internal/explain). Exit status: 0 when nothing is broken, 1 when a
// cause was found, 2 for a usage or read error.
func runExplain(args []string, stdout, stderr io.Writer) int {
	var c explainConfig
	fs := c.flags(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "arguments: ingress|binding|gateway NAMESPACE/NAME")
		fs.usage()
	}
	kubeconfig, controllerNS, class, output, timeout := &c.kubeconfig, &c.controllerNS, &c.class, &c.output, &c.timeout
	pos, err := fs.parseArgs(args)
	if err != nil {
		return usageError(stderr, "explain", err)
	}
	if len(pos) != 2 || !slices.Contains([]string{"ingress", "binding", "gateway"}, pos[0]) || *output != "text" && *output != "json" {
		fs.Usage()
		return 2
	}
	ns, name, ok := strings.Cut(pos[1], "/")
	if !ok || ns == "" || name == "" {
		fmt.Fprintf(stderr, "sluice explain: %q: want NAMESPACE/NAME\n", pos[1])
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl, err := explainClient(*kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "sluice explain: %v\n", err)
		return 2
	}
	s, err := readExplainState(ctx, cl, pos[0], ns, name, *controllerNS)
	if err != nil {
		fmt.Fprintf(stderr, "sluice explain: %v\n", err)
		return 2
	}
	s.IngressClass = *class
	var rep explain.Report
	switch pos[0] {
	case "ingress":
		rep = explain.Ingress(s)
	case "gateway":
		rep = explain.Gateway(s)
	default:
		rep = explain.Binding(s)
	}
	return printReport(stdout, stderr, "explain", *output, rep, !rep.Healthy())
}

// explainConfig is `sluice explain`'s flags.
type explainConfig struct {
	kubeconfig, controllerNS, class, output string
	timeout                                 time.Duration
}

// flags declares `sluice explain`'s flags into c.
func (c *explainConfig) flags(stderr io.Writer) *flagSet {
	fs := newFlagSet("sluice explain", stderr)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: $KUBECONFIG, ~/.kube/config, else the in-cluster configuration")
	fs.StringVar(&c.controllerNS, "controller-namespace", "sluice-system", "the controller's namespace (the chart's release namespace): its bindings serve the IngressClasses that name none")
	fs.StringVar(&c.class, "ingress-class", "sluice", "the proxies' --ingress-class")
	fs.StringVar(&c.output, "output", "text", `"text" or "json"`)
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long the reads may take")
	return fs
}

// explainClient is a client with the caller's kubeconfig (the usual
// loading rules, unlike the in-cluster commands; in a pod without one, the
// in-cluster configuration), for the kinds explain reads.
func explainClient(kubeconfig string) (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil && kubeconfig == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	if err := gatewayv1.Install(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return cl, nil
}

// readExplainState reads what explaining kind ns/name needs. An object the
// caller may not read is left out (and said so where it matters); other
// errors end the read.
func readExplainState(ctx context.Context, cl client.Client, kind, ns, name, controllerNS string) (explain.State, error) {
	s := explain.State{Namespace: ns, Name: name, ControllerNamespace: controllerNS, Now: time.Now()}
	forbidden := func(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsNotFound(err) }
	var classes networkingv1.IngressClassList
	if err := cl.List(ctx, &classes); err != nil && !forbidden(err) {
		return s, fmt.Errorf("listing IngressClasses: %w", err)
	}
	s.Classes = classes.Items
	var bindings v1alpha1.LoadBalancerBindingList
	if err := cl.List(ctx, &bindings); err != nil {
		if !forbidden(err) && !isNoMatch(err) {
			return s, fmt.Errorf("listing LoadBalancerBindings: %w", err)
		}
	}
	s.Bindings = bindings.Items
	podNS := map[string]bool{}
	for _, b := range s.Bindings {
		podNS[b.Namespace] = true
	}
	switch kind {
	case "binding":
		for i := range s.Bindings {
			if s.Bindings[i].Namespace == ns && s.Bindings[i].Name == name {
				s.Binding = &s.Bindings[i]
			}
		}
	case "gateway":
		if err := readGatewayState(ctx, cl, &s, forbidden); err != nil {
			return s, err
		}
	default:
		var ing networkingv1.Ingress
		switch err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ing); {
		case err == nil:
			s.Ingress = &ing
		case !forbidden(err):
			return s, fmt.Errorf("reading Ingress %s/%s: %w", ns, name, err)
		}
		var svcs corev1.ServiceList
		if err := cl.List(ctx, &svcs, client.InNamespace(ns)); err != nil && !forbidden(err) {
			return s, fmt.Errorf("listing Services: %w", err)
		}
		s.Services = svcs.Items
		var slices discoveryv1.EndpointSliceList
		if err := cl.List(ctx, &slices, client.InNamespace(ns)); err != nil && !forbidden(err) {
			return s, fmt.Errorf("listing EndpointSlices: %w", err)
		}
		s.EndpointSlices = slices.Items
		if s.Ingress != nil {
			for _, t := range s.Ingress.Spec.TLS {
				if t.SecretName == "" {
					continue
				}
				var sec corev1.Secret
				switch err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.SecretName}, &sec); {
				case err == nil:
					s.Secrets = append(s.Secrets, sec)
				case apierrors.IsForbidden(err):
					s.SecretsUnread = true
				case !apierrors.IsNotFound(err):
					return s, fmt.Errorf("reading Secret %s/%s: %w", ns, t.SecretName, err)
				}
			}
		}
		var evs eventsv1.EventList
		if err := cl.List(ctx, &evs, client.InNamespace(ns)); err != nil && !forbidden(err) {
			return s, fmt.Errorf("listing Events: %w", err)
		}
		s.Events = evs.Items
	}
	for pns := range podNS {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(pns)); err != nil && !forbidden(err) {
			return s, fmt.Errorf("listing the proxies' Pods in %s: %w", pns, err)
		}
		s.Pods = append(s.Pods, pods.Items...)
	}
	return s, nil
}

// readGatewayState reads the Gateway s.Namespace/s.Name, the
// GatewayClasses, the HTTPRoutes and GRPCRoutes the caller may list, and the Events of the
// Gateway's namespace and of the namespaces of the routes naming it. The
// Gateway API CRDs missing reads as no Gateway.
func readGatewayState(ctx context.Context, cl client.Client, s *explain.State, forbidden func(error) bool) error {
	skip := func(err error) bool { return forbidden(err) || isNoMatch(err) }
	var gw gatewayv1.Gateway
	switch err := cl.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, &gw); {
	case err == nil:
		s.Gateway = &gw
	case !skip(err):
		return fmt.Errorf("reading Gateway %s/%s: %w", s.Namespace, s.Name, err)
	}
	var classes gatewayv1.GatewayClassList
	if err := cl.List(ctx, &classes); err != nil && !skip(err) {
		return fmt.Errorf("listing GatewayClasses: %w", err)
	}
	s.GatewayClasses = classes.Items
	var routes gatewayv1.HTTPRouteList
	err := cl.List(ctx, &routes)
	if forbidden(err) { // the caller may read its own namespace only
		err = cl.List(ctx, &routes, client.InNamespace(s.Namespace))
	}
	if err != nil && !skip(err) {
		return fmt.Errorf("listing HTTPRoutes: %w", err)
	}
	s.HTTPRoutes = routes.Items
	var grpcRoutes gatewayv1.GRPCRouteList // its CRD is optional
	err = cl.List(ctx, &grpcRoutes)
	if forbidden(err) {
		err = cl.List(ctx, &grpcRoutes, client.InNamespace(s.Namespace))
	}
	if err != nil && !skip(err) {
		return fmt.Errorf("listing GRPCRoutes: %w", err)
	}
	s.GRPCRoutes = grpcRoutes.Items
	evNS := map[string]bool{s.Namespace: true}
	names := func(ns string, refs []gatewayv1.ParentReference) {
		for _, p := range refs {
			pns := ns
			if p.Namespace != nil {
				pns = string(*p.Namespace)
			}
			if pns == s.Namespace && string(p.Name) == s.Name {
				evNS[ns] = true
			}
		}
	}
	for _, r := range s.HTTPRoutes {
		names(r.Namespace, r.Spec.ParentRefs)
	}
	for _, r := range s.GRPCRoutes {
		names(r.Namespace, r.Spec.ParentRefs)
	}
	for ns := range evNS {
		var evs eventsv1.EventList
		if err := cl.List(ctx, &evs, client.InNamespace(ns)); err != nil && !forbidden(err) {
			return fmt.Errorf("listing Events of %s: %w", ns, err)
		}
		s.Events = append(s.Events, evs.Items...)
	}
	return nil
}

// isNoMatch reports a kind the API server does not serve (the CRDs are
// not installed).
func isNoMatch(err error) bool {
	return strings.Contains(err.Error(), "no matches for kind")
}
