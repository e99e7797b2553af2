package manager

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"sluice.dev/sluice/internal/controller/binding"
	"sluice.dev/sluice/internal/controller/ingressdaemonset"
	"sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/source/kube"
)

// cacheByObject limits what the informers read to what the RBAC grants
// (docs/security.md). Pods are read only in the binding namespaces, the
// Deployments, DaemonSets and PodDisruptionBudgets of IngressDaemonSets
// only in the IngressDaemonSet namespaces, where the chart grants them by
// Roles; every namespace when a list is empty or holds "*". Secrets: only
// TLS Secrets, as the proxies read (a cluster holds many large Secrets
// that are of no use).
func cacheByObject(bindingNamespaces, idsNamespaces []string) map[client.Object]cache.ByObject {
	by := map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Field: fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS))},
	}
	if in, ok := namespaced(bindingNamespaces); ok {
		by[&corev1.Pod{}] = cache.ByObject{Namespaces: in}
	}
	if in, ok := namespaced(idsNamespaces); ok {
		for _, o := range []client.Object{&appsv1.Deployment{}, &appsv1.DaemonSet{}, &policyv1.PodDisruptionBudget{}} {
			by[o] = cache.ByObject{Namespaces: in}
		}
	}
	return by
}

// namespaced returns the cache configuration of a namespace list, false
// for every namespace (empty, or "*").
func namespaced(namespaces []string) (map[string]cache.Config, bool) {
	if len(namespaces) == 0 || slices.Contains(namespaces, binding.Any) {
		return nil, false
	}
	in := map[string]cache.Config{}
	for _, ns := range namespaces {
		in[ns] = cache.Config{}
	}
	return in, true
}

// setupIngressDaemonSets registers the IngressDaemonSet reconciler; it
// acts only on IngressDaemonSets in the IngressDaemonSet namespaces
// (Access.IngressDaemonSets), refusing the others.
func setupIngressDaemonSets(mgr ctrl.Manager, o Options, store *snapshot.Store, recorder ingressdaemonset.Recorder) error {
	r, err := ingressdaemonset.New(ingressdaemonset.Options{
		Client:             mgr.GetClient(),
		Snapshots:          store.Get,
		Recorder:           recorder,
		HealthCheckerImage: o.NodeHealthImage,
		Check:              o.Access.CheckIngressDaemonSet,
		Poll:               o.FastRequeue,
		Logger:             o.Logger.With("controller", "ingressdaemonset"),
	})
	if err != nil {
		return err
	}
	if err := r.Setup(mgr); err != nil {
		return fmt.Errorf("setting up IngressDaemonSets: %w", err)
	}
	return nil
}

// podWatch starts, on the leader (with the problems reconciler), the
// cluster-wide cache of Pods' addresses the endpoint checks compare
// endpoints with, as the proxies' own (kube.PodWatch: only namespace,
// name, hostNetwork and podIPs of each Pod, not the manager's cache of
// whole Pods, which holds only the binding namespaces'). Its address
// changes are sent on the channel returned.
func podWatch(mgr ctrl.Manager, log *slog.Logger) (*kube.PodWatch, <-chan event.GenericEvent, error) {
	client, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, nil, fmt.Errorf("creating the Pod watch's client: %w", err)
	}
	w := kube.NewPodWatch(client, log.With("controller", "ingressproblems"))
	ch := make(chan event.GenericEvent, 1)
	notify := func() {
		select {
		case ch <- event.GenericEvent{Object: &corev1.Pod{}}:
		default: // one run is queued already
		}
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return w.Run(ctx, notify) })); err != nil {
		return nil, nil, fmt.Errorf("adding the Pod watch: %w", err)
	}
	return w, ch, nil
}
