package lb

import (
	"net/netip"
	"testing"
)

func TestTargetIdentity(t *testing.T) {
	a := netip.MustParseAddrPort("10.0.0.1:80")
	for _, tc := range []struct {
		x, y Target
		same bool
	}{
		{Target{Address: a}, Target{Address: a, Zone: "z1"}, true},
		{Target{Address: a}, Target{Address: netip.MustParseAddrPort("10.0.0.1:81")}, false},
		{Target{Address: a, ID: "i-1"}, Target{ID: "i-1", Address: netip.AddrPortFrom(netip.Addr{}, 80)}, true},
		{Target{Address: a, ID: "i-1"}, Target{Address: a, ID: "i-2"}, false},
		{Target{Address: a, ID: "i-1"}, Target{Address: a}, true},
	} {
		if got := tc.x.Same(tc.y); got != tc.same || tc.y.Same(tc.x) != got {
			t.Errorf("%v.Same(%v) = %v, want %v (both ways)", tc.x, tc.y, got, tc.same)
		}
	}
	if (Target{ID: "i-1", Address: a}).String() != "i-1:80" || (Target{Address: a}).String() != "10.0.0.1:80" {
		t.Error("String")
	}
	if (Target{Address: a}).Compare(Target{ID: "i", Address: a}) >= 0 {
		t.Error("Compare: targets without ID sort first")
	}
}
