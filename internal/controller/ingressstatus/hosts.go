package ingressstatus

import (
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/api/v1alpha1"
)

// Hosts returns the rule and TLS hosts of the Ingresses among ings that
// binding b serves (through their class), lower case, sorted, without
// duplicates: the names a managed load balancer needs certificates for.
func (s *Serving) Hosts(b *v1alpha1.LoadBalancerBinding, ings []networkingv1.Ingress) []string {
	var out []string
	for i := range ings {
		ing := &ings[i]
		if ing.DeletionTimestamp != nil || !s.Serves(ing) {
			continue
		}
		if !slices.ContainsFunc(s.bindingsOf(s.className(ing)), func(x *v1alpha1.LoadBalancerBinding) bool {
			return x.Namespace == b.Namespace && x.Name == b.Name
		}) {
			continue
		}
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
	}
	slices.Sort(out)
	return slices.Compact(out)
}
