package manager

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	"sluice.dev/sluice/internal/controller/ingressdaemonset"
	"sluice.dev/sluice/internal/controller/snapshot"
)

// cacheByObject limits what the informers read to what the RBAC grants
// (README, Security). Pods, and the Deployments, DaemonSets and
// PodDisruptionBudgets of IngressDaemonSets, are read only in the binding
// namespaces, where the chart grants them by Roles; every namespace when
// namespaces is empty or holds "*". Secrets: only TLS Secrets, as the
// proxies read (a cluster holds many large Secrets that are of no use).
func cacheByObject(namespaces []string) map[client.Object]cache.ByObject {
	by := map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Field: fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS))},
	}
	if len(namespaces) == 0 || slices.Contains(namespaces, binding.Any) {
		return by
	}
	in := map[string]cache.Config{}
	for _, ns := range namespaces {
		in[ns] = cache.Config{}
	}
	for _, o := range []client.Object{&corev1.Pod{}, &appsv1.Deployment{}, &appsv1.DaemonSet{}, &policyv1.PodDisruptionBudget{}} {
		by[o] = cache.ByObject{Namespaces: in}
	}
	return by
}

// setupIngressDaemonSets registers the IngressDaemonSet reconciler; it
// acts only on IngressDaemonSets in the binding namespaces.
func setupIngressDaemonSets(mgr ctrl.Manager, o Options, store *snapshot.Store, recorder ingressdaemonset.Recorder) error {
	r, err := ingressdaemonset.New(ingressdaemonset.Options{
		Client:             mgr.GetClient(),
		Snapshots:          store.Get,
		Recorder:           recorder,
		HealthCheckerImage: o.NodeHealthImage,
		Allowed: func(ns string) bool {
			return o.Access.Check(&v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}) == nil
		},
		Poll:   o.FastRequeue,
		Logger: o.Logger.With("controller", "ingressdaemonset"),
	})
	if err != nil {
		return err
	}
	if err := r.Setup(mgr); err != nil {
		return fmt.Errorf("setting up IngressDaemonSets: %w", err)
	}
	return nil
}
