package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
)

// runRemoveBindings runs `sluice remove-bindings`: it deletes the
// LoadBalancerBindings a release made and waits until the controller has
// deregistered their targets and let them go. The Helm chart runs it as a
// pre-delete hook, while the controller still runs: `helm uninstall`
// deleting the bindings and the controller at once would leave the
// bindings stuck on their finalizer (and a later install unable to create
// them). With --abandon it also lets each deleted binding go without
// deregistering its targets (sluice.dev/abandon-targets), for a provider
// that is gone or unreachable for good. With --ingress-daemonsets it first
// deletes the release's IngressDaemonSets and waits until the controller
// has let them go (their finalizer reattaches the nodes they detached), so
// that a chart with proxy.kind IngressDaemonSet uninstalls in one step.
func runRemoveBindings(args []string, stdout, stderr io.Writer) int {
	var c removeBindingsConfig
	fs := c.flags(stderr)
	if err := fs.parse(args); err != nil {
		return usageError(stderr, "remove-bindings", err)
	}
	kubeconfig, namespace, selector, timeout, abandon := &c.kubeconfig, &c.namespace, &c.selector, &c.timeout, &c.abandon
	withIDS := c.ingressDaemonSets
	ns := *namespace
	if ns == "" {
		ns = controllerNamespace("", "")
	}
	sel, err := labels.Parse(*selector)
	var problem string
	switch {
	case *selector == "":
		problem = "--selector is required (a label selector)"
	case err != nil:
		problem = fmt.Sprintf("--selector: %v", err)
	case ns == "":
		problem = "no namespace: set --namespace (or POD_NAMESPACE)"
	case fs.NArg() > 0:
		problem = fmt.Sprintf("unexpected arguments %q", fs.Args())
	case *timeout <= 0:
		problem = "--timeout must be positive"
	}
	if problem != "" {
		fmt.Fprintf(stderr, "sluice remove-bindings: %s\n", problem)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl, err := bindingClient(*kubeconfig)
	if err == nil && withIDS {
		err = removeIngressDaemonSets(ctx, cl, ns, sel, time.Second, stdout)
	}
	if err == nil {
		err = removeBindings(ctx, cl, ns, sel, removeOptions{interval: time.Second, abandon: *abandon}, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice remove-bindings: %v\n", err)
		return 1
	}
	return 0
}

// removeBindingsConfig is `sluice remove-bindings`'s flags.
type removeBindingsConfig struct {
	kubeconfig, namespace, selector string
	timeout                         time.Duration
	abandon, ingressDaemonSets      bool
}

// flags declares `sluice remove-bindings`'s flags into c.
func (c *removeBindingsConfig) flags(stderr io.Writer) *flagSet {
	fs := newFlagSet("sluice remove-bindings", stderr)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: in-cluster configuration")
	fs.StringVar(&c.namespace, "namespace", "", "namespace of the bindings (default: the pod's namespace)")
	fs.StringVar(&c.selector, "selector", "", "label selector of the bindings to remove (required)")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "how long to wait for the bindings to be gone")
	fs.BoolVar(&c.abandon, "abandon", false, "let the deleted bindings go without deregistering their targets (annotates each "+
		v1alpha1.AnnotationAbandonTargets+"=<generation>): the targets stay in the load balancer for you to remove; "+
		"for a provider that is unreachable for good (a binding reporting DeletionBlocked)")
	fs.BoolVar(&c.ingressDaemonSets, "ingress-daemonsets", false, "first delete the IngressDaemonSets the selector matches and wait "+
		"until the controller has let them go (the chart's proxy.kind IngressDaemonSet)")
	return fs
}

func bindingClient(kubeconfig string) (client.Client, error) {
	cfg, err := kubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return cl, nil
}

// removeOptions: how often removeBindings polls, and whether it abandons
// the bindings' targets.
type removeOptions struct {
	interval time.Duration
	abandon  bool
}

// removeBindings deletes the bindings in ns that sel matches and polls
// every o.interval until none is left or ctx ends. A deleted binding is
// annotated to confirm its deregistration (and with o.abandon, to abandon
// its targets), at its generation after the deletion; a binding that
// reports DeletionBlocked is reported once.
func removeBindings(ctx context.Context, cl client.Client, ns string, sel labels.Selector, o removeOptions, out io.Writer) error {
	blocked := map[string]bool{}
	list := func() ([]string, error) {
		var l v1alpha1.LoadBalancerBindingList
		if err := cl.List(ctx, &l, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, fmt.Errorf("listing bindings in %s: %w", ns, err)
		}
		var names []string
		for i := range l.Items {
			b := &l.Items[i]
			names = append(names, b.Name)
			if b.DeletionTimestamp == nil {
				if err := cl.Delete(ctx, b); err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("deleting binding %s/%s: %w", ns, b.Name, err)
				}
				fmt.Fprintf(out, "deleting binding %s/%s\n", ns, b.Name)
				continue
			}
			if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionDeletionBlocked); c != nil && c.Status == metav1.ConditionTrue && !blocked[b.Name] {
				blocked[b.Name] = true
				fmt.Fprintf(out, "binding %s/%s: deletion blocked (%s): %s\n", ns, b.Name, c.Reason, c.Message)
			}
			// Uninstalling means it: the emptying guard keeps a deleted
			// binding's targets while their pods run (they do, until the
			// release's proxies go), unless the deletion is confirmed for
			// the binding's generation, which deletion may have raised.
			gen := strconv.FormatInt(b.Generation, 10)
			want := map[string]string{v1alpha1.AnnotationConfirmDeregister: gen}
			if o.abandon {
				want[v1alpha1.AnnotationAbandonTargets] = gen
			}
			var missing []string
			for k, v := range want {
				if b.Annotations[k] != v {
					missing = append(missing, k)
				}
			}
			if len(missing) == 0 {
				continue
			}
			slices.Sort(missing)
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want}})
			if err != nil {
				return nil, fmt.Errorf("encoding the annotations of binding %s/%s: %w", ns, b.Name, err)
			}
			if err := cl.Patch(ctx, b, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("annotating binding %s/%s: %w", ns, b.Name, err)
			}
			fmt.Fprintf(out, "annotated binding %s/%s %s (generation %s)\n", ns, b.Name, strings.Join(missing, ", "), gen)
		}
		return names, nil
	}
	for {
		left, err := list()
		if err != nil {
			return err
		}
		if len(left) == 0 {
			fmt.Fprintln(out, "no binding left")
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for bindings %s in %s to be finalized by the controller: %w", strings.Join(left, ", "), ns, ctx.Err())
		case <-time.After(o.interval):
		}
	}
}

// removeIngressDaemonSets deletes the IngressDaemonSets in ns that sel
// matches and polls every interval until none is left or ctx ends. The
// controller's finalizer reattaches the nodes they detached; their
// Deployments go with them (owner references), their proxies draining as
// any proxy does.
func removeIngressDaemonSets(ctx context.Context, cl client.Client, ns string, sel labels.Selector, interval time.Duration, out io.Writer) error {
	for {
		var l v1alpha1.IngressDaemonSetList
		if err := cl.List(ctx, &l, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return fmt.Errorf("listing IngressDaemonSets in %s: %w", ns, err)
		}
		if len(l.Items) == 0 {
			fmt.Fprintln(out, "no IngressDaemonSet left")
			return nil
		}
		var left []string
		for i := range l.Items {
			ids := &l.Items[i]
			left = append(left, ids.Name)
			if ids.DeletionTimestamp != nil {
				continue
			}
			if err := cl.Delete(ctx, ids); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting IngressDaemonSet %s/%s: %w", ns, ids.Name, err)
			}
			fmt.Fprintf(out, "deleting IngressDaemonSet %s/%s\n", ns, ids.Name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for IngressDaemonSets %s in %s to be finalized by the controller: %w", strings.Join(left, ", "), ns, ctx.Err())
		case <-time.After(interval):
		}
	}
}
