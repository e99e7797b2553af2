package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/bench/internal/result"
	"sluice.dev/sluice/internal/controller/binding"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	state "sluice.dev/sluice/internal/controller/snapshot"
	lbfake "sluice.dev/sluice/internal/lb/fake"
)

// measureController runs the binding reconciler over pods spread evenly
// over bindings, each binding selecting its own pods (label app=sluice-N)
// into its own backend be-N: the first sync (register every target, let
// the fake provider's health check pass, reconcile again to see them
// healthy), then runs steady passes over every binding.
func measureController(rec *result.Record, pods, bindings, runs int) error {
	if pods < 1 || bindings < 1 || runs < 1 {
		return fmt.Errorf("--pods, --bindings and --runs must be positive")
	}
	groups := make([]string, bindings)
	var objs []client.Object
	for b := range bindings {
		groups[b] = fmt.Sprintf("be-%d", b)
		bd := ct.Binding(fmt.Sprintf("b-%d", b), ct.Group(groups[b]))
		bd.Spec.Selector.MatchLabels = map[string]string{"app": fmt.Sprintf("sluice-%d", b)}
		objs = append(objs, bd)
	}
	const nodes = 20
	for n := range nodes {
		objs = append(objs, ct.Node(fmt.Sprintf("node-%d", n), fmt.Sprintf("zone-%c", 'a'+n%3)))
	}
	ca := &podCache{}
	for i := range pods {
		ip := fmt.Sprintf("10.%d.%d.%d", 100+i/65536, i/256%256, i%256)
		ca.pods = append(ca.pods, ct.Pod(fmt.Sprintf("p-%d", i), ip,
			ct.OnNode(fmt.Sprintf("node-%d", i%nodes)),
			ct.Labels(map[string]string{"app": fmt.Sprintf("sluice-%d", i%bindings)})))
	}
	c := ct.NewClient(interceptor.Funcs{List: ca.list, Patch: ca.patch}, objs...)
	objs = nil
	p := lbfake.New(lbfake.Options{Groups: groups})
	base := heapKiB()
	r, err := binding.New(binding.Options{
		Client: c, Providers: ct.Providers{P: p}, Store: state.NewStore(), Recorder: &ct.Recorder{},
		Registerer: prometheus.NewRegistry(),
		Notify:     func(context.Context, []types.NamespacedName) {},
	})
	if err != nil {
		return fmt.Errorf("creating the reconciler: %w", err)
	}
	ctx := context.Background()
	pass := func() error {
		for b := range bindings {
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ct.Namespace, Name: fmt.Sprintf("b-%d", b)}}
			if _, err := r.Reconcile(ctx, req); err != nil {
				return fmt.Errorf("reconciling b-%d: %w", b, err)
			}
		}
		return nil
	}

	t0 := now()
	if err := pass(); err != nil {
		return err
	}
	p.Step() // the provider's health check: every target healthy
	if err := pass(); err != nil {
		return err
	}
	rec.SyncMs, rec.SyncCPUMs = t0.since()
	registered := 0
	for _, g := range groups {
		for _, s := range ct.States(p, g) {
			if len(s) > 0 {
				registered++
			}
		}
	}
	if registered != pods {
		return fmt.Errorf("%d targets registered for %d pods", registered, pods)
	}
	rec.Changes = registered
	// The fake provider logs every call; a steady pass must not grow it
	// by a register or deregister.
	calls := len(p.Calls())
	var wall, cpu []float64
	for range runs {
		runtime.GC()
		t := now()
		if err := pass(); err != nil {
			return err
		}
		w, c := t.since()
		wall, cpu = append(wall, w), append(cpu, c)
	}
	for _, call := range p.Calls()[calls:] {
		if call.Op != lbfake.OpTargets {
			return fmt.Errorf("a steady pass changed targets: %s %s", call.Op, call.Group)
		}
	}
	rec.SteadyMs, rec.SteadyCPUMs = medianOf(wall), medianOf(cpu)
	rec.HeapKiB = heapKiB()
	rec.StateHeapKiB = rec.HeapKiB - base
	runtime.KeepAlive(r)
	runtime.KeepAlive(c)
	return nil
}

// podCache serves the pods as the controller's informer cache does, in
// place of the fake client, whose List converts every object through the
// scheme and would measure itself rather than the reconciler: a pod List
// walks the pods of the namespace, keeps those the label selector
// matches and deep-copies them (controller-runtime's cache reader does the
// same without an index). Pod patches (the pod-deletion-cost annotation)
// are applied to the stored pods; everything else goes to the fake client.
type podCache struct {
	mu   sync.Mutex
	pods []*corev1.Pod
}

func (ca *podCache) list(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	pl, ok := list.(*corev1.PodList)
	if !ok {
		return c.List(ctx, list, opts...)
	}
	var o client.ListOptions
	o.ApplyOptions(opts)
	ca.mu.Lock()
	defer ca.mu.Unlock()
	pl.Items = pl.Items[:0]
	for _, p := range ca.pods {
		if o.Namespace != "" && p.Namespace != o.Namespace {
			continue
		}
		if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(p.Labels)) {
			continue
		}
		pl.Items = append(pl.Items, *p.DeepCopy())
	}
	return nil
}

func (ca *podCache) patch(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return c.Patch(ctx, obj, patch, opts...)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	var mp struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &mp); err != nil {
		return fmt.Errorf("decoding pod patch: %w", err)
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	for _, p := range ca.pods {
		if p.Namespace == pod.Namespace && p.Name == pod.Name {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			maps.Copy(p.Annotations, mp.Metadata.Annotations)
			return nil
		}
	}
	return apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
}
