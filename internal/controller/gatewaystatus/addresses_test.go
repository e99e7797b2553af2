package gatewaystatus

import (
	"net/netip"
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
				func(*gatewayv1.Gateway) []netip.Addr { return pool })
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
	got := assignAddresses([]*gatewayv1.Gateway{g}, func(*gatewayv1.Gateway) bool { return true }, func(*gatewayv1.Gateway) []netip.Addr { return pool })
	if got[g].String() != "10.0.0.1" {
		t.Errorf("hostname entry: got %s, want 10.0.0.1", got[g])
	}
	// Without a pool nothing is assigned.
	if got := assignAddresses([]*gatewayv1.Gateway{gw("a", 1)}, func(*gatewayv1.Gateway) bool { return true }, func(*gatewayv1.Gateway) []netip.Addr { return nil }); len(got) != 0 {
		t.Errorf("no pool: %v", got)
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
