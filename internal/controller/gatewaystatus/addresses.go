package gatewaystatus

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/gateway"
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

// addressing is the outcome of assignAddresses.
type addressing struct {
	// assigned: each Gateway's address of its own.
	assigned map[*gatewayv1.Gateway]netip.Addr
	// unusable: Gateways whose spec.addresses asks for an address the
	// pool cannot give, and why.
	unusable map[*gatewayv1.Gateway]string
}

// assignAddresses gives each accepted Gateway whose class has an address
// pool one address of it, oldest Gateway first: the one its status already
// holds (when no older Gateway holds it too), else the one its
// spec.addresses asks for when free, else (without spec.addresses) the
// first free one. A Gateway asking for an address the pool does not have,
// or that another Gateway holds, gets none and is listed in unusable; a
// Gateway left without one (the pool is used up) is in neither map. Pure:
// the assignment lives in the Gateways' statuses, so a restarted
// controller keeps it, and a request never takes an address from the
// Gateway holding it.
func assignAddresses(gws []*gatewayv1.Gateway, accepted func(*gatewayv1.Gateway) bool, pool func(*gatewayv1.Gateway) []netip.Addr) addressing {
	order := slices.Clone(gws)
	slices.SortFunc(order, func(a, b *gatewayv1.Gateway) int {
		return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	out := addressing{assigned: map[*gatewayv1.Gateway]netip.Addr{}, unusable: map[*gatewayv1.Gateway]string{}}
	taken := map[netip.Addr]bool{}
	pools := map[*gatewayv1.Gateway][]netip.Addr{}
	requests := map[*gatewayv1.Gateway]netip.Addr{}
	for _, gw := range order {
		if !accepted(gw) {
			continue
		}
		p := pool(gw)
		reqs := gateway.RequestedAddresses(gw)
		asks := len(reqs) > 0
		switch {
		case asks && len(p) == 0:
			out.unusable[gw] = "spec.addresses asks for " + reqs[0].String() + ", but the class's LoadBalancerBinding lists no gatewayAddresses (its Gateways share the binding's addresses)"
		case asks && slices.ContainsFunc(reqs, func(a netip.Addr) bool { return !slices.Contains(p, a) }):
			i := slices.IndexFunc(reqs, func(a netip.Addr) bool { return !slices.Contains(p, a) })
			out.unusable[gw] = "spec.addresses asks for " + reqs[i].String() + ", which is not one of the LoadBalancerBinding's gatewayAddresses"
		case len(reqs) > 1:
			out.unusable[gw] = fmt.Sprintf("spec.addresses asks for %d addresses: a Gateway is served on one", len(reqs))
		case asks:
			requests[gw] = reqs[0]
			pools[gw] = p
		case len(p) > 0:
			pools[gw] = p
		}
	}
	for _, gw := range order { // keep what a Gateway holds (and asks for)
		p := pools[gw]
		for _, sa := range gw.Status.Addresses {
			a, err := netip.ParseAddr(sa.Value)
			if err != nil || (sa.Type != nil && *sa.Type != gatewayv1.IPAddressType) {
				continue
			}
			a = a.Unmap()
			if req, asks := requests[gw]; asks && a != req {
				continue
			}
			if slices.Contains(p, a) && !taken[a] {
				out.assigned[gw], taken[a] = a, true
				break
			}
		}
	}
	for _, gw := range order { // then what a Gateway asks for
		req, asks := requests[gw]
		if _, ok := out.assigned[gw]; ok || !asks {
			continue
		}
		if taken[req] {
			out.unusable[gw] = "spec.addresses asks for " + req.String() + ", which another Gateway holds"
			continue
		}
		out.assigned[gw], taken[req] = req, true
	}
	for _, gw := range order { // then the first free one
		if _, ok := out.assigned[gw]; ok {
			continue
		}
		if _, asks := requests[gw]; asks {
			continue
		}
		for _, a := range pools[gw] {
			if !taken[a] {
				out.assigned[gw], taken[a] = a, true
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
