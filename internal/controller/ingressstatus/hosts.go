package ingressstatus

import (
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/translate"
)

// Hosts returns the rule and TLS hosts of the Ingresses among ings that
// binding b serves (through their class), lower case, sorted, without
// duplicates: the names a managed load balancer needs certificates for.
// A host counts only for an Ingress of the namespace owning it
// (translate.Ownership), so a refused tenant asks for no certificate.
func (s *Serving) Hosts(b *v1alpha1.LoadBalancerBinding, ings []networkingv1.Ingress) []string {
	var ours []*networkingv1.Ingress
	for i := range ings {
		if ing := &ings[i]; ing.DeletionTimestamp == nil && s.Serves(ing) {
			ours = append(ours, ing)
		}
	}
	own := translate.NewOwnership(ours, s.ownership)
	var out []string
	for _, ing := range ours {
		if !slices.ContainsFunc(s.bindingsOf(s.className(ing)), func(x *v1alpha1.LoadBalancerBinding) bool {
			return x.Namespace == b.Namespace && x.Name == b.Name
		}) {
			continue
		}
		for _, h := range hostsOf(ing) {
			if own.Owns(ing.Namespace, h) {
				out = append(out, h)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// hostsOf returns the non-empty rule and TLS hosts of ing, lower case.
func hostsOf(ing *networkingv1.Ingress) []string {
	var out []string
	for _, r := range ing.Spec.Rules {
		if r.Host != "" {
			out = append(out, strings.ToLower(r.Host))
		}
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			if h != "" {
				out = append(out, strings.ToLower(h))
			}
		}
	}
	return out
}
