package problems

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/translate"
)

// fakePods is a PodIndex over a map.
type fakePods struct {
	translate.PodMap
	synced bool
}

func (f *fakePods) Synced() bool { return f.synced }

// TestForgedEndpointAnnounced: with the Pod index, an endpoint whose
// address is not the named Pod's (another namespace's Pod's address) is an
// EndpointsRefused Event naming the slice and the address, as the
// proxies refuse it; the true endpoint is not named. Until the index has
// synced, nothing is announced and the run is tried again.
func TestForgedEndpointAnnounced(t *testing.T) {
	ctx := context.Background()
	port, name := int32(8080), "http"
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-forged", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-a"}},
			{Addresses: []string{"10.244.9.9"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-a"}},
		},
	}
	pods := &fakePods{PodMap: translate.PodMap{"default/web-a": {"10.244.1.1"}, "victim/db-0": {"10.244.9.9"}}}
	c := ct.NewClient(interceptor.Funcs{}, ingress("shop", "web", nil, 1), service("web"), slice)
	rec := &ct.Recorder{}
	r, err := New(Options{Client: c, Notices: &ct.Notices{Recorder: rec}, Pods: pods})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(ctx, reconcile.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if evs := rec.Events(); len(evs) != 0 || res.RequeueAfter != podsUnsynced {
		t.Fatalf("before the Pod index synced: events %v, requeue %v; want none, %v", evs, res.RequeueAfter, podsUnsynced)
	}
	pods.synced = true
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	evs := rec.Events()
	if len(evs) != 1 || evs[0].Reason != "EndpointsRefused" || !strings.HasSuffix(evs[0].Object, "default/shop") {
		t.Fatalf("events %v, want one EndpointsRefused on default/shop", evs)
	}
	note := evs[0].Note
	if !strings.Contains(note, `10.244.9.9 of EndpointSlice "web-forged" (address is not the targetRef Pod's)`) ||
		strings.Contains(note, "10.244.1.1") || strings.Contains(note, "victim") || strings.Contains(note, "db-0") {
		t.Errorf("event %q: want the forged address and the slice named, the true one not, nothing of the victim but its address", note)
	}
}
