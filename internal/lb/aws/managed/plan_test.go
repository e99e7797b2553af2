package managed

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"sluice.dev/sluice/api/v1alpha1"
)

func binding(gen int64, mod func(*v1alpha1.ManagedLoadBalancer)) *v1alpha1.LoadBalancerBinding {
	m := &v1alpha1.ManagedLoadBalancer{Type: "network", Scheme: "internet-facing", Subnets: []string{"subnet-1"},
		Listeners:             []v1alpha1.ManagedListener{{Port: 443, Protocol: "TLS"}},
		TargetGroupAttributes: &v1alpha1.TargetGroupAttributes{DeregistrationDelaySeconds: ptr.To[int32](30)}}
	if mod != nil {
		mod(m)
	}
	return &v1alpha1.LoadBalancerBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1", Generation: gen},
		Spec: v1alpha1.LoadBalancerBindingSpec{Port: intstr.FromInt(8443),
			Provider: v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{Managed: m}}},
	}
}

func desired(t *testing.T, b *v1alpha1.LoadBalancerBinding, certs ...string) Desired {
	t.Helper()
	d, err := DesiredFor(b, "prod", certs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// created is the state after a full creation of set n for d.
func created(d Desired, n int64, certs ...string) Found {
	return Found{
		LoadBalancers: []LoadBalancer{{ARN: fmt.Sprint("lb-", n), Name: SetName(d.Base, n), Type: d.Type, Scheme: d.Scheme, Set: n}},
		TargetGroups: []TargetGroup{{ARN: fmt.Sprint("tg-", n), Name: SetName(d.Base, n), Protocol: TargetProtocol(d.Type), TargetType: d.TargetType,
			Port: d.Port, Set: n, Owned: true, Attributes: d.Attributes, Healthy: 1}},
		Listeners: []FoundListener{{ARN: fmt.Sprint("ln-", n), LoadBalancer: fmt.Sprint("lb-", n), Port: 443, Protocol: "TLS",
			TargetGroup: fmt.Sprint("tg-", n), Certificates: certs}},
	}
}

// kinds renders a plan's actions compactly: "Kind target".
func kinds(p Plan) []string {
	var out []string
	for _, a := range p.Actions {
		s := string(a.Kind)
		if a.ARN != "" {
			s += " " + a.ARN
		}
		if len(a.Certificates) > 0 {
			s += " " + strings.Join(a.Certificates, ",")
		}
		for k, v := range a.Attributes {
			s += " " + k + "=" + v
		}
		out = append(out, s)
	}
	return out
}

func TestBuild(t *testing.T) {
	d := desired(t, binding(3, nil), "c1", "c2")
	replace := binding(4, func(m *v1alpha1.ManagedLoadBalancer) { m.Scheme = "internal" })
	confirmed := replace.DeepCopy()
	confirmed.Annotations = map[string]string{v1alpha1.AnnotationConfirmReplace: "4"}
	newSet := created(desired(t, confirmed, "c1", "c2"), 4, "c1", "c2")
	both := created(d, 3, "c1", "c2")
	both.LoadBalancers = append(both.LoadBalancers, newSet.LoadBalancers...)
	both.TargetGroups = append(both.TargetGroups, newSet.TargetGroups...)
	both.Listeners = append(both.Listeners, newSet.Listeners...)
	unhealthy := both
	unhealthy.TargetGroups = slices.Clone(both.TargetGroups)
	unhealthy.TargetGroups[1].Healthy = 0
	adopted := Found{TargetGroups: []TargetGroup{{ARN: "tg-old", Protocol: "TCP", TargetType: "ip", Owned: false}}}

	for _, tc := range []struct {
		name    string
		d       Desired
		found   Found
		want    []string
		refused int
		waiting int
	}{
		{"nothing yet: create group and load balancer", d, Found{},
			[]string{"CreateTargetGroup", "CreateLoadBalancer"}, 0, 0},
		{"both found: the listener with the default certificate", d,
			Found{LoadBalancers: created(d, 3).LoadBalancers, TargetGroups: created(d, 3).TargetGroups},
			[]string{"CreateListener c1"}, 0, 0},
		{"listener found: the other certificates", d, created(d, 3, "c1"),
			[]string{"AddListenerCertificates ln-3 c2"}, 0, 0},
		{"in sync: nothing", d, created(d, 3, "c1", "c2"), nil, 0, 0},
		{"restart with the same state: nothing (never recreate)", desired(t, binding(9, nil), "c1", "c2"), created(d, 3, "c1", "c2"), nil, 0, 0},
		{"deregistration delay: modified in place",
			desired(t, binding(5, func(m *v1alpha1.ManagedLoadBalancer) {
				m.TargetGroupAttributes.DeregistrationDelaySeconds = ptr.To[int32](5)
			}), "c1", "c2"),
			created(d, 3, "c1", "c2"), []string{"ModifyTargetGroupAttributes tg-3 deregistration_delay.timeout_seconds=5"}, 0, 0},
		{"health check: modified in place",
			desired(t, binding(5, func(m *v1alpha1.ManagedLoadBalancer) { m.HealthCheck.Path = "/healthz" }), "c1", "c2"),
			created(d, 3, "c1", "c2"), []string{"ModifyTargetGroup tg-3"}, 0, 0},
		{"default certificate renewed: modified in place", desired(t, binding(3, nil), "c3", "c2"), created(d, 3, "c1", "c2"),
			[]string{"ModifyListener ln-3 c3"}, 0, 0},
		{"new default while the old one stays chosen: the old one is added first", desired(t, binding(3, nil), "c3", "c1"), created(d, 3, "c1", "c2"),
			[]string{"AddListenerCertificates ln-3 c1", "ModifyListener ln-3 c3", "RemoveListenerCertificates ln-3 c2"}, 0, 0},
		{"other certificate renewed: the new one added before the old one is removed", desired(t, binding(3, nil), "c1", "c3"), created(d, 3, "c1", "c2"),
			[]string{"AddListenerCertificates ln-3 c3", "RemoveListenerCertificates ln-3 c2"}, 0, 0},
		{"listener port removed", desired(t, binding(5, func(m *v1alpha1.ManagedLoadBalancer) { m.Listeners[0].Port = 8443 }), "c1", "c2"),
			created(d, 3, "c1", "c2"), []string{"CreateListener c1", "DeleteListener ln-3"}, 0, 0},
		{"secure listener without certificates waits", desired(t, binding(3, nil)),
			Found{LoadBalancers: created(d, 3).LoadBalancers, TargetGroups: created(d, 3).TargetGroups}, nil, 0, 0},
		{"scheme change unconfirmed: refused, nothing replaced", desired(t, replace, "c1", "c2"), created(d, 3, "c1", "c2"), nil, 1, 0},
		{"scheme change confirmed: new set first", desired(t, confirmed, "c1", "c2"), created(d, 3, "c1", "c2"),
			[]string{"CreateTargetGroup", "CreateLoadBalancer"}, 0, 1},
		{"new set without healthy targets: old kept", desired(t, confirmed, "c1", "c2"), unhealthy, nil, 0, 1},
		{"new set healthy: old deleted, listener, load balancer, group", desired(t, confirmed, "c1", "c2"), both,
			[]string{"DeleteListener ln-3", "DeleteLoadBalancer lb-3", "DeleteTargetGroup tg-3"}, 0, 0},
		{"upgrade: an earlier release's tagged group is adopted, not recreated", d, adopted,
			[]string{"ModifyTargetGroupAttributes tg-old deregistration_delay.timeout_seconds=30", "CreateLoadBalancer"}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Build(tc.d, tc.found)
			if got := kinds(p); !slices.Equal(got, tc.want) || len(p.Refused) != tc.refused || len(p.Waiting) != tc.waiting {
				t.Errorf("Build:\n got %q refused %q waiting %q\nwant %q refused %d waiting %d", got, p.Refused, p.Waiting, tc.want, tc.refused, tc.waiting)
			}
			for _, a := range p.Actions {
				if a.Kind == DeleteTargetGroup && a.ARN == "tg-old" {
					t.Error("an adopted group is deleted")
				}
			}
		})
	}
}

func TestTeardown(t *testing.T) {
	d := desired(t, binding(3, nil))
	f := created(d, 3, "c1")
	f.TargetGroups = append(f.TargetGroups, TargetGroup{ARN: "tg-adopted", Owned: false})
	got := kinds(Plan{Actions: Teardown(f)})
	want := []string{"DeleteListener ln-3", "DeleteLoadBalancer lb-3", "DeleteTargetGroup tg-3"}
	if !slices.Equal(got, want) {
		t.Fatalf("Teardown = %q, want %q", got, want)
	}
}

func TestDesiredFor(t *testing.T) {
	b := binding(7, func(m *v1alpha1.ManagedLoadBalancer) { m.Tags = map[string]string{"team": "web"} })
	b.Spec.TargetType = v1alpha1.TargetInstance
	d := desired(t, b, "c1")
	if d.TargetType != "instance" || d.Port != 8443 || d.Set != 7 || d.Tags[ClusterTag] != "prod" || d.Tags[FrontendTag] != "web" ||
		d.Tags[OwnerTag] != "uid-1" || d.Tags["team"] != "web" || d.Attributes["deregistration_delay.timeout_seconds"] != "30" {
		t.Fatalf("DesiredFor = %+v", d)
	}
	if n := SetName(d.Base, 1<<40); len(n) > 32 {
		t.Fatalf("name %q longer than AWS allows", n)
	}
	if Base("c", "ns", "Web_App.Frontend-Long-Name", "u") == Base("c", "ns", "Web_App.Frontend-Long-Name", "v") {
		t.Fatal("two UIDs, one name")
	}
	if _, err := DesiredFor(b, "", nil); err == nil {
		t.Fatal("no cluster accepted")
	}
}

func TestPickSubnets(t *testing.T) {
	got, vpc, err := PickSubnets([]Subnet{{"subnet-c", "zone-b", "vpc-1"}, {"subnet-b", "zone-a", "vpc-1"}, {"subnet-a", "zone-b", "vpc-1"}})
	if err != nil || vpc != "vpc-1" || !slices.Equal(got, []string{"subnet-b", "subnet-a"}) {
		t.Fatalf("PickSubnets = %v %s %v", got, vpc, err)
	}
	if _, _, err := PickSubnets([]Subnet{{"subnet-a", "zone-a", "vpc-1"}, {"subnet-b", "zone-b", "vpc-2"}}); err == nil {
		t.Fatal("two VPCs accepted")
	}
	if _, _, err := PickSubnets(nil); err == nil {
		t.Fatal("no subnets accepted")
	}
}
