package gatewaystatus

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// routeParents is an HTTPRoute's status.parents: other controllers'
// entries as they are, ours replaced by want (nil: ours removed).
func routeParents(cur []gatewayv1.RouteParentStatus, want []gatewayv1.RouteParentStatus, now metav1.Time) []gatewayv1.RouteParentStatus {
	var out []gatewayv1.RouteParentStatus
	for _, p := range cur {
		if p.ControllerName != gateway.ControllerName {
			out = append(out, *p.DeepCopy())
		}
	}
	for _, w := range want {
		var prev []metav1.Condition
		for _, p := range cur {
			if p.ControllerName == gateway.ControllerName && equality.Semantic.DeepEqual(p.ParentRef, w.ParentRef) {
				prev = p.Conditions
			}
		}
		w.Conditions = mergeConditions(prev, w.Conditions, now)
		out = append(out, w)
	}
	return out
}
