package gatewaystatus

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
)

// addressPool returns the binding(s) serving a class's
// spec.gatewayAddresses, parsed, in the bindings' order without
// duplicates; entries that are not IP addresses are skipped (the CRD's
// pattern lets few through).
func addressPool(bindings []*v1alpha1.LoadBalancerBinding) []netip.Addr {
	var out []netip.Addr
	for _, b := range bindings {
		for _, s := range b.Spec.GatewayAddresses {
			a, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil || a.Zone() != "" {
				continue
			}
			if a = a.Unmap(); !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// assignAddresses gives each accepted Gateway whose class has an address
// pool one address of it: the one its status already holds when no older
// Gateway holds it too, else the first free one, oldest Gateway first. A
// Gateway left without one (the pool is used up) is absent from the
// result. Pure: the assignment lives in the Gateways' statuses, so a
// restarted controller keeps it.
func assignAddresses(gws []*gatewayv1.Gateway, accepted func(*gatewayv1.Gateway) bool, pool func(*gatewayv1.Gateway) []netip.Addr) map[*gatewayv1.Gateway]netip.Addr {
	order := slices.Clone(gws)
	slices.SortFunc(order, func(a, b *gatewayv1.Gateway) int {
		return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	out := map[*gatewayv1.Gateway]netip.Addr{}
	taken := map[netip.Addr]bool{}
	pools := map[*gatewayv1.Gateway][]netip.Addr{}
	for _, gw := range order {
		if p := pool(gw); len(p) > 0 && accepted(gw) {
			pools[gw] = p
		}
	}
	for _, gw := range order { // keep what a Gateway holds
		p := pools[gw]
		for _, sa := range gw.Status.Addresses {
			a, err := netip.ParseAddr(sa.Value)
			if err != nil || (sa.Type != nil && *sa.Type != gatewayv1.IPAddressType) {
				continue
			}
			if a = a.Unmap(); slices.Contains(p, a) && !taken[a] {
				out[gw], taken[a] = a, true
				break
			}
		}
	}
	for _, gw := range order { // then the first free one
		if _, ok := out[gw]; ok {
			continue
		}
		for _, a := range pools[gw] {
			if !taken[a] {
				out[gw], taken[a] = a, true
				break
			}
		}
	}
	return out
}

// acceptedIn reports whether st (Build's status of a Gateway) says
// Accepted=True.
func acceptedIn(st gatewayv1.GatewayStatus) bool {
	return meta.IsStatusConditionTrue(st.Conditions, string(gatewayv1.GatewayConditionAccepted))
}
