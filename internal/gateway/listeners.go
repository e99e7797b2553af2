package gateway

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// classes returns the served GatewayClasses by name, with their status.
func (b *builder) classes(in Input) map[string]bool {
	served := map[string]bool{}
	for _, c := range in.GatewayClasses {
		if c == nil || c.Spec.ControllerName != ControllerName {
			continue
		}
		if b.opts.GatewayClass != "" && c.Name != b.opts.GatewayClass {
			continue
		}
		cond := condition(string(gatewayv1.GatewayClassConditionStatusAccepted), true,
			string(gatewayv1.GatewayClassReasonAccepted), "served by sluice", c.Generation)
		if p := c.Spec.ParametersRef; p != nil && (p.Group != "sluice.dev" || p.Kind != "LoadBalancerBinding") {
			msg := fmt.Sprintf("parametersRef %s/%s is not supported: it must name a sluice.dev LoadBalancerBinding", p.Group, p.Kind)
			cond = condition(string(gatewayv1.GatewayClassConditionStatusAccepted), false,
				string(gatewayv1.GatewayClassReasonInvalidParameters), msg, c.Generation)
			b.problem("GatewayClass", "", c.Name, string(gatewayv1.GatewayClassReasonInvalidParameters), msg)
		} else {
			served[c.Name] = true
		}
		b.res.GatewayClasses = append(b.res.GatewayClasses, ClassStatus{Name: c.Name,
			Status: gatewayv1.GatewayClassStatus{Conditions: []metav1.Condition{cond}}})
	}
	return served
}

// listener is one evaluated listener of a served Gateway.
type listener struct {
	gw       *gatewayv1.Gateway
	spec     *gatewayv1.Listener
	status   *gatewayv1.ListenerStatus
	host     string // lower case, "" for any
	usable   bool   // accepted, programmed: attached routes are served
	https    bool
	cert     string // "namespace/name" of the certificate Secret, "" for none
	selector labels.Selector
	attached map[string]bool // hosts of attached routes, for the certificate
	// scope is the Gateway's own address (Options.Addresses), "" for the
	// shared table; unserved: Options.Addresses is set and the Gateway
	// holds none of them yet, so its routes are not served.
	scope    string
	unserved bool
	// port: the listener's port when it is an extra one
	// (Options.Extra*Ports), served apart; 0 for the main ports.
	port int32

	// attachable: accepted without conflict, for a route kind we serve:
	// routes may attach (and count in attachedRoutes) even while its
	// references are unresolved; they are served once it is usable.
	attachable bool
}

// certOK: not HTTPS, or its certificate resolved.
func (ln *listener) certOK() bool { return !ln.https || ln.cert != "" }

// gateway evaluates one Gateway of a served class and records its status.
func (b *builder) gateway(gw *gatewayv1.Gateway) []*listener {
	gen := gw.Generation
	id := gw.Namespace + "/" + gw.Name
	st := gatewayv1.GatewayStatus{}
	var out []*listener
	if msg := checkSpecAddresses(gw.Spec.Addresses); msg != "" {
		st.Conditions = []metav1.Condition{
			condition(string(gatewayv1.GatewayConditionAccepted), false, string(gatewayv1.GatewayReasonUnsupportedAddress), msg, gen),
			condition(string(gatewayv1.GatewayConditionProgrammed), false, string(gatewayv1.GatewayReasonInvalid), "not accepted", gen),
		}
		b.problem("Gateway", gw.Namespace, gw.Name, string(gatewayv1.GatewayReasonUnsupportedAddress), msg)
		b.res.Gateways = append(b.res.Gateways, GatewayStatus{Namespace: gw.Namespace, Name: gw.Name, Status: st})
		return nil
	}
	scope, unserved := b.scopeOf(gw)
	seen := map[string]int{} // port/hostname → first listener index
	accepted, programmed := 0, 0
	for i := range gw.Spec.Listeners {
		l := &gw.Spec.Listeners[i]
		ls := &gatewayv1.ListenerStatus{Name: l.Name, AttachedRoutes: 0}
		ln := &listener{gw: gw, spec: l, status: ls, attached: map[string]bool{}, scope: scope, unserved: unserved}
		acc, accReason, accMsg := true, string(gatewayv1.ListenerReasonAccepted), "accepted"
		refs, refReason, refMsg := true, string(gatewayv1.ListenerReasonResolvedRefs), "all references resolved"
		conflict := false
		if l.Hostname != nil {
			h := strings.ToLower(string(*l.Hostname))
			if msg := checkHostname(h); msg != "" {
				acc, accReason, accMsg = false, string(gatewayv1.ListenerReasonUnsupportedValue), fmt.Sprintf("hostname %q %s", truncate(h, 80), msg)
			}
			ln.host = h
		}
		switch {
		case !acc:
		case l.Protocol == gatewayv1.HTTPProtocolType:
			if l.Port != b.opts.HTTPPort && !slices.Contains(b.opts.ExtraHTTPPorts, l.Port) {
				acc, accReason, accMsg = false, string(gatewayv1.ListenerReasonPortUnavailable),
					"HTTP is served on "+portList(b.opts.HTTPPort, b.opts.ExtraHTTPPorts)+" only"
			} else if l.Port != b.opts.HTTPPort {
				ln.port = l.Port
			}
		case l.Protocol == gatewayv1.HTTPSProtocolType:
			ln.https = true
			if l.Port != b.opts.HTTPSPort && !slices.Contains(b.opts.ExtraHTTPSPorts, l.Port) {
				acc, accReason, accMsg = false, string(gatewayv1.ListenerReasonPortUnavailable),
					"HTTPS is served on "+portList(b.opts.HTTPSPort, b.opts.ExtraHTTPSPorts)+" only"
			} else if l.Port != b.opts.HTTPSPort {
				ln.port = l.Port
			}
			if acc && l.TLS != nil && l.TLS.Mode != nil && *l.TLS.Mode != gatewayv1.TLSModeTerminate {
				acc, accReason, accMsg = false, string(gatewayv1.ListenerReasonUnsupportedValue), "HTTPS listeners terminate TLS: tls.mode must be Terminate"
			}
		default:
			acc, accReason, accMsg = false, string(gatewayv1.ListenerReasonUnsupportedProtocol),
				fmt.Sprintf("protocol %q is not supported (HTTP and HTTPS are)", truncate(string(l.Protocol), 40))
		}
		if acc {
			key := fmt.Sprintf("%d/%s", l.Port, ln.host)
			if _, dup := seen[key]; dup {
				conflict = true
			} else {
				seen[key] = i
			}
		}
		// Route kinds.
		kinds, badKinds := supportedKinds(l.AllowedRoutes)
		if accReason == string(gatewayv1.ListenerReasonUnsupportedProtocol) {
			kinds = []gatewayv1.RouteGroupKind{} // no route kind fits a protocol not served
		}
		ls.SupportedKinds = kinds
		if badKinds {
			refs, refReason, refMsg = false, string(gatewayv1.ListenerReasonInvalidRouteKinds), "allowedRoutes.kinds: only HTTPRoute and GRPCRoute of gateway.networking.k8s.io are supported"
		}
		// Namespace selector.
		if ar := l.AllowedRoutes; ar != nil && ar.Namespaces != nil && ar.Namespaces.From != nil && *ar.Namespaces.From == gatewayv1.NamespacesFromSelector {
			sel, err := selectorOf(ar.Namespaces.Selector)
			if err != nil && acc {
				acc, accReason, accMsg = false, string(gatewayv1.ListenerReasonUnsupportedValue), "allowedRoutes.namespaces.selector: "+truncate(err.Error(), 200)
			}
			ln.selector = sel
		}
		// Certificates.
		if acc && ln.https {
			ok, reason, msg := b.certificate(ln)
			if !ok && refs {
				refs, refReason, refMsg = false, reason, msg
			}
		}
		ls.Conditions = []metav1.Condition{
			condition(string(gatewayv1.ListenerConditionAccepted), acc, accReason, accMsg, gen),
		}
		if conflict {
			ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionConflicted), true,
				string(gatewayv1.ListenerReasonHostnameConflict), "an earlier listener of this Gateway has the same port and hostname", gen))
		} else {
			ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionConflicted), false,
				string(gatewayv1.ListenerReasonNoConflicts), "no conflicts", gen))
		}
		ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionResolvedRefs), refs, refReason, refMsg, gen))
		// A listener naming an unsupported route kind beside HTTPRoute or
		// GRPCRoute still serves those (ResolvedRefs says the rest).
		refsUsable := refs || (refReason == string(gatewayv1.ListenerReasonInvalidRouteKinds) && ln.certOK())
		ln.attachable = acc && !conflict && len(kinds) > 0
		ln.usable = ln.attachable && refsUsable
		if ln.usable {
			ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionProgrammed), true,
				string(gatewayv1.ListenerReasonProgrammed), "programmed", gen))
			programmed++
		} else {
			ls.Conditions = append(ls.Conditions, condition(string(gatewayv1.ListenerConditionProgrammed), false,
				string(gatewayv1.ListenerReasonInvalid), "not programmed: see its other conditions", gen))
			b.problem("Gateway", gw.Namespace, gw.Name, "ListenerNotProgrammed", fmt.Sprintf("listener %s: %s", truncate(string(l.Name), 64), listenerWhy(ls)))
		}
		if acc {
			accepted++
		}
		out = append(out, ln)
	}
	switch {
	case len(gw.Spec.Listeners) > 0 && accepted == 0:
		st.Conditions = append(st.Conditions, condition(string(gatewayv1.GatewayConditionAccepted), false,
			string(gatewayv1.GatewayReasonListenersNotValid), "no listener is accepted", gen))
	case accepted < len(gw.Spec.Listeners):
		st.Conditions = append(st.Conditions, condition(string(gatewayv1.GatewayConditionAccepted), true,
			string(gatewayv1.GatewayReasonListenersNotValid), "some listeners are not accepted", gen))
	default:
		st.Conditions = append(st.Conditions, condition(string(gatewayv1.GatewayConditionAccepted), true,
			string(gatewayv1.GatewayReasonAccepted), "accepted", gen))
	}
	if programmed > 0 {
		st.Conditions = append(st.Conditions, condition(string(gatewayv1.GatewayConditionProgrammed), true,
			string(gatewayv1.GatewayReasonProgrammed), "programmed", gen))
	} else {
		st.Conditions = append(st.Conditions, condition(string(gatewayv1.GatewayConditionProgrammed), false,
			string(gatewayv1.GatewayReasonInvalid), "no listener is programmed", gen))
	}
	b.gwStatus[id] = len(b.res.Gateways)
	b.res.Gateways = append(b.res.Gateways, GatewayStatus{Namespace: gw.Namespace, Name: gw.Name, Status: st})
	return out
}

// listenerStatuses fills in the Gateways' listener statuses once every
// route has attached (attachedRoutes).
func (b *builder) listenerStatuses() {
	for id, i := range b.gwStatus {
		lns := b.gateways[id]
		st := &b.res.Gateways[i].Status
		st.Listeners = make([]gatewayv1.ListenerStatus, 0, len(lns))
		for _, ln := range lns {
			st.Listeners = append(st.Listeners, *ln.status)
		}
	}
}

// listenerWhy names the failing conditions of a listener.
func listenerWhy(ls *gatewayv1.ListenerStatus) string {
	var parts []string
	for _, c := range ls.Conditions {
		bad := c.Status == metav1.ConditionFalse
		if c.Type == string(gatewayv1.ListenerConditionConflicted) {
			bad = c.Status == metav1.ConditionTrue
		}
		if bad && c.Type != string(gatewayv1.ListenerConditionProgrammed) {
			parts = append(parts, c.Type+" "+string(c.Status)+" ("+c.Reason+"): "+c.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// routeKinds are the route kinds listeners take, in the order listed.
var routeKinds = []gatewayv1.Kind{"HTTPRoute", "GRPCRoute"}

// supportedKinds returns the listener's supported route kinds and whether
// allowedRoutes.kinds named any other.
func supportedKinds(ar *gatewayv1.AllowedRoutes) (kinds []gatewayv1.RouteGroupKind, bad bool) {
	if ar == nil || len(ar.Kinds) == 0 {
		for _, k := range routeKinds {
			kinds = append(kinds, gatewayv1.RouteGroupKind{Group: ptr(gatewayv1.Group(Group)), Kind: k})
		}
		return kinds, false
	}
	for _, k := range ar.Kinds {
		if (k.Group == nil || *k.Group == Group) && slices.Contains(routeKinds, k.Kind) {
			if !slices.ContainsFunc(kinds, func(x gatewayv1.RouteGroupKind) bool { return x.Kind == k.Kind }) {
				kinds = append(kinds, gatewayv1.RouteGroupKind{Group: ptr(gatewayv1.Group(Group)), Kind: k.Kind})
			}
			continue
		}
		bad = true
	}
	if kinds == nil {
		kinds = []gatewayv1.RouteGroupKind{}
	}
	return kinds, bad
}

// takes reports whether the listener takes routes of kind.
func (ln *listener) takes(kind gatewayv1.Kind) bool {
	return slices.ContainsFunc(ln.status.SupportedKinds, func(k gatewayv1.RouteGroupKind) bool { return k.Kind == kind })
}

func selectorOf(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, fmt.Errorf("required with from: Selector")
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("parsing label selector: %w", err)
	}
	return sel, nil
}

// certificate resolves an HTTPS listener's first certificateRef.
func (b *builder) certificate(ln *listener) (ok bool, reason, msg string) {
	t := ln.spec.TLS
	if t == nil || len(t.CertificateRefs) == 0 {
		return false, string(gatewayv1.ListenerReasonInvalidCertificateRef), "an HTTPS listener needs tls.certificateRefs"
	}
	ref := t.CertificateRefs[0]
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Secret") {
		return false, string(gatewayv1.ListenerReasonInvalidCertificateRef), "certificateRefs[0]: only core Secrets are supported"
	}
	ns := ln.gw.Namespace
	if ref.Namespace != nil && string(*ref.Namespace) != "" {
		ns = string(*ref.Namespace)
	}
	name := string(ref.Name)
	if ns != ln.gw.Namespace && !b.granted(ln.gw.Namespace, "Gateway", Group, ns, "", "Secret", name) {
		return false, string(gatewayv1.ListenerReasonRefNotPermitted),
			fmt.Sprintf("certificateRefs[0]: Secret %s/%s is in another namespace, and no ReferenceGrant there allows Gateways of namespace %s to use it", truncate(ns, 64), truncate(name, 253), ln.gw.Namespace)
	}
	key := ns + "/" + name
	if s := b.secrets[key]; !b.opts.SecretsUnread && (s == nil || s.Type != corev1.SecretTypeTLS) {
		return false, string(gatewayv1.ListenerReasonInvalidCertificateRef),
			fmt.Sprintf("certificateRefs[0]: Secret %s/%s does not exist or is not of type kubernetes.io/tls", truncate(ns, 64), truncate(name, 253))
	} else if !b.opts.SecretsUnread {
		if err := b.keyPairOK(key, s); err != nil {
			return false, string(gatewayv1.ListenerReasonInvalidCertificateRef),
				fmt.Sprintf("certificateRefs[0]: Secret %s/%s holds no usable key pair: %s", truncate(ns, 64), truncate(name, 253), truncate(err.Error(), 200))
		}
	}
	ln.cert = key
	return true, "", ""
}

// keyPairOK checks once per Build that a TLS Secret's tls.crt and tls.key
// are a certificate and its private key (a malformed Secret makes its
// listeners ResolvedRefs=False, InvalidCertificateRef, as the
// specification asks).
func (b *builder) keyPairOK(key string, s *corev1.Secret) error {
	if err, done := b.keyPairs[key]; done {
		return err
	}
	_, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if b.keyPairs == nil {
		b.keyPairs = map[string]error{}
	}
	b.keyPairs[key] = err
	return err
}

// allows reports whether a route of namespace ns may attach to the listener.
func (b *builder) allows(ln *listener, ns string) bool {
	if !ln.attachable {
		return false
	}
	from := gatewayv1.NamespacesFromSame
	if ar := ln.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil && ar.Namespaces.From != nil {
		from = *ar.Namespaces.From
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSame:
		return ns == ln.gw.Namespace
	case gatewayv1.NamespacesFromSelector:
		n := b.namespaces[ns]
		return ln.selector != nil && n != nil && ln.selector.Matches(labels.Set(n.Labels))
	default: // None, or a value this version does not know
		return false
	}
}

// scopeOf returns the address of Options.Addresses that gw holds in its
// status (the controller assigned it), "" for none; unserved is true when
// Options.Addresses is set and gw holds none of them.
func (b *builder) scopeOf(gw *gatewayv1.Gateway) (scope string, unserved bool) {
	if len(b.opts.Addresses) == 0 {
		return "", false
	}
	for _, a := range gw.Status.Addresses {
		if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
			continue
		}
		ip, err := netip.ParseAddr(a.Value)
		if err != nil {
			continue
		}
		if slices.Contains(b.opts.Addresses, ip.Unmap()) {
			return ip.Unmap().String(), false
		}
	}
	return "", true
}

// portList describes the ports a protocol is served on: "port 80", or
// "ports 80, 8000-8099" with runs of consecutive extra ports joined.
func portList(main int32, extra []int32) string {
	if len(extra) == 0 {
		return fmt.Sprintf("port %d", main)
	}
	ps := slices.Clone(extra)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	out := []string{strconv.Itoa(int(main))}
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if j > i {
			out = append(out, fmt.Sprintf("%d-%d", ps[i], ps[j]))
		} else {
			out = append(out, strconv.Itoa(int(ps[i])))
		}
		i = j + 1
	}
	return "ports " + strings.Join(out, ", ")
}

// checkSpecAddresses checks a Gateway's spec.addresses: of type
// IPAddress (the default), IP addresses, at most 16. Whether the load
// balancer has them is the controller's to say (Programmed=False
// AddressNotUsable; a Gateway is served on one address). "" when fine.
func checkSpecAddresses(addrs []gatewayv1.GatewaySpecAddress) string {
	if len(addrs) > 16 {
		return fmt.Sprintf("spec.addresses lists %d addresses; at most 16", len(addrs))
	}
	for _, a := range addrs {
		if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
			return fmt.Sprintf("spec.addresses type %q is not supported: only IPAddress (one of the binding's gatewayAddresses)", truncate(string(*a.Type), 60))
		}
		if ip, err := netip.ParseAddr(a.Value); err != nil || ip.Zone() != "" {
			return fmt.Sprintf("spec.addresses value %q is not an IP address", truncate(a.Value, 60))
		}
	}
	return ""
}

// RequestedAddresses returns the addresses a Gateway's spec.addresses asks
// for when checkSpecAddresses accepts them (unmapped); nil for none.
func RequestedAddresses(gw *gatewayv1.Gateway) []netip.Addr {
	if len(gw.Spec.Addresses) == 0 || checkSpecAddresses(gw.Spec.Addresses) != "" {
		return nil
	}
	out := make([]netip.Addr, 0, len(gw.Spec.Addresses))
	for _, a := range gw.Spec.Addresses {
		ip, _ := netip.ParseAddr(a.Value)
		out = append(out, ip.Unmap())
	}
	return out
}
