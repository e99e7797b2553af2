package ingressdaemonset

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	"sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/nodes"
)

// LBView returns, per node, what the Instance bindings that select ids'
// pods say about the node's target: whether it is still listed in any of
// their groups and whether it is healthy in all. snapshotOf returns a
// binding's last snapshot (nil: none yet). Pure.
//
// A node is drained for a binding once a synced snapshot of the binding's
// current generation lists its target in no group (or only as unused): the
// binding deregistered it when the node was detached, and the provider
// dropped it once the load balancer let go (HAProxy: no session left;
// AWS: the target left draining).
func LBView(ids *v1alpha1.IngressDaemonSet, bindings []v1alpha1.LoadBalancerBinding, snapshotOf func(types.NamespacedName) *snapshot.Snapshot, ns []*corev1.Node) map[string]nodes.NodeLB {
	podLabels := labels.Set(nodes.Deployment(ids, "node").Spec.Template.Labels)
	out := map[string]nodes.NodeLB{}
	for i := range bindings {
		b := &bindings[i]
		if b.Spec.TargetType != v1alpha1.TargetInstance || b.Namespace != ids.Namespace || b.DeletionTimestamp != nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&b.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(podLabels) {
			continue
		}
		if b.Spec.Port.Type != intstr.Int || b.Spec.Port.IntVal < 1 || b.Spec.Port.IntVal > 65535 {
			continue
		}
		_, _, timeout := binding.Settings(b)
		snap := snapshotOf(types.NamespacedName{Namespace: b.Namespace, Name: b.Name})
		synced := snap.Synced() && snap.Generation == b.Generation
		for _, n := range ns {
			t, ok := nodeTarget(n, uint16(b.Spec.Port.IntVal))
			v, seen := out[n.Name]
			if !seen {
				v = nodes.NodeLB{Served: true, Synced: true, Healthy: true}
			}
			v.Synced = v.Synced && synced
			v.DrainTimeout = max(v.DrainTimeout, timeout)
			if !ok || !synced {
				v.Healthy = false
				v.Listed = v.Listed || !synced
				out[n.Name] = v
				continue
			}
			for _, g := range snap.Groups {
				st, listed := g.Status(t)
				if listed && st.State != lb.Unused {
					v.Listed = true
				}
				if !listed || st.State != lb.Healthy {
					v.Healthy = false
				}
			}
			out[n.Name] = v
		}
	}
	return out
}

// nodeTarget is the node's instance target at port: its InternalIP, and
// the last segment of spec.providerID as the ID (as package targets
// builds it).
func nodeTarget(n *corev1.Node, port uint16) (lb.Target, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil || ip.Zone() != "" {
			continue
		}
		id := n.Spec.ProviderID
		if i := strings.LastIndexByte(id, '/'); i >= 0 {
			id = id[i+1:]
		}
		return lb.Target{Address: netip.AddrPortFrom(ip.Unmap(), port), ID: id}, true
	}
	return lb.Target{}, false
}
