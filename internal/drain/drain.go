// Package drain holds the proxy's side of the drain signal: the Pod
// condition the controller sets once the load balancers send an ingress pod
// no new traffic (Condition), a watch that tells the proxy when its own pod
// has it (Watch), and the pod's grace period, which bounds the whole drain
// (GracePeriod).
//
//	controller (podstatus) ─► Pod condition sluice.dev/drained ─► Watch ─► proxy stops accepting
package drain

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source/kube"
)

// Condition is the Pod condition type the controller sets to True on
// an ingress pod once its load balancers send it no new traffic. The proxy
// waits for it before it stops accepting connections.
const Condition = v1alpha1.PodConditionDrained

// defaultGracePeriod is what the API server defaults
// spec.terminationGracePeriodSeconds to.
const defaultGracePeriod = 30 * time.Second

// Watch watches the Pod namespace/name and returns a channel that is
// closed once the Pod has the condition Condition (sluice.dev/drained) with status True.
// The channel stays open if ctx ends first. A Pod that does not exist (yet)
// is logged once and watched for. The watch stops when the channel closes or
// ctx ends. A nil log means slog.Default().
func Watch(ctx context.Context, client kubernetes.Interface, namespace, name string, log *slog.Logger) <-chan struct{} {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("pod", namespace+"/"+name)
	drained := make(chan struct{})
	go watch(ctx, client, namespace, name, log, drained)
	return drained
}

func watch(ctx context.Context, client kubernetes.Interface, namespace, name string, log *slog.Logger, drained chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace),
		informers.WithTransform(kube.StripObject),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	pods := factory.Core().V1().Pods()
	inf := pods.Informer()
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		kube.LogWatchError(log, err)
	}); err != nil {
		log.Error("watching own pod for drain", "err", err)
		return
	}
	var once sync.Once
	check := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Name != name || !hasDrained(pod) {
			return
		}
		once.Do(func() {
			log.Info("pod marked drained", "condition", Condition)
			close(drained)
			cancel()
		})
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { check(obj) },
		UpdateFunc: func(_, obj any) { check(obj) },
	}); err != nil {
		log.Error("watching own pod for drain", "err", err)
		return
	}
	factory.StartWithContext(ctx)
	defer factory.Shutdown()

	if res := factory.WaitForCacheSyncWithContext(ctx); res.Err == nil {
		if _, err := pods.Lister().Pods(namespace).Get(name); err != nil {
			log.Info("own pod not found; waiting for it to appear", "err", err)
		}
	}
	<-ctx.Done()
}

func hasDrained(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == Condition && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// GracePeriod reads spec.terminationGracePeriodSeconds of the Pod
// namespace/name: how long the kubelet waits after SIGTERM before it sends
// SIGKILL. Unset means the API server default of 30s.
func GracePeriod(ctx context.Context, client kubernetes.Interface, namespace, name string) (time.Duration, error) {
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("reading grace period of pod %s/%s: %w", namespace, name, err)
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		return defaultGracePeriod, nil
	}
	return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second, nil
}
