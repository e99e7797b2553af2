package gateway

import (
	"fmt"
	"regexp"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// WeightedRef is one share of a rule that divides its requests among
// backendRefs.
type WeightedRef struct {
	// Ref is nil when the backendRef cannot be used: its share answers
	// 500.
	Ref    *BackendRef
	Weight int32
}

// ruleBackends resolves the backendRefs of a rule of a route of kind in
// namespace ns. It returns the backend of a rule with one share (nil:
// 500), or the shares of a rule with several, and the first ResolvedRefs
// problem ("" reason when none).
func (b *builder) ruleBackends(kind, ns string, refs []gatewayv1.BackendRef, where string) (single *BackendRef, shares []WeightedRef, reason, msg string) {
	for k := range refs {
		br := &refs[k]
		be, rsn, m := b.refBackend(kind, ns, br.BackendObjectReference)
		if rsn != "" && reason == "" {
			reason, msg = rsn, fmt.Sprintf("%s.backendRefs[%d]: %s", where, k, m)
		}
		w := int32(1)
		if br.Weight != nil {
			w = *br.Weight
		}
		if w <= 0 {
			continue // no traffic for this entry
		}
		shares = append(shares, WeightedRef{Ref: be, Weight: w})
	}
	switch len(shares) {
	case 0:
		return nil, nil, reason, msg // no backend, or every weight 0: 500
	case 1:
		return shares[0].Ref, nil, reason, msg
	}
	for _, s := range shares {
		if s.Ref != nil {
			single = s.Ref
			break
		}
	}
	return single, shares, reason, msg
}

// mirrorBackends resolves RequestMirror backendRefs as backendRefs of the
// rule are resolved; one that cannot be used is left out and reported.
func (b *builder) mirrorBackends(kind, ns string, refs []gatewayv1.BackendObjectReference, where string) (out []BackendRef, reason, msg string) {
	for k, ref := range refs {
		be, rsn, m := b.refBackend(kind, ns, ref)
		if be == nil {
			if reason == "" {
				reason, msg = rsn, fmt.Sprintf("%s.filters: requestMirror %d: %s", where, k, m)
			}
			continue
		}
		out = append(out, *be)
	}
	return out, reason, msg
}

// gatewayDuration is GEP-2257's duration: up to four number-unit pairs.
var gatewayDuration = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

// noTimeout stands for a timeout of "0s" (disabled): the proxy needs a
// bound, so it waits this long.
const noTimeout = 24 * time.Hour

// timeoutOf returns the rule's bound on the wait for the backend's
// response: the smaller of timeouts.request and backendRequest ("0s":
// noTimeout); 0 when neither is set; or why it cannot be served.
func timeoutOf(t *gatewayv1.HTTPRouteTimeouts) (time.Duration, string) {
	if t == nil {
		return 0, ""
	}
	parse := func(d *gatewayv1.Duration, what string) (time.Duration, string) {
		if d == nil {
			return 0, ""
		}
		s := string(*d)
		if !gatewayDuration.MatchString(s) {
			return 0, fmt.Sprintf("timeouts.%s %q is not a duration such as 1h2m3s or 500ms", what, truncate(s, 40))
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Sprintf("timeouts.%s %q: %v", what, truncate(s, 40), err)
		}
		if v == 0 {
			v = noTimeout
		}
		return v, ""
	}
	req, why := parse(t.Request, "request")
	if why != "" {
		return 0, why
	}
	be, why := parse(t.BackendRequest, "backendRequest")
	if why != "" {
		return 0, why
	}
	if req > 0 && be > req {
		return 0, "timeouts.backendRequest must not be longer than timeouts.request"
	}
	if be > 0 {
		return be, ""
	}
	return req, ""
}
