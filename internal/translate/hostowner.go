package translate

import (
	networkingv1 "k8s.io/api/networking/v1"
)

// HostOwnership is the one decision of which namespace owns each host
// (tenancy, owner.go): the proxies' translation (Build) and the
// controller's reconcilers (Ingress status, problem Events, DNS records)
// all take it from here, so they agree on who serves a host.
//
// The claimants are the Ingresses of every class of ours (NewClaimFilter,
// not only the classes one fleet serves) and, with opts.Gateway, the
// HTTPRoutes attached to a Gateway of any GatewayClass of sluice's
// controller (whatever opts.Gateway.GatewayClass one fleet serves), for
// the hosts they are served for; the oldest object owns a host.
// in.Ownership is ignored. in is not modified.
func HostOwnership(in Input, opts Options) *Ownership {
	return hostOwnership(in, opts.withDefaults(), nil)
}

// hostOwnership is HostOwnership reusing served, the Gateway API
// translation of Build when it is already the one of every class.
func hostOwnership(in Input, opts Options, served *gatewayResult) *Ownership {
	if opts.HostOwnership == HostOwnershipNone {
		return NewOwnership(nil, opts.HostOwnership)
	}
	claims := NewClaimFilter(in.IngressClasses, opts)
	claimants := make([]*networkingv1.Ingress, 0, len(in.Ingresses))
	for _, ing := range in.Ingresses {
		if ing != nil && claims.Serves(ing) {
			claimants = append(claimants, ing)
		}
	}
	if opts.Gateway != nil {
		g := served
		if g == nil || opts.Gateway.GatewayClass != "" {
			all := *opts.Gateway
			all.GatewayClass = "" // every class of ours claims
			o := opts
			o.Gateway = &all
			g = buildGateway(in, o)
		}
		claimants = append(claimants, g.claims()...)
	}
	return NewOwnership(claimants, opts.HostOwnership)
}
