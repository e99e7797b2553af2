package gateway

import (
	"cmp"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/route"
)

// BackendTLSPolicy (gateway.networking.k8s.io/v1): a policy whose
// targetRefs name a Service of its own namespace (sectionName: one port of
// it, by name) makes the backends of that Service port, as HTTPRoute and
// GRPCRoute rules and mirrors use them, be reached over TLS: hostname is
// the SNI and the name verified, caCertificateRefs (ConfigMaps of the
// policy's namespace, key ca.crt) or wellKnownCACertificates System the
// roots; with subjectAltNames (types Hostname and URI), the certificate
// must carry one of those instead, and hostname is the SNI only. A policy that cannot be met (a CA that cannot be read, an
// unsupported field) leaves those backends without endpoints: they answer
// 503, never plain HTTP nor unverified TLS. Of two policies for one target
// and sectionName the older wins (the other is Conflicted); a policy for
// the port wins over one for the whole Service.

// BackendTLS is how the proxy reaches a backend over TLS, from the
// BackendTLSPolicy that applies to its Service port.
type BackendTLS struct {
	// Policy is "namespace/name" of the BackendTLSPolicy.
	Policy string
	// Hostname is sent as SNI, and verified in the endpoints' certificates
	// unless SubjectAltNames is set.
	Hostname string
	// SubjectAltNames, when set, are what the endpoints' certificates are
	// verified against: each must carry at least one.
	SubjectAltNames []route.SubjectAltName
	// CA holds the PEM certificates of the caCertificateRefs the
	// endpoints' certificates must chain to; nil: the system roots
	// (wellKnownCACertificates System).
	CA []byte
	// CASource names the ConfigMaps CA came from ("ConfigMap
	// namespace/name", comma-separated); "" for the system roots.
	CASource string
	// Invalid, when not "", says why the policy cannot be met: the
	// backend gets no endpoints.
	Invalid string
}

// PolicyStatus is one BackendTLSPolicy's status.ancestors entries written
// by ControllerName: one per Gateway through which a route reaches a
// backend the policy targets. Conditions carry no LastTransitionTime.
type PolicyStatus struct {
	Namespace, Name string
	Ancestors       []gatewayv1.PolicyAncestorStatus
}

// CAKey is the ConfigMap key holding a CA bundle (PEM).
const CAKey = "ca.crt"

// maxAncestors is the CRD's bound on status.ancestors.
const maxAncestors = 16

// tlsPolicy is one policy's verdict and where it applies.
type tlsPolicy struct {
	p         *gatewayv1.BackendTLSPolicy
	tls       *BackendTLS
	accepted  metav1.Condition
	resolved  metav1.Condition
	targets   int             // Service targetRefs
	lost      int             // of which an older policy holds
	ancestors map[string]bool // namespace/name of Gateways
}

// tlsPolicies resolves the policies and indexes them by target,
// "namespace/service#sectionName" ("#" alone for the whole Service), the
// one that takes precedence first.
func (b *builder) tlsPolicies(in []*gatewayv1.BackendTLSPolicy, cms []*corev1.ConfigMap) (map[string][]*tlsPolicy, []*tlsPolicy) {
	if len(in) == 0 {
		return nil, nil
	}
	byName := map[string]*corev1.ConfigMap{}
	for _, cm := range cms {
		if cm != nil {
			byName[cm.Namespace+"/"+cm.Name] = cm
		}
	}
	pols := slices.DeleteFunc(slices.Clone(in), func(p *gatewayv1.BackendTLSPolicy) bool { return p == nil })
	slices.SortFunc(pols, func(x, y *gatewayv1.BackendTLSPolicy) int {
		return cmp.Or(x.CreationTimestamp.Time.Compare(y.CreationTimestamp.Time),
			strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name))
	})
	byTarget := map[string][]*tlsPolicy{}
	out := make([]*tlsPolicy, 0, len(pols))
	for _, p := range pols {
		tp := resolveTLSPolicy(p, byName)
		seen := map[string]bool{}
		for _, tr := range p.Spec.TargetRefs {
			if tr.Group != "" || tr.Kind != "Service" {
				continue // implementation-specific kinds: not supported
			}
			key := p.Namespace + "/" + string(tr.Name) + "#"
			if tr.SectionName != nil {
				key += string(*tr.SectionName)
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			tp.targets++
			if len(byTarget[key]) > 0 {
				tp.lost++
			}
			byTarget[key] = append(byTarget[key], tp)
		}
		if tp.targets > 0 && tp.lost == tp.targets && tp.accepted.Status == metav1.ConditionTrue {
			tp.accepted = condition(string(gatewayv1.PolicyConditionAccepted), false, string(gatewayv1.PolicyReasonConflicted),
				"an older BackendTLSPolicy targets the same Service and sectionName; it applies instead", p.Generation)
		}
		out = append(out, tp)
	}
	return byTarget, out
}

// resolveTLSPolicy checks a policy's validation and reads its CA
// ConfigMaps.
func resolveTLSPolicy(p *gatewayv1.BackendTLSPolicy, cms map[string]*corev1.ConfigMap) *tlsPolicy {
	v := &p.Spec.Validation
	gen := p.Generation
	t := &BackendTLS{Policy: p.Namespace + "/" + p.Name, Hostname: strings.ToLower(string(v.Hostname))}
	tp := &tlsPolicy{p: p, tls: t, ancestors: map[string]bool{},
		accepted: condition(string(gatewayv1.PolicyConditionAccepted), true, string(gatewayv1.PolicyReasonAccepted), "the policy applies to the backends of its target Services", gen),
		resolved: condition(string(gatewayv1.BackendTLSPolicyConditionResolvedRefs), true, string(gatewayv1.BackendTLSPolicyReasonResolvedRefs), "every caCertificateRef was resolved", gen),
	}
	invalid := func(msg string) {
		if tp.accepted.Status == metav1.ConditionTrue {
			tp.accepted = condition(string(gatewayv1.PolicyConditionAccepted), false, string(gatewayv1.PolicyReasonInvalid), msg, gen)
		}
	}
	if errs := validation.IsDNS1123Subdomain(t.Hostname); len(errs) > 0 {
		invalid(fmt.Sprintf("validation.hostname %q is not a DNS name", truncate(t.Hostname, 253)))
	}
	sans, msg := subjectAltNames(v.SubjectAltNames) // backendtls_san.go
	if msg != "" {
		invalid(msg)
	}
	refs := v.CACertificateRefs
	wk := ""
	if v.WellKnownCACertificates != nil {
		wk = string(*v.WellKnownCACertificates)
	}
	switch {
	case len(refs) > 0 && wk != "":
		invalid("validation.caCertificateRefs and validation.wellKnownCACertificates must not both be set")
	case len(refs) == 0 && wk == "":
		invalid("validation.caCertificateRefs or validation.wellKnownCACertificates is required")
	case len(refs) == 0 && wk != string(gatewayv1.WellKnownCACertificatesSystem):
		invalid(fmt.Sprintf("validation.wellKnownCACertificates %q is not supported (only System)", truncate(wk, 253)))
	}
	var pem []byte
	var sources []string
	valid := 0
	unresolved := func(reason gatewayv1.PolicyConditionReason, msg string) {
		if tp.resolved.Status == metav1.ConditionTrue {
			tp.resolved = condition(string(gatewayv1.BackendTLSPolicyConditionResolvedRefs), false, string(reason), msg, gen)
		}
	}
	for k, ref := range refs {
		where := fmt.Sprintf("validation.caCertificateRefs[%d]", k)
		if ref.Group != "" || ref.Kind != "ConfigMap" {
			unresolved(gatewayv1.BackendTLSPolicyReasonInvalidKind, fmt.Sprintf("%s: kind %s is not supported, only core ConfigMaps", where, kindName(ref.Group, ref.Kind)))
			continue
		}
		nsName := p.Namespace + "/" + string(ref.Name)
		cm := cms[nsName]
		if cm == nil {
			unresolved(gatewayv1.BackendTLSPolicyReasonInvalidCACertificateRef, fmt.Sprintf("%s: ConfigMap %s not found", where, truncate(nsName, 320)))
			continue
		}
		data := []byte(cm.Data[CAKey])
		if len(data) == 0 {
			data = cm.BinaryData[CAKey]
		}
		if !x509.NewCertPool().AppendCertsFromPEM(data) {
			unresolved(gatewayv1.BackendTLSPolicyReasonInvalidCACertificateRef, fmt.Sprintf("%s: ConfigMap %s has no PEM certificate in %s", where, truncate(nsName, 320), CAKey))
			continue
		}
		valid++
		pem = append(pem, data...)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			pem = append(pem, '\n')
		}
		sources = append(sources, "ConfigMap "+nsName)
	}
	if len(refs) > 0 && valid == 0 && tp.accepted.Status == metav1.ConditionTrue {
		tp.accepted = condition(string(gatewayv1.PolicyConditionAccepted), false, string(gatewayv1.BackendTLSPolicyReasonNoValidCACertificate),
			"no caCertificateRef is usable: "+tp.resolved.Message, gen)
	}
	switch {
	case tp.accepted.Status != metav1.ConditionTrue:
		t.Invalid = tp.accepted.Message
	case tp.resolved.Status != metav1.ConditionTrue:
		t.Invalid = tp.resolved.Message // connections using an invalid reference fail
	default:
		t.CA, t.CASource, t.SubjectAltNames = pem, strings.Join(sources, ","), sans
	}
	return tp
}

func kindName(group gatewayv1.Group, kind gatewayv1.Kind) string {
	if group == "" {
		return truncate(string(kind), 63)
	}
	return truncate(string(kind), 63) + "." + truncate(string(group), 253)
}

// applyBackendTLS sets the TLS of every backend of the rules that a policy
// targets, and records the Gateways through which each policy applies.
func (b *builder) applyBackendTLS(byTarget map[string][]*tlsPolicy, pols []*tlsPolicy) {
	if len(pols) == 0 {
		return
	}
	parents := b.acceptedParents()
	set := func(ref *BackendRef, route string) {
		if ref == nil {
			return
		}
		cands := b.policiesFor(byTarget, ref)
		if len(cands) == 0 {
			return
		}
		ref.TLS = cands[0].tls
		for _, tp := range cands {
			for _, gw := range parents[route] {
				tp.ancestors[gw] = true
			}
		}
	}
	for i := range b.res.Rules {
		r := &b.res.Rules[i]
		key := r.Route
		if r.GRPC {
			key = "GRPCRoute:" + key
		}
		set(r.Backend, key)
		for _, w := range r.Backends {
			set(w.Ref, key)
		}
		for k := range r.Mirrors {
			set(&r.Mirrors[k], key)
		}
	}
	for _, tp := range pols {
		if len(tp.ancestors) == 0 {
			continue
		}
		st := PolicyStatus{Namespace: tp.p.Namespace, Name: tp.p.Name}
		gws := make([]string, 0, len(tp.ancestors))
		for gw := range tp.ancestors {
			gws = append(gws, gw)
		}
		slices.Sort(gws)
		if len(gws) > maxAncestors {
			gws = gws[:maxAncestors]
		}
		for _, gw := range gws {
			ns, name, _ := strings.Cut(gw, "/")
			st.Ancestors = append(st.Ancestors, gatewayv1.PolicyAncestorStatus{
				AncestorRef: gatewayv1.ParentReference{Group: ptr(gatewayv1.Group(Group)), Kind: ptr(gatewayv1.Kind("Gateway")),
					Namespace: ptr(gatewayv1.Namespace(ns)), Name: gatewayv1.ObjectName(name)},
				ControllerName: ControllerName,
				Conditions:     []metav1.Condition{tp.accepted, tp.resolved},
			})
		}
		b.res.BackendTLSPolicies = append(b.res.BackendTLSPolicies, st)
		if tp.tls.Invalid != "" && tp.lost < tp.targets {
			reason := tp.accepted.Reason
			if tp.accepted.Status == metav1.ConditionTrue {
				reason = tp.resolved.Reason
			}
			b.problem("BackendTLSPolicy", tp.p.Namespace, tp.p.Name, reason,
				tp.tls.Invalid+"; the backends of its target Services get no endpoints (503) rather than plain HTTP or unverified TLS")
		}
	}
}

// policiesFor returns the policies for a backend's Service port: those
// naming the port (by name) if any, else those naming the whole Service.
func (b *builder) policiesFor(byTarget map[string][]*tlsPolicy, ref *BackendRef) []*tlsPolicy {
	svc := b.services[ref.Namespace+"/"+ref.Service]
	if svc == nil {
		return nil
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == ref.Port && p.Name != "" {
			if c := byTarget[ref.Namespace+"/"+ref.Service+"#"+p.Name]; len(c) > 0 {
				return c
			}
		}
	}
	return byTarget[ref.Namespace+"/"+ref.Service+"#"]
}

// acceptedParents maps each route ("namespace/name", "GRPCRoute:" before
// a GRPCRoute's) to the Gateways ("namespace/name") it is Accepted by.
func (b *builder) acceptedParents() map[string][]string {
	out := map[string][]string{}
	add := func(prefix string, sts []RouteStatus) {
		for _, st := range sts {
			for _, p := range st.Parents {
				if !meta.IsStatusConditionTrue(p.Conditions, string(gatewayv1.RouteConditionAccepted)) {
					continue
				}
				ns := st.Namespace
				if p.ParentRef.Namespace != nil && *p.ParentRef.Namespace != "" {
					ns = string(*p.ParentRef.Namespace)
				}
				out[prefix+st.Namespace+"/"+st.Name] = append(out[prefix+st.Namespace+"/"+st.Name], ns+"/"+string(p.ParentRef.Name))
			}
		}
	}
	add("", b.res.HTTPRoutes)
	add("GRPCRoute:", b.res.GRPCRoutes)
	return out
}
