package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// them).
func runRemoveBindings(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice remove-bindings", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig; default: in-cluster configuration")
	namespace := fs.String("namespace", "", "namespace of the bindings (default: the pod's namespace)")
	selector := fs.String("selector", "", "label selector of the bindings to remove (required)")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the bindings to be gone")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
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
	if err == nil {
		err = removeBindings(ctx, cl, ns, sel, time.Second, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice remove-bindings: %v\n", err)
		return 1
	}
	return 0
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

// removeBindings deletes the bindings in ns that sel matches and polls
// every interval until none is left or ctx ends.
func removeBindings(ctx context.Context, cl client.Client, ns string, sel labels.Selector, interval time.Duration, out io.Writer) error {
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
			// Uninstalling means it: the emptying guard keeps a deleted
			// binding's targets while their pods run (they do, until the
			// release's proxies go), unless the deletion is confirmed for
			// the binding's generation, which deletion may have raised.
			gen := strconv.FormatInt(b.Generation, 10)
			if b.Annotations[v1alpha1.AnnotationConfirmDeregister] != gen {
				patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationConfirmDeregister, gen)
				if err := cl.Patch(ctx, b, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("confirming the deregistration of binding %s/%s: %w", ns, b.Name, err)
				}
				fmt.Fprintf(out, "confirmed the deregistration of binding %s/%s (generation %s)\n", ns, b.Name, gen)
			}
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
		case <-time.After(interval):
		}
	}
}
