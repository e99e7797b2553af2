package kube

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"sluice.dev/sluice/internal/translate"
)

// fullPod is a Pod as the API server returns it: containers, environment,
// volumes, conditions, managed fields.
func fullPod(ns, name string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels:          map[string]string{"app": "web", "pod-template-hash": "5d8f7c9b6d"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-26T10:00:00Z"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: "Update", FieldsV1: &metav1.FieldsV1{Raw: make([]byte, 600)}}},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f7c9b6d", UID: "rs"}}},
		Spec: corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "default"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "192.0.2.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}
	for i := range 2 {
		c := corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "registry.example.com/team/web:1.2.3",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
			VolumeMounts: []corev1.VolumeMount{{Name: "token", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}}
		for j := range 8 {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: "some-value-of-a-setting"})
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Ready: true,
			Image: c.Image, ImageID: "registry.example.com/team/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"})
	}
	p.Spec.Volumes = []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	return p
}

func TestStripPod(t *testing.T) {
	p := fullPod("team-a", "web-1", "10.244.1.5", "fd00::5")
	p.Spec.HostNetwork = true
	got, err := StripPod(p)
	if err != nil {
		t.Fatal(err)
	}
	want := &cachedPod{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "team-a", Name: "web-1", UID: "uid-web-1", ResourceVersion: "1"},
		HostNetwork: true,
		IPs:         []string{"10.244.1.5", "fd00::5"},
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("StripPod =\n%+v\nwant\n%+v", got, want)
	}
	again, _ := StripPod(got)
	if fmt.Sprintf("%+v", again) != fmt.Sprintf("%+v", want) {
		t.Errorf("StripPod not idempotent: %+v", again)
	}
	c := got.(*cachedPod).DeepCopyObject().(*cachedPod)
	c.IPs[0] = "changed"
	if got.(*cachedPod).IPs[0] != "10.244.1.5" {
		t.Error("DeepCopyObject shares the addresses")
	}
	d := cache.DeletedFinalStateUnknown{Key: "a/b"}
	if o, _ := StripPod(d); o != any(d) {
		t.Errorf("StripPod changed a tombstone: %v", o)
	}
}

// TestPodHandlerNotifiesAddressChanges: only changes translation sees
// notify: a Pod with addresses added or deleted, or its addresses
// changed; never a status update that keeps them, nor a Pending Pod.
func TestPodHandlerNotifiesAddressChanges(t *testing.T) {
	s := &Source{}
	s.synced.Store(true)
	var n int
	h := s.podHandler(func() { n++ })
	strip := func(p *corev1.Pod) any {
		c, _ := StripPod(p)
		return c
	}
	withIP := strip(fullPod("a", "p", "10.0.0.1"))
	pending := strip(fullPod("a", "p"))
	moved := strip(fullPod("a", "p", "10.0.0.2"))
	dual := strip(fullPod("a", "p", "10.0.0.1", "fd00::1"))
	np := fullPod("a", "p", "10.0.0.1")
	np.Status.Conditions[0].Status = corev1.ConditionFalse
	np.ResourceVersion = "2"
	notReady := strip(np)
	for _, tc := range []struct {
		name string
		do   func()
		want int
	}{
		{"add with address", func() { h.OnAdd(withIP, false) }, 1},
		{"add Pending", func() { h.OnAdd(pending, false) }, 0},
		{"update: conditions only", func() { h.OnUpdate(withIP, notReady) }, 0},
		{"update: Pending to running", func() { h.OnUpdate(pending, withIP) }, 1},
		{"update: address changed", func() { h.OnUpdate(withIP, moved) }, 1},
		{"update: second family added", func() { h.OnUpdate(withIP, dual) }, 1},
		{"update: Pending stays Pending", func() { h.OnUpdate(pending, pending) }, 0},
		{"delete with address", func() { h.OnDelete(withIP) }, 1},
		{"delete Pending", func() { h.OnDelete(pending) }, 0},
		{"delete tombstone", func() { h.OnDelete(cache.DeletedFinalStateUnknown{Key: "a/p", Obj: withIP}) }, 1},
		{"delete tombstone without object", func() { h.OnDelete(cache.DeletedFinalStateUnknown{Key: "a/p"}) }, 1},
	} {
		n = 0
		tc.do()
		if n != tc.want {
			t.Errorf("%s: %d notifies, want %d", tc.name, n, tc.want)
		}
	}
	s.synced.Store(false)
	n = 0
	h.OnAdd(withIP, true)
	if n != 0 {
		t.Error("notified before the first load")
	}
}

// TestSliceBeforePod: a slice whose Pod is not yet in the cache gets its
// endpoint refused; the Pod's arrival notifies, and the next build uses
// it. A status update of the Pod that keeps its address notifies nothing.
func TestSliceBeforePod(t *testing.T) {
	es := slice("team-b", "web-x", "10.244.2.7")
	es.Labels = map[string]string{discoveryv1.LabelServiceName: "web"}
	es.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "team-b", Name: "b-1"}
	h := start(t, nil, es)
	in := h.src.Snapshot()
	if in.Pods == nil {
		t.Fatal("Snapshot has no Pod index")
	}
	if _, ok := in.Pods.PodIPs("team-b", "b-1"); ok {
		t.Fatal("Pod known before it exists")
	}

	ctx := context.Background()
	pod := fullPod("team-b", "b-1", "10.244.2.7")
	if _, err := h.client.CoreV1().Pods("team-b").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the Pod's address", func(in translate.Input) bool {
		ips, ok := in.Pods.PodIPs("team-b", "b-1")
		return ok && len(ips) == 1 && ips[0] == "10.244.2.7"
	})

	// Count the notifies of the Pod handler for updates alone (a new
	// handler first gets the cache replayed as adds): a conditions-only
	// update, then an address change. Events of one informer arrive in
	// order, so when the second notified, the first was handled.
	var n atomic.Int32
	notified := make(chan struct{}, 1)
	updates := h.src.podHandler(func() {
		n.Add(1)
		select {
		case notified <- struct{}{}:
		default:
		}
	})
	if _, err := h.src.podInformers["Pod"].AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: updates.OnUpdate}); err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions[0].Status = corev1.ConditionFalse
	pod.ResourceVersion = "2"
	if _, err := h.client.CoreV1().Pods("team-b").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: "fd00::7"})
	pod.ResourceVersion = "3"
	if _, err := h.client.CoreV1().Pods("team-b").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-notified:
	case <-time.After(waitTimeout):
		t.Fatal("no notify for the address change")
	}
	if got := n.Load(); got != 1 {
		t.Errorf("%d notifies for a conditions-only update and an address change; want 1", got)
	}
}

// TestPodCacheSize measures what the Pod cache holds per Pod: 5000 Pods
// as the API server returns them, cached whole (what a plain informer
// would keep) and stripped (StripPod). The fake clientset holds its own
// copies throughout; the difference of the live heap before and after
// the cache synced is the cache's.
func TestPodCacheSize(t *testing.T) {
	if testing.Short() {
		t.Skip("5000 Pods")
	}
	const pods = 5000
	client := fake.NewClientset()
	for i := range pods {
		p := fullPod(fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("web-%d", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		if err := client.Tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	measure := func(strip bool) float64 {
		var opts []informers.SharedInformerOption
		if strip {
			opts = append(opts, informers.WithTransform(StripPod))
		}
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
		inf := f.Core().V1().Pods().Informer()
		before := liveHeap()
		ctx, cancel := context.WithCancel(context.Background())
		f.Start(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("no sync")
		}
		after := liveHeap()
		if got := len(inf.GetStore().ListKeys()); got != pods {
			t.Fatalf("%d Pods cached, want %d", got, pods)
		}
		cancel()
		f.Shutdown()
		return float64(after-before) / pods
	}
	whole, stripped := measure(false), measure(true)
	t.Logf("Pod cache: %.0f bytes/Pod stripped, %.0f bytes/Pod whole (%d Pods: %.1f MiB vs %.1f MiB)",
		stripped, whole, pods, stripped*pods/(1<<20), whole*pods/(1<<20))
	if stripped > 768 {
		t.Errorf("stripped Pod cache: %.0f bytes per Pod, want < 768", stripped)
	}
	if stripped*5 > whole {
		t.Errorf("stripped Pod cache %.0f bytes per Pod, whole %.0f: want a fifth or less", stripped, whole)
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestPodWatch: the controller's watch notifies after its first load and
// for an address change, and answers lookups from its cache.
func TestPodWatch(t *testing.T) {
	client := fake.NewClientset(fullPod("team-a", "a-1", "10.244.1.5"))
	w := NewPodWatch(client, testLogger(t))
	notes := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- w.Run(ctx, func() {
			select {
			case notes <- struct{}{}:
			default:
			}
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-notes:
		case <-time.After(waitTimeout):
			t.Fatalf("no notify after %s", what)
		}
	}
	wait("first load")
	if !w.Synced() {
		t.Fatal("notified before Synced")
	}
	if ips, ok := w.PodIPs("team-a", "a-1"); !ok || len(ips) != 1 || ips[0] != "10.244.1.5" {
		t.Fatalf("PodIPs = %v, %v", ips, ok)
	}
	if _, err := client.CoreV1().Pods("team-b").Create(ctx, fullPod("team-b", "b-1", "10.244.2.7"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A notify of the first load's replay may still be queued: wait on
	// notifies until the Pod shows.
	for {
		wait("a new Pod")
		if ips, ok := w.PodIPs("team-b", "b-1"); ok && len(ips) == 1 && ips[0] == "10.244.2.7" {
			break
		}
	}
}
