package ingressstatus_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/ingressstatus"
)

func ingress(name string, opts ...func(*networkingv1.Ingress)) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}}
	for _, o := range opts {
		o(ing)
	}
	return ing
}

func className(c string) func(*networkingv1.Ingress) {
	return func(i *networkingv1.Ingress) { i.Spec.IngressClassName = &c }
}

func annotation(c string) func(*networkingv1.Ingress) {
	return func(i *networkingv1.Ingress) { i.Annotations = map[string]string{"kubernetes.io/ingress.class": c} }
}

func status(addrs ...string) func(*networkingv1.Ingress) {
	return func(i *networkingv1.Ingress) {
		for _, a := range addrs {
			i.Status.LoadBalancer.Ingress = append(i.Status.LoadBalancer.Ingress, lbi(a))
		}
	}
}

func lbi(a string) networkingv1.IngressLoadBalancerIngress {
	if a[0] >= '0' && a[0] <= '9' {
		return networkingv1.IngressLoadBalancerIngress{IP: a}
	}
	return networkingv1.IngressLoadBalancerIngress{Hostname: a}
}

func class(name, controller string, isDefault bool) *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
	if isDefault {
		c.Annotations = map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}
	}
	return c
}

func addrs(ing *networkingv1.Ingress) []string {
	var out []string
	for _, l := range ing.Status.LoadBalancer.Ingress {
		out = append(out, l.IP+l.Hostname)
	}
	return out
}

func TestIngressStatus(t *testing.T) {
	pub := ct.Publish(v1alpha1.PublishAddress{IP: "192.0.2.10"}, v1alpha1.PublishAddress{Hostname: "lb.example.com"})
	pub2 := func(b *v1alpha1.LoadBalancerBinding) {
		b.Namespace = "other"
		b.Spec.Publish = []v1alpha1.PublishAddress{{IP: "192.0.2.10"}, {IP: "192.0.2.9"}}
	}
	bindings := []client.Object{ct.Binding("a", pub), ct.Binding("b", pub2)}
	union := []string{"lb.example.com", "192.0.2.10", "192.0.2.9"} // sorted by IP ("" first), then hostname
	cases := []struct {
		name    string
		ing     *networkingv1.Ingress
		classes []client.Object
		want    []string
		writes  int
	}{
		{"our class by name", ingress("i", className("sluice")), nil, union, 1},
		{"legacy annotation", ingress("i", annotation("sluice")), nil, union, 1},
		{"class of our controller", ingress("i", className("edge")), []client.Object{class("edge", "sluice.dev/ingress-controller", false)}, union, 1},
		{"no class, ours is the default", ingress("i"), []client.Object{class("sluice", "sluice.dev/ingress-controller", true)}, union, 1},
		{"no class, no default", ingress("i"), []client.Object{class("sluice", "sluice.dev/ingress-controller", false)}, nil, 0},
		{"already up to date", ingress("i", className("sluice"), status(union...)), nil, union, 0},
		{"stale addresses replaced", ingress("i", className("sluice"), status("192.0.2.1")), nil, union, 1},
		{"left our class: cleared", ingress("i", className("nginx"), status("192.0.2.10", "lb.example.com")), nil, nil, 1},
		{"other controller's addresses untouched", ingress("i", className("nginx"), status("198.51.100.7")), nil, []string{"198.51.100.7"}, 0},
		{"mixed addresses of another class untouched", ingress("i", className("nginx"), status("192.0.2.10", "198.51.100.7")), nil, []string{"192.0.2.10", "198.51.100.7"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writes := 0
			objs := append(append([]client.Object{tc.ing}, tc.classes...), bindings...)
			c := ct.NewClient(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
				writes++
				return c.SubResource(sub).Patch(ctx, obj, p, o...)
			}}, objs...)
			r, err := ingressstatus.New(ingressstatus.Options{Client: c})
			if err != nil {
				t.Fatal(err)
			}
			key := types.NamespacedName{Namespace: "app", Name: "i"}
			for range 2 { // idempotent: the second round writes nothing
				if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
					t.Fatal(err)
				}
			}
			var got networkingv1.Ingress
			if err := c.Get(context.Background(), key, &got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(addrs(&got), tc.want) {
				t.Errorf("status = %v, want %v", addrs(&got), tc.want)
			}
			if writes != tc.writes {
				t.Errorf("%d status writes, want %d", writes, tc.writes)
			}
		})
	}
}

func TestPublishedSkipsDeletedAndEmpty(t *testing.T) {
	now := metav1.Now()
	deleted := ct.Binding("d", ct.Publish(v1alpha1.PublishAddress{IP: "192.0.2.99"}))
	deleted.DeletionTimestamp = &now
	b := ct.Binding("a", ct.Publish(v1alpha1.PublishAddress{}, v1alpha1.PublishAddress{IP: "192.0.2.1", Hostname: "x.example"}, v1alpha1.PublishAddress{IP: "192.0.2.1", Hostname: "x.example"}))
	got := ingressstatus.Published([]v1alpha1.LoadBalancerBinding{*b, *deleted})
	want := []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1", Hostname: "x.example"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Published = %+v, want %+v", got, want)
	}
}
