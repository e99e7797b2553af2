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
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/ingressstatus"
)

func ingress(name string, opts ...func(*networkingv1.Ingress)) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "app", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
	for _, o := range opts {
		o(ing)
	}
	return ing
}

// hostRule replaces the default backend by a rule for host.
func hostRule(host string) func(*networkingv1.Ingress) {
	return func(i *networkingv1.Ingress) {
		be := *i.Spec.DefaultBackend
		i.Spec.DefaultBackend = nil
		pt := networkingv1.PathTypePrefix
		i.Spec.Rules = []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: be}}}}}}
		i.CreationTimestamp = metav1.Unix(2, 0)
	}
}

// hostOwner is an older Ingress of namespace team-a for host, sharing it
// with the namespaces share names.
func hostOwner(host, share string) *networkingv1.Ingress {
	ing := ingress("owner", className("sluice"), hostRule(host))
	ing.Namespace, ing.CreationTimestamp = "team-a", metav1.Unix(1, 0)
	if share != "" {
		ing.Annotations = map[string]string{"sluice.dev/share-host-with": share}
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

func withParams(ns, name string) func(*networkingv1.IngressClass) {
	return func(c *networkingv1.IngressClass) {
		g, scope := ingressstatus.ParametersAPIGroup, networkingv1.IngressClassParametersReferenceScopeNamespace
		c.Spec.Parameters = &networkingv1.IngressClassParametersReference{APIGroup: &g, Kind: ingressstatus.ParametersKind, Name: name, Scope: &scope, Namespace: &ns}
	}
}

func classWith(name string, opts ...func(*networkingv1.IngressClass)) *networkingv1.IngressClass {
	c := class(name, "sluice.dev/ingress-controller", false)
	for _, o := range opts {
		o(c)
	}
	return c
}

func TestIngressStatus(t *testing.T) {
	pub := ct.Publish(v1alpha1.PublishAddress{IP: "192.0.2.10"}, v1alpha1.PublishAddress{Hostname: "lb.example.com"})
	pub2 := func(b *v1alpha1.LoadBalancerBinding) {
		b.Namespace = "other"
		b.Spec.Publish = []v1alpha1.PublishAddress{{IP: "192.0.2.10"}, {IP: "192.0.2.9"}}
	}
	status2 := func(b *v1alpha1.LoadBalancerBinding) {
		b.Namespace = "other"
		b.Status.Addresses = []v1alpha1.LoadBalancerAddress{{Hostname: "nlb.elb.amazonaws.com", CanonicalHostedZoneID: "Z1"}}
	}
	now := metav1.Now()
	deleting := func(b *v1alpha1.LoadBalancerBinding) {
		b.Namespace = "other"
		b.DeletionTimestamp = &now
		b.Finalizers = []string{"x"}
		b.Spec.Publish = []v1alpha1.PublishAddress{{IP: "192.0.2.99"}}
	}
	forbidden := func(b *v1alpha1.LoadBalancerBinding) {
		b.Namespace = "forbidden" // outside what the controller may act on (Options.Allowed below)
		b.Spec.Publish = []v1alpha1.PublishAddress{{IP: "203.0.113.66"}}
	}
	bindings := []client.Object{ct.Binding("a", pub), ct.Binding("b", pub2), ct.Binding("c", status2), ct.Binding("gone", deleting), ct.Binding("f", forbidden)}
	own := []string{"lb.example.com", "192.0.2.10"} // binding a, in the controller's namespace; sorted by IP ("" first), then hostname
	cases := []struct {
		name      string
		ing       *networkingv1.Ingress
		classes   []client.Object
		namespace string
		want      []string
		writes    int
	}{
		{"our class by name: bindings of our namespace only", ingress("i", className("sluice")), nil, ct.Namespace, own, 1},
		{"legacy annotation", ingress("i", annotation("sluice")), nil, ct.Namespace, own, 1},
		{"class of our controller", ingress("i", className("edge")), []client.Object{class("edge", "sluice.dev/ingress-controller", false)}, ct.Namespace, own, 1},
		{"no class, ours is the default", ingress("i"), []client.Object{class("sluice", "sluice.dev/ingress-controller", true)}, ct.Namespace, own, 1},
		{"no class, no default", ingress("i"), []client.Object{class("sluice", "sluice.dev/ingress-controller", false)}, ct.Namespace, nil, 0},
		{"class parameters name a binding elsewhere", ingress("i", className("internal")), []client.Object{classWith("internal", withParams("other", "b"))}, ct.Namespace, []string{"192.0.2.10", "192.0.2.9"}, 1},
		{"status.addresses win over publish", ingress("i", className("internet")), []client.Object{classWith("internet", withParams("other", "c"))}, ct.Namespace, []string{"nlb.elb.amazonaws.com"}, 1},
		{"no namespace, no parameters: nothing published", ingress("i", className("sluice")), nil, "", nil, 0},
		{"missing binding: last known status kept", ingress("i", className("x"), status("192.0.2.1")), []client.Object{classWith("x", withParams("other", "nope"))}, ct.Namespace, []string{"192.0.2.1"}, 0},
		{"binding being deleted: last known status kept", ingress("i", className("x"), status("192.0.2.1")), []client.Object{classWith("x", withParams("other", "gone"))}, ct.Namespace, []string{"192.0.2.1"}, 0},
		{"cluster-scoped parameters: kept", ingress("i", className("x"), status("192.0.2.1")), []client.Object{classWith("x", withParams("other", "b"), func(c *networkingv1.IngressClass) {
			s := "Cluster"
			c.Spec.Parameters.Scope = &s
		})}, ct.Namespace, []string{"192.0.2.1"}, 0},
		{"nothing of it served: no status", ingress("i", className("sluice"), func(i *networkingv1.Ingress) {
			i.Spec.DefaultBackend.Service.Name = "Not_A_Name"
		}), nil, ct.Namespace, nil, 0},
		{"host owned by another namespace: no status", ingress("i", className("sluice"), hostRule("shop.example.com")),
			[]client.Object{hostOwner("shop.example.com", "")}, ct.Namespace, nil, 0},
		{"host owned by another namespace: status written before kept", ingress("i", className("sluice"), hostRule("shop.example.com"), status("192.0.2.1")),
			[]client.Object{hostOwner("shop.example.com", "")}, ct.Namespace, []string{"192.0.2.1"}, 0},
		{"host shared with us: status", ingress("i", className("sluice"), hostRule("shop.example.com")),
			[]client.Object{hostOwner("shop.example.com", "app")}, ct.Namespace, own, 1},
		{"forbidden binding lends no address", ingress("i", className("x")), []client.Object{classWith("x", withParams("forbidden", "f"))}, ct.Namespace, nil, 0},
		{"already up to date", ingress("i", className("sluice"), status(own...)), nil, ct.Namespace, own, 0},
		{"stale addresses replaced", ingress("i", className("sluice"), status("192.0.2.1")), nil, ct.Namespace, own, 1},
		{"left our class: cleared", ingress("i", className("nginx"), status("192.0.2.9", "lb.example.com")), nil, ct.Namespace, nil, 1},
		{"other controller's addresses untouched", ingress("i", className("nginx"), status("198.51.100.7")), nil, ct.Namespace, []string{"198.51.100.7"}, 0},
		{"mixed addresses of another class untouched", ingress("i", className("nginx"), status("192.0.2.10", "198.51.100.7")), nil, ct.Namespace, []string{"192.0.2.10", "198.51.100.7"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writes := 0
			objs := append(append([]client.Object{tc.ing}, tc.classes...), bindings...)
			c := ct.NewClient(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
				writes++
				return c.SubResource(sub).Patch(ctx, obj, p, o...)
			}}, objs...)
			r, err := ingressstatus.New(ingressstatus.Options{Client: c, Namespace: tc.namespace,
				Allowed: func(b *v1alpha1.LoadBalancerBinding) bool { return b.Namespace != "forbidden" }})
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

func TestStatusOfSkipsEmptyAndDuplicates(t *testing.T) {
	got := ingressstatus.StatusOf([]v1alpha1.LoadBalancerAddress{{}, {IP: "192.0.2.1", Hostname: "x.example"}, {IP: "192.0.2.1", Hostname: "x.example", CanonicalHostedZoneID: "Z"}})
	want := []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1", Hostname: "x.example"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StatusOf = %+v, want %+v", got, want)
	}
}

func TestAddressesChanged(t *testing.T) {
	old := ct.Binding("a")
	same := old.DeepCopy()
	same.Status.Targets.Healthy = 3
	moved := old.DeepCopy()
	moved.Status.Addresses = []v1alpha1.LoadBalancerAddress{{Hostname: "nlb.elb.amazonaws.com"}}
	p := ingressstatus.AddressesChanged()
	if p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: same}) {
		t.Error("a target count change passed")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: moved}) {
		t.Error("an address change did not pass")
	}
}

// TestHostsOfOwnersOnly: a managed load balancer asks for certificates of
// the hosts its Ingresses own, never of a host a refused tenant names
// (whose owner is served by another load balancer).
func TestHostsOfOwnersOnly(t *testing.T) {
	owner := hostOwner("shop.example.com", "")
	owner.Spec.IngressClassName = ptrTo("edge") // served by binding other/edge
	squat := ingress("squat", className("sluice"), hostRule("shop.example.com"))
	squat.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com", "Squat.example.com"}}}
	b := ct.Binding("a")
	edge := classWith("edge", withParams("other", "edge"))
	for mode, want := range map[string][]string{
		"":     {"squat.example.com"},
		"none": {"shop.example.com", "squat.example.com"},
	} {
		s := ingressstatus.NewServing([]networkingv1.IngressClass{*edge}, []v1alpha1.LoadBalancerBinding{*b}, ingressstatus.ServingOptions{Namespace: ct.Namespace, HostOwnership: mode})
		if got := s.Hosts(b, []networkingv1.Ingress{*squat, *owner}); !slices.Equal(got, want) {
			t.Errorf("mode %q: hosts %v, want %v", mode, got, want)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
