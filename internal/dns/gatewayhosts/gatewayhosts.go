// Package gatewayhosts turns the Gateways of sluice's GatewayClasses and
// the routes attached to them into DNS sources (dns.Source), the Gateway
// API half of the DNS data flow beside the Ingresses:
//
//	Gateways (spec, status.addresses), HTTPRoutes, GRPCRoutes ─► Sources (pure) ─┐
//	Ingresses + binding addresses ─► sources (controller/dns) ───────────────────┴► dns.Desired ─► dns.MakePlan
//
// A Gateway's hosts are its programmed listeners' hostnames that are not
// wildcards, and the hosts of the HTTPRoutes and GRPCRoutes attached to
// it: each route hostname intersected with the hostname of the listener
// it attached to, as the specification defines and gateway.Build serves
// them (a wildcard that results is published as an Ingress's wildcard
// host is). They point at the Gateway's status.addresses, the one truth
// of where the Gateway is served, and only while the Gateway is
// Programmed with an address; otherwise their records are left as they
// are (Known false), as an Ingress's are while its binding has no
// address.
//
// Host ownership is the one of the proxies (translate.HostOwnership): a
// route's host owned by another namespace gets no source and a
// HostOwnedElsewhere problem; a listener's hostname owned by another
// namespace (an Ingress's, or an attached route's of another namespace)
// gets no source from the Gateway, the owner publishes it.
//
// It is pure: objects in, value out, no I/O, clock or logger.
package gatewayhosts

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/gateway"
)

// ProblemHostOwnedElsewhere is the reason of the problem of a route host
// owned by another namespace (the reason translate gives Ingresses).
const ProblemHostOwnedElsewhere = "HostOwnedElsewhere"

// Owner decides which namespace owns a host (*translate.Ownership).
type Owner interface {
	// Owns reports whether namespace ns owns host.
	Owns(ns, host string) bool
}

// Options configures Sources.
type Options struct {
	// Gateway are the translation's options (listener ports);
	// GatewayClass is ignored: every GatewayClass of sluice's controller
	// is ours.
	Gateway gateway.Options
	// Ownership decides host ownership. Nil: every namespace owns every
	// host.
	Ownership Owner
	// HostedZoneIDs maps a load balancer's DNS name (lower case, no
	// trailing dot) to its canonical hosted zone ID, from the bindings'
	// status.addresses: a Gateway address of that name can become a
	// Route53 ALIAS. Nil: none.
	HostedZoneIDs map[string]string
}

// Sources returns the DNS sources of the Gateways of our classes in in
// and of the routes attached to them, sorted by host and object, and the
// problems of route hosts that get no source. in is not modified.
func Sources(in gateway.Input, o Options) ([]dns.Source, []dns.Problem) {
	o.Gateway.GatewayClass = ""
	gws := slices.DeleteFunc(slices.Clone(in.Gateways), func(g *gatewayv1.Gateway) bool {
		return g == nil || g.DeletionTimestamp != nil
	})
	slices.SortFunc(gws, func(a, b *gatewayv1.Gateway) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	https := byParent(in.HTTPRoutes, func(r *gatewayv1.HTTPRoute) (metav1.ObjectMeta, []gatewayv1.ParentReference) {
		return r.ObjectMeta, r.Spec.ParentRefs
	})
	grpcs := byParent(in.GRPCRoutes, func(r *gatewayv1.GRPCRoute) (metav1.ObjectMeta, []gatewayv1.ParentReference) {
		return r.ObjectMeta, r.Spec.ParentRefs
	})
	refs := map[string]dns.Ref{} // Rule.Route (GRPC: "grpc:" prefix) → ref
	for _, r := range in.HTTPRoutes {
		if r != nil {
			refs[r.Namespace+"/"+r.Name] = dns.Ref{Kind: dns.KindHTTPRoute, Namespace: r.Namespace, Name: r.Name, UID: string(r.UID)}
		}
	}
	for _, r := range in.GRPCRoutes {
		if r != nil {
			refs["grpc:"+r.Namespace+"/"+r.Name] = dns.Ref{Kind: dns.KindGRPCRoute, Namespace: r.Namespace, Name: r.Name, UID: string(r.UID)}
		}
	}
	s := sourcer{o: o, seen: map[string]bool{}}
	for _, gw := range gws {
		key := gw.Namespace + "/" + gw.Name
		sub := in
		sub.Gateways = []*gatewayv1.Gateway{gw}
		sub.HTTPRoutes, sub.GRPCRoutes = https[key], grpcs[key]
		// One Gateway at a time: its rules are then the hosts its own
		// listeners serve (Build's rules do not name their Gateway).
		res := gateway.Build(sub, o.Gateway)
		if len(res.Gateways) == 0 {
			continue // not of our classes
		}
		addrs, known := addresses(gw, o.HostedZoneIDs)
		gref := dns.Ref{Kind: dns.KindGateway, Namespace: gw.Namespace, Name: gw.Name, UID: string(gw.UID)}
		for _, host := range listenerHosts(gw, res.Gateways[0].Status.Listeners) {
			if s.owns(gw.Namespace, host) {
				s.add(dns.Source{Host: host, Ingress: gref, Addresses: addrs, Known: known})
			}
		}
		for _, r := range res.Rules {
			k := r.Route
			if r.GRPC {
				k = "grpc:" + k
			}
			ref, ok := refs[k]
			if r.Host == "" || !ok {
				continue // a listener and route without hostnames: any host, no name to publish
			}
			if !s.owns(ref.Namespace, r.Host) {
				s.problem(ref, r.Host)
				continue
			}
			s.add(dns.Source{Host: r.Host, Ingress: ref, Addresses: addrs, Known: known})
		}
	}
	slices.SortFunc(s.srcs, func(a, b dns.Source) int {
		return cmp.Or(strings.Compare(a.Host, b.Host), strings.Compare(a.Ingress.Kind, b.Ingress.Kind),
			strings.Compare(a.Ingress.Namespace, b.Ingress.Namespace), strings.Compare(a.Ingress.Name, b.Ingress.Name))
	})
	slices.SortFunc(s.problems, func(a, b dns.Problem) int {
		return cmp.Or(strings.Compare(a.Host, b.Host), strings.Compare(a.Ingress[0].String(), b.Ingress[0].String()))
	})
	return s.srcs, s.problems
}

// sourcer collects sources and problems without duplicates (a route
// attached through several listeners, or to several Gateways with the
// same addresses, names a host several times).
type sourcer struct {
	o        Options
	seen     map[string]bool
	srcs     []dns.Source
	problems []dns.Problem
}

func (s *sourcer) owns(ns, host string) bool {
	return s.o.Ownership == nil || s.o.Ownership.Owns(ns, host)
}

func (s *sourcer) add(src dns.Source) {
	k := fmt.Sprintf("%s %s %v %v", src.Host, src.Ingress, src.Known, src.Addresses)
	if !s.seen[k] {
		s.seen[k] = true
		s.srcs = append(s.srcs, src)
	}
}

func (s *sourcer) problem(ref dns.Ref, host string) {
	k := "problem " + host + " " + ref.String()
	if s.seen[k] {
		return
	}
	s.seen[k] = true
	s.problems = append(s.problems, dns.Problem{Kind: ProblemHostOwnedElsewhere, Host: host, Ingress: []dns.Ref{ref}, NoChange: true,
		Message: fmt.Sprintf("host %s is owned by another namespace (the namespace of its oldest Ingress or attached route), which does not share it with this one; no DNS record is published for it from this %s", host, ref.Kind)})
}

// listenerHosts are the hostnames of the listeners Build programmed,
// lower case, wildcards left out, sorted.
func listenerHosts(gw *gatewayv1.Gateway, sts []gatewayv1.ListenerStatus) []string {
	var out []string
	for _, l := range gw.Spec.Listeners {
		if l.Hostname == nil {
			continue
		}
		h := strings.TrimSuffix(strings.ToLower(string(*l.Hostname)), ".")
		if h == "" || strings.HasPrefix(h, "*") {
			continue
		}
		i := slices.IndexFunc(sts, func(st gatewayv1.ListenerStatus) bool { return st.Name == l.Name })
		if i < 0 || !meta.IsStatusConditionTrue(sts[i].Conditions, string(gatewayv1.ListenerConditionProgrammed)) {
			continue
		}
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// addresses are the Gateway's status.addresses as DNS addresses, and
// whether they are known: the Gateway is Programmed and has one at least.
// Addresses of types other than IPAddress and Hostname are left out.
func addresses(gw *gatewayv1.Gateway, zoneIDs map[string]string) ([]dns.Address, bool) {
	if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed)) {
		return nil, false
	}
	var out []dns.Address
	for _, a := range gw.Status.Addresses {
		t := gatewayv1.IPAddressType
		if a.Type != nil {
			t = *a.Type
		}
		switch t {
		case gatewayv1.IPAddressType:
			out = append(out, dns.Address{IP: a.Value})
		case gatewayv1.HostnameAddressType:
			n := strings.TrimSuffix(strings.ToLower(a.Value), ".")
			out = append(out, dns.Address{Hostname: n, HostedZoneID: zoneIDs[n]})
		}
	}
	return out, len(out) > 0
}

// byParent indexes routes by the "namespace/name" of each Gateway their
// parentRefs name (deleted routes left out).
func byParent[R comparable](routes []R, of func(R) (metav1.ObjectMeta, []gatewayv1.ParentReference)) map[string][]R {
	out := map[string][]R{}
	var zero R
	for _, r := range routes {
		if r == zero {
			continue
		}
		om, prs := of(r)
		if om.DeletionTimestamp != nil {
			continue
		}
		var keys []string
		for _, pr := range prs {
			if (pr.Group != nil && *pr.Group != gateway.Group) || (pr.Kind != nil && *pr.Kind != "Gateway") {
				continue
			}
			ns := om.Namespace
			if pr.Namespace != nil {
				ns = string(*pr.Namespace)
			}
			if k := ns + "/" + string(pr.Name); !slices.Contains(keys, k) {
				keys = append(keys, k)
				out[k] = append(out[k], r)
			}
		}
	}
	return out
}
