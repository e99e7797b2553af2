package binding

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/targets"
)

// zoneIndex maps the addresses of the binding's pods (deleting ones
// included) and of their nodes to the node's zone, for targets whose
// provider does not report one (HAProxy).
func zoneIndex(pods []*corev1.Pod, nodes map[string]*corev1.Node) map[netip.Addr]string {
	idx := map[netip.Addr]string{}
	for _, p := range pods {
		n := nodes[p.Spec.NodeName]
		if n == nil || n.Labels[targets.LabelZone] == "" {
			continue
		}
		z := n.Labels[targets.LabelZone]
		if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			idx[ip.Unmap()] = z
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP {
				idx[ip.Unmap()] = z
			}
		}
	}
	return idx
}

// zoneCounts counts listed targets by zone and state, sorted by zone: the
// provider's zone when it reports one, else the zone of the pod or node
// with the target's address, else "".
func zoneCounts(listed []lb.Status, idx map[netip.Addr]string) []v1alpha1.ZoneTargetCounts {
	by := map[string][]lb.Status{}
	for _, s := range listed {
		z := s.Target.Zone
		if z == "" {
			z = idx[s.Target.Address.Addr().Unmap()]
		}
		by[z] = append(by[z], s)
	}
	out := make([]v1alpha1.ZoneTargetCounts, 0, len(by))
	for z, ss := range by {
		out = append(out, v1alpha1.ZoneTargetCounts{Zone: z, TargetCounts: countTargets(ss)})
	}
	slices.SortFunc(out, func(a, b v1alpha1.ZoneTargetCounts) int { return cmp.Compare(a.Zone, b.Zone) })
	return out
}

// zones sets the zone metric and returns the status field's setter.
func (r *Reconciler) zones(key string, listed []lb.Status, idx map[netip.Addr]string) func(*v1alpha1.LoadBalancerBindingStatus) {
	counts := zoneCounts(listed, idx)
	r.metrics.zoneHealthy.DeletePartialMatch(map[string]string{"binding": key})
	for _, z := range counts {
		r.metrics.zoneHealthy.WithLabelValues(key, z.Zone).Set(float64(z.Healthy))
	}
	return func(st *v1alpha1.LoadBalancerBindingStatus) {
		st.Zones = counts
		if len(counts) == 0 {
			st.Zones = nil
		}
	}
}
