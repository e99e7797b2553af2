package gatewaystatus

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/gateway"
)

// mergeConditions returns want with each condition's LastTransitionTime
// taken from cur when its status did not change, now otherwise.
func mergeConditions(cur, want []metav1.Condition, now metav1.Time) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(want))
	for _, w := range want {
		w.LastTransitionTime = now
		if c := meta.FindStatusCondition(cur, w.Type); c != nil && c.Status == w.Status {
			w.LastTransitionTime = c.LastTransitionTime
		}
		out = append(out, w)
	}
	return out
}

// classStatus is gc's status with want's conditions.
func classStatus(cur gatewayv1.GatewayClassStatus, want gatewayv1.GatewayClassStatus, now metav1.Time) gatewayv1.GatewayClassStatus {
	out := *cur.DeepCopy()
	out.Conditions = mergeConditions(cur.Conditions, want.Conditions, now)
	return out
}

// gatewayStatus is a Gateway's status: want's conditions and listeners, and
// the load balancer's addresses. Without known addresses the Gateway is not
// Programmed: noAddress's reason and message, or AddressNotAssigned saying
// the binding has none yet.
func gatewayStatus(cur, want gatewayv1.GatewayStatus, addrs []v1alpha1.LoadBalancerAddress, noAddress *metav1.Condition, now metav1.Time) gatewayv1.GatewayStatus {
	out := *cur.DeepCopy()
	conds := slices.Clone(want.Conditions)
	out.Addresses = statusAddresses(addrs)
	if len(out.Addresses) == 0 {
		for i := range conds {
			if conds[i].Type == string(gatewayv1.GatewayConditionProgrammed) && conds[i].Status == metav1.ConditionTrue {
				conds[i].Status = metav1.ConditionFalse
				conds[i].Reason = string(gatewayv1.GatewayReasonAddressNotAssigned)
				conds[i].Message = "the load balancer of the class (its LoadBalancerBinding) has no address yet"
				if noAddress != nil {
					conds[i].Reason, conds[i].Message = noAddress.Reason, noAddress.Message
				}
			}
		}
	}
	out.Conditions = mergeConditions(cur.Conditions, conds, now)
	out.Listeners = make([]gatewayv1.ListenerStatus, 0, len(want.Listeners))
	for _, l := range want.Listeners {
		var prev []metav1.Condition
		for _, c := range cur.Listeners {
			if c.Name == l.Name {
				prev = c.Conditions
			}
		}
		l.Conditions = mergeConditions(prev, l.Conditions, now)
		out.Listeners = append(out.Listeners, l)
	}
	if len(out.Listeners) == 0 {
		out.Listeners = nil
	}
	return out
}

// statusAddresses converts binding addresses, IPs first, without
// duplicates.
func statusAddresses(addrs []v1alpha1.LoadBalancerAddress) []gatewayv1.GatewayStatusAddress {
	var out []gatewayv1.GatewayStatusAddress
	ip, host := gatewayv1.IPAddressType, gatewayv1.HostnameAddressType
	for _, a := range addrs {
		if a.IP != "" {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: &ip, Value: a.IP})
		}
	}
	for _, a := range addrs {
		if a.IP == "" && a.Hostname != "" {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: &host, Value: a.Hostname})
		}
	}
	return slices.CompactFunc(out, func(a, b gatewayv1.GatewayStatusAddress) bool { return a.Value == b.Value })
}

// routeParents is a route's status.parents: other controllers' entries
// as they are, ours replaced by want (nil: ours removed).
func routeParents(cur []gatewayv1.RouteParentStatus, want []gatewayv1.RouteParentStatus, now metav1.Time) []gatewayv1.RouteParentStatus {
	return mergeEntries(cur, want, func(p *gatewayv1.RouteParentStatus) (gatewayv1.GatewayController, *gatewayv1.ParentReference, *[]metav1.Condition) {
		return p.ControllerName, &p.ParentRef, &p.Conditions
	}, now)
}

// policyAncestors is a policy's status.ancestors: other controllers'
// entries as they are, ours replaced by want (none: ours removed). Never
// nil: the field is required.
func policyAncestors(cur, want []gatewayv1.PolicyAncestorStatus, now metav1.Time) []gatewayv1.PolicyAncestorStatus {
	out := mergeEntries(cur, want, func(a *gatewayv1.PolicyAncestorStatus) (gatewayv1.GatewayController, *gatewayv1.ParentReference, *[]metav1.Condition) {
		return a.ControllerName, &a.AncestorRef, &a.Conditions
	}, now)
	switch {
	case len(cur) == 0 && len(out) == 0:
		return cur // nothing to write
	case out == nil:
		return []gatewayv1.PolicyAncestorStatus{}
	}
	return out
}

// mergeEntries is a list of status entries (route parents, policy
// ancestors) with other controllers' entries of cur as they are and ours
// replaced by want, each condition keeping its LastTransitionTime from
// our entry of cur for the same reference while its status holds. fields
// gives an entry's controller, reference and conditions.
func mergeEntries[E any, P interface {
	*E
	DeepCopy() *E
}](cur, want []E, fields func(*E) (gatewayv1.GatewayController, *gatewayv1.ParentReference, *[]metav1.Condition), now metav1.Time) []E {
	var out []E
	for i := range cur {
		if ctrl, _, _ := fields(&cur[i]); ctrl != gateway.ControllerName {
			out = append(out, *P(&cur[i]).DeepCopy())
		}
	}
	for _, w := range want {
		_, ref, conds := fields(&w)
		var prev []metav1.Condition
		for i := range cur {
			if ctrl, r, c := fields(&cur[i]); ctrl == gateway.ControllerName && equality.Semantic.DeepEqual(*r, *ref) {
				prev = *c
			}
		}
		*conds = mergeConditions(prev, *conds, now)
		out = append(out, w)
	}
	return out
}

// patchEntries writes, for each of items, the list of status entries
// field points at, as merge makes it of the current one and ours (by
// "namespace/name"), where it changed.
func patchEntries[T any, O interface {
	*T
	client.Object
}, E any](ctx context.Context, r *Reconciler, items []T, ours map[string][]E, field func(O) *[]E,
	merge func(cur, want []E, now metav1.Time) []E, now metav1.Time) []error {
	var errs []error
	for i := range items {
		obj := O(&items[i])
		f := field(obj)
		want := merge(*f, ours[obj.GetNamespace()+"/"+obj.GetName()], now)
		errs = append(errs, r.patch(ctx, obj, !equality.Semantic.DeepEqual(*f, want), func() { *f = want }))
	}
	return errs
}

// routeEntries maps "namespace/name" to a route's parent entries.
func routeEntries(sts []gateway.RouteStatus) map[string][]gatewayv1.RouteParentStatus {
	out := make(map[string][]gatewayv1.RouteParentStatus, len(sts))
	for _, st := range sts {
		out[st.Namespace+"/"+st.Name] = st.Parents
	}
	return out
}
