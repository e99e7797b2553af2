package gatewaystatus

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
)

func TestAssignAddresses(t *testing.T) {
	ip := gatewayv1.IPAddressType
	host := gatewayv1.HostnameAddressType
	gw := func(name string, age int, holds ...string) *gatewayv1.Gateway {
		g := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name,
			CreationTimestamp: metav1.NewTime(time.Unix(int64(1000-age), 0))}}
		for _, h := range holds {
			g.Status.Addresses = append(g.Status.Addresses, gatewayv1.GatewayStatusAddress{Type: &ip, Value: h})
		}
		return g
	}
	pool := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}
	tests := []struct {
		name    string
		gws     []*gatewayv1.Gateway
		refused string // a Gateway not accepted
		want    map[string]string
	}{
		{"oldest first", []*gatewayv1.Gateway{gw("young", 1), gw("old", 9), gw("mid", 5)}, "",
			map[string]string{"old": "10.0.0.1", "mid": "10.0.0.2"}},
		{"kept while held", []*gatewayv1.Gateway{gw("old", 9), gw("young", 1, "10.0.0.1")}, "",
			map[string]string{"young": "10.0.0.1", "old": "10.0.0.2"}},
		{"older wins a double claim", []*gatewayv1.Gateway{gw("old", 9, "10.0.0.2"), gw("young", 1, "10.0.0.2")}, "",
			map[string]string{"old": "10.0.0.2", "young": "10.0.0.1"}},
		{"outside the pool is not kept", []*gatewayv1.Gateway{gw("a", 9, "192.0.2.1")}, "",
			map[string]string{"a": "10.0.0.1"}},
		{"not accepted gets none", []*gatewayv1.Gateway{gw("bad", 9), gw("good", 1)}, "bad",
			map[string]string{"good": "10.0.0.1"}},
		{"mapped IPv6 form", []*gatewayv1.Gateway{gw("a", 9, "::ffff:10.0.0.2")}, "",
			map[string]string{"a": "10.0.0.2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := assignAddresses(tt.gws, func(g *gatewayv1.Gateway) bool { return g.Name != tt.refused },
				func(*gatewayv1.Gateway) []netip.Addr { return pool }).assigned
			if len(got) != len(tt.want) {
				t.Errorf("assigned %d, want %d: %v", len(got), len(tt.want), got)
			}
			for g, a := range got {
				if tt.want[g.Name] != a.String() {
					t.Errorf("%s got %s, want %q", g.Name, a, tt.want[g.Name])
				}
			}
		})
	}
	// A hostname status entry never counts as holding an address.
	g := gw("h", 1)
	g.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: &host, Value: "10.0.0.2"}}
	got := assignAddresses([]*gatewayv1.Gateway{g}, func(*gatewayv1.Gateway) bool { return true }, func(*gatewayv1.Gateway) []netip.Addr { return pool }).assigned
	if got[g].String() != "10.0.0.1" {
		t.Errorf("hostname entry: got %s, want 10.0.0.1", got[g])
	}
	// Without a pool nothing is assigned.
	if got := assignAddresses([]*gatewayv1.Gateway{gw("a", 1)}, func(*gatewayv1.Gateway) bool { return true }, func(*gatewayv1.Gateway) []netip.Addr { return nil }).assigned; len(got) != 0 {
		t.Errorf("no pool: %v", got)
	}
}

// TestRequestedAddresses: spec.addresses asks for one address of the
// pool: given when free (before the Gateways without a request), kept
// while held, never taken from the Gateway holding it; an address outside
// the pool, or without a pool, is unusable.
func TestRequestedAddresses(t *testing.T) {
	ip := gatewayv1.IPAddressType
	gw := func(name string, age int, asks string, holds ...string) *gatewayv1.Gateway {
		g := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name,
			CreationTimestamp: metav1.NewTime(time.Unix(int64(1000-age), 0))}}
		if asks != "" {
			g.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Value: asks}}
		}
		for _, h := range holds {
			g.Status.Addresses = append(g.Status.Addresses, gatewayv1.GatewayStatusAddress{Type: &ip, Value: h})
		}
		return g
	}
	pool := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}
	all := func(*gatewayv1.Gateway) bool { return true }
	withPool := func(*gatewayv1.Gateway) []netip.Addr { return pool }

	old, asker := gw("old", 9, ""), gw("asker", 1, "10.0.0.1")
	got := assignAddresses([]*gatewayv1.Gateway{old, asker}, all, withPool)
	if got.assigned[asker].String() != "10.0.0.1" || got.assigned[old].String() != "10.0.0.2" {
		t.Errorf("a request for a free address: %v", got.assigned)
	}
	holder, thief := gw("holder", 9, "", "10.0.0.1"), gw("thief", 1, "10.0.0.1")
	got = assignAddresses([]*gatewayv1.Gateway{holder, thief}, all, withPool)
	if got.assigned[holder].String() != "10.0.0.1" || got.unusable[thief] == "" || got.assigned[thief].IsValid() {
		t.Errorf("a request for a held address: assigned %v unusable %v", got.assigned, got.unusable)
	}
	outside := gw("outside", 1, "192.0.2.1")
	got = assignAddresses([]*gatewayv1.Gateway{outside}, all, withPool)
	if !strings.Contains(got.unusable[outside], "not one of") || len(got.assigned) != 0 {
		t.Errorf("outside the pool: %+v", got)
	}
	got = assignAddresses([]*gatewayv1.Gateway{asker}, all, func(*gatewayv1.Gateway) []netip.Addr { return nil })
	if !strings.Contains(got.unusable[asker], "lists no gatewayAddresses") {
		t.Errorf("without a pool: %+v", got)
	}
	two := gw("two", 1, "10.0.0.1")
	two.Spec.Addresses = append(two.Spec.Addresses, gatewayv1.GatewaySpecAddress{Value: "10.0.0.2"})
	got = assignAddresses([]*gatewayv1.Gateway{two}, all, withPool)
	if !strings.Contains(got.unusable[two], "served on one") {
		t.Errorf("two usable addresses: %+v", got)
	}
	two.Spec.Addresses[1].Value = "192.0.2.1"
	got = assignAddresses([]*gatewayv1.Gateway{two}, all, withPool)
	if !strings.Contains(got.unusable[two], "192.0.2.1, which is not one of") {
		t.Errorf("a usable and an unusable address: %+v", got)
	}
	kept := gw("kept", 1, "10.0.0.2", "10.0.0.2")
	got = assignAddresses([]*gatewayv1.Gateway{gw("older", 9, ""), kept}, all, withPool)
	if got.assigned[kept].String() != "10.0.0.2" {
		t.Errorf("a held requested address: %v", got.assigned)
	}
}

func TestAddressPool(t *testing.T) {
	bs := []*v1alpha1.LoadBalancerBinding{
		{Spec: v1alpha1.LoadBalancerBindingSpec{GatewayAddresses: []string{"10.0.0.2", "bad", "10.0.0.1", "fe80::1%eth0"}}},
		{Spec: v1alpha1.LoadBalancerBindingSpec{GatewayAddresses: []string{"10.0.0.2", "2001:db8::1"}}},
	}
	got := addressPool(bs)
	want := []string{"10.0.0.2", "10.0.0.1", "2001:db8::1"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("[%d] got %s, want %s", i, got[i], want[i])
		}
	}
}
