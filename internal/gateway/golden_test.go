package gateway

import (
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/golden"
	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/testcert"
)

var update = flag.Bool("update", false, "rewrite testdata/*/golden.txt")

// TestGolden builds every testdata/<case>/input.yaml (options from the
// first document of kind Options, if any) and compares the Result with
// testdata/<case>/golden.txt.
func TestGolden(t *testing.T) {
	golden.Run(t, "testdata/*/input.yaml", *update, func(t *testing.T, c golden.Case) string {
		data, err := os.ReadFile(c.Input)
		if err != nil {
			t.Fatal(err)
		}
		input, opts, err := decode(data)
		if err != nil {
			t.Fatal(err)
		}
		res := Build(input, opts)
		checkInvariants(t, input, res)
		return render(res)
	})
}

// render is the golden text: rules, certificates, statuses (one line per
// condition) and problems.
func render(res Result) string {
	var b strings.Builder
	b.WriteString("rules:\n")
	for _, r := range res.Rules {
		host := r.Host
		if host == "" {
			host = "*"
		}
		ref := func(r *BackendRef) string {
			if r == nil {
				return "500 (no backend)"
			}
			return fmt.Sprintf("%s/%s:%d%s", r.Namespace, r.Service, r.Port, renderTLS(r.TLS))
		}
		be := ref(r.Backend)
		if r.Backends != nil {
			var parts []string
			for _, w := range r.Backends {
				parts = append(parts, fmt.Sprintf("%d %s", w.Weight, ref(w.Ref)))
			}
			be = "[" + strings.Join(parts, ", ") + "]"
		}
		only := ""
		if r.HTTPSOnly {
			only = " https-only"
		}
		if r.GRPC {
			only += " grpc"
		}
		fmt.Fprintf(&b, "  %s %s %s -> %s (%s)%s%s\n", host, r.PathType, r.Path, be, r.Route, only, renderL7(r))
	}
	b.WriteString("certificates:\n")
	for _, c := range res.Certificates {
		anyHost := ""
		if c.AnyHost {
			anyHost = " any-host"
		}
		fmt.Fprintf(&b, "  %s %v (%s)%s\n", c.Secret, c.Hosts, c.Gateway, anyHost)
	}
	b.WriteString("gatewayclasses:\n")
	for _, c := range res.GatewayClasses {
		fmt.Fprintf(&b, "  %s\n", c.Name)
		conditions(&b, "    ", c.Status.Conditions)
	}
	b.WriteString("gateways:\n")
	for _, g := range res.Gateways {
		fmt.Fprintf(&b, "  %s/%s\n", g.Namespace, g.Name)
		conditions(&b, "    ", g.Status.Conditions)
		for _, l := range g.Status.Listeners {
			var kinds []string
			for _, k := range l.SupportedKinds {
				kinds = append(kinds, string(k.Kind))
			}
			fmt.Fprintf(&b, "    listener %s attachedRoutes=%d supportedKinds=%v\n", l.Name, l.AttachedRoutes, kinds)
			conditions(&b, "      ", l.Conditions)
		}
	}
	b.WriteString("httproutes:\n")
	renderRoutes(&b, res.HTTPRoutes)
	if len(res.GRPCRoutes) > 0 {
		b.WriteString("grpcroutes:\n")
		renderRoutes(&b, res.GRPCRoutes)
	}
	if len(res.BackendTLSPolicies) > 0 {
		b.WriteString("backendtlspolicies:\n")
		for _, p := range res.BackendTLSPolicies {
			fmt.Fprintf(&b, "  %s/%s\n", p.Namespace, p.Name)
			for _, a := range p.Ancestors {
				renderEntry(&b, "ancestor", a.AncestorRef, a.ControllerName, a.Conditions)
			}
		}
	}
	b.WriteString("problems:\n")
	for _, p := range res.Problems {
		fmt.Fprintf(&b, "  %s\n", p)
	}
	return b.String()
}

// renderRoutes writes each route's name and parent entries.
func renderRoutes(b *strings.Builder, sts []RouteStatus) {
	for _, r := range sts {
		fmt.Fprintf(b, "  %s/%s\n", r.Namespace, r.Name)
		for _, p := range r.Parents {
			renderEntry(b, "parent", p.ParentRef, p.ControllerName, p.Conditions)
		}
	}
}

// renderEntry writes one status entry of a route (parent) or a policy
// (ancestor): its reference as JSON, its controller, its conditions.
func renderEntry(b *strings.Builder, what string, ref gatewayv1.ParentReference, ctrl gatewayv1.GatewayController, conds []metav1.Condition) {
	j, _ := json.Marshal(ref)
	fmt.Fprintf(b, "    %s %s %s\n", what, j, ctrl)
	conditions(b, "      ", conds)
}

// renderTLS describes a backend's BackendTLSPolicy, "" for none.
func renderTLS(t *BackendTLS) string {
	switch {
	case t == nil:
		return ""
	case t.Invalid != "":
		return fmt.Sprintf(" tls(%s: 503: %s)", t.Policy, t.Invalid)
	}
	san := ""
	for _, n := range t.SubjectAltNames {
		san += " san=" + n.String()
	}
	if t.CA == nil {
		return fmt.Sprintf(" tls(%s sni=%s%s ca=system)", t.Policy, t.Hostname, san)
	}
	return fmt.Sprintf(" tls(%s sni=%s%s ca=%s, %d certificates)", t.Policy, t.Hostname, san, t.CASource, pemCertificates(t.CA))
}

// pemCertificates counts the CERTIFICATE blocks of a CA bundle: its length
// in bytes varies with the random ECDSA signature of the test's CA.
func pemCertificates(b []byte) int {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return n
		}
		if blk.Type == "CERTIFICATE" {
			n++
		}
	}
}

func conditions(b *strings.Builder, indent string, cs []metav1.Condition) {
	for _, c := range cs {
		fmt.Fprintf(b, "%s%s=%s %s: %s (generation %d)\n", indent, c.Type, c.Status, c.Reason, c.Message, c.ObservedGeneration)
	}
}

// decode reads a multi-document YAML stream of the objects Build reads and
// an optional "kind: Options" document holding Options.
func decode(data []byte) (Input, Options, error) {
	var in Input
	var opts Options
	err := golden.Documents(data, func(kind string, doc []byte) error {
		switch kind {
		case "Options":
			return yaml.UnmarshalStrict([]byte(strings.Replace(string(doc), "kind: Options", "", 1)), &opts)
		case "GatewayClass":
			return golden.Append(&in.GatewayClasses, doc)
		case "Gateway":
			return golden.Append(&in.Gateways, doc)
		case "HTTPRoute":
			return golden.Append(&in.HTTPRoutes, doc)
		case "GRPCRoute":
			return golden.Append(&in.GRPCRoutes, doc)
		case "ReferenceGrant":
			return golden.Append(&in.ReferenceGrants, doc)
		case "Namespace":
			return golden.Append(&in.Namespaces, doc)
		case "Service":
			return golden.Append(&in.Services, doc)
		case "BackendTLSPolicy":
			return golden.Append(&in.BackendTLSPolicies, doc)
		case "ConfigMap":
			err := golden.Append(&in.ConfigMaps, doc)
			if o := in.ConfigMaps[len(in.ConfigMaps)-1]; o.Data[CAKey] == "test-ca" {
				cert, _ := testKeyPair()
				o.Data[CAKey] = string(cert)
			}
			return err
		case "Secret":
			err := golden.Append(&in.Secrets, doc)
			withTestKeyPair(in.Secrets[len(in.Secrets)-1])
			return err
		}
		return fmt.Errorf("unknown kind %q", kind)
	})
	return in, opts, err
}

// withTestKeyPair merges a Secret's stringData into data, and gives a
// kubernetes.io/tls Secret that has neither a valid test key pair (the
// fixtures spell out only what a case is about: a malformed one says so in
// stringData).
func withTestKeyPair(s *corev1.Secret) {
	if s.Type != corev1.SecretTypeTLS || len(s.Data)+len(s.StringData) > 0 {
		for k, v := range s.StringData {
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
		return
	}
	cert, key := testKeyPair()
	s.Data = map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}
}

// testKeyPair is a self-signed ECDSA certificate and its key (PEM), made
// once per test binary.
var testKeyPair = sync.OnceValues(func() (cert, key []byte) {
	return testcert.Static("test", []string{"*.example.com"}, time.Unix(1<<33, 0))
})

// checkInvariants holds for every input: tenancy (a rule reaches a Service
// of another namespace only with a ReferenceGrant; a rule exists only for a
// route allowed on some listener), and statuses that say the same as the
// rules.
func checkInvariants(t testing.TB, in Input, res Result) {
	t.Helper()
	routes := map[string]*gatewayv1.HTTPRoute{}
	for _, r := range in.HTTPRoutes {
		if r != nil {
			routes[r.Namespace+"/"+r.Name] = r
		}
	}
	accepted := map[string]bool{}
	for _, st := range res.HTTPRoutes {
		for _, p := range st.Parents {
			for _, c := range p.Conditions {
				if c.Type == "Accepted" && c.Status == metav1.ConditionTrue {
					accepted[st.Namespace+"/"+st.Name] = true
				}
			}
		}
	}
	for _, rl := range res.Rules {
		refs := []*BackendRef{rl.Backend}
		for _, w := range rl.Backends {
			refs = append(refs, w.Ref)
		}
		for k := range rl.Mirrors {
			refs = append(refs, &rl.Mirrors[k])
		}
		for _, be := range refs {
			if be != nil && be.TLS != nil && !strings.HasPrefix(be.TLS.Policy, be.Namespace+"/") {
				t.Errorf("rule %+v: backend %s/%s gets the TLS of BackendTLSPolicy %s of another namespace", rl, be.Namespace, be.Service, be.TLS.Policy)
			}
		}
		if rl.GRPC {
			checkGRPCRule(t, in, res, rl)
			continue
		}
		r := routes[rl.Route]
		if r == nil {
			t.Fatalf("rule %+v names no input route", rl)
		}
		if !accepted[rl.Route] {
			t.Errorf("rule %+v served for a route not Accepted on any parent", rl)
		}
		if be := rl.Backend; be != nil && be.Namespace != r.Namespace {
			if !grantExists(in, r.Namespace, be.Namespace, be.Service) {
				t.Errorf("rule %+v reaches namespace %s without a ReferenceGrant", rl, be.Namespace)
			}
		}
		if !allowedSomewhere(in, r) {
			t.Errorf("rule %+v served for a route no listener allows", rl)
		}
	}
}

func grantExists(in Input, from, to, name string) bool {
	for _, g := range in.ReferenceGrants {
		if g == nil || g.Namespace != to {
			continue
		}
		okFrom, okTo := false, false
		for _, f := range g.Spec.From {
			okFrom = okFrom || (f.Group == Group && f.Kind == "HTTPRoute" && string(f.Namespace) == from)
		}
		for _, x := range g.Spec.To {
			okTo = okTo || (x.Group == "" && x.Kind == "Service" && (x.Name == nil || *x.Name == "" || string(*x.Name) == name))
		}
		if okFrom && okTo {
			return true
		}
	}
	return false
}

// allowedSomewhere is an independent check of allowedRoutes.namespaces for
// the Gateways a route names (Same/All; Selector is taken as allowing).
func allowedSomewhere(in Input, r *gatewayv1.HTTPRoute) bool {
	for _, pr := range r.Spec.ParentRefs {
		ns := r.Namespace
		if pr.Namespace != nil && *pr.Namespace != "" {
			ns = string(*pr.Namespace)
		}
		for _, gw := range in.Gateways {
			if gw == nil || gw.Namespace != ns || gw.Name != string(pr.Name) {
				continue
			}
			for _, l := range gw.Spec.Listeners {
				from := gatewayv1.NamespacesFromSame
				if l.AllowedRoutes != nil && l.AllowedRoutes.Namespaces != nil && l.AllowedRoutes.Namespaces.From != nil {
					from = *l.AllowedRoutes.Namespaces.From
				}
				switch from {
				case gatewayv1.NamespacesFromAll, gatewayv1.NamespacesFromSelector:
					return true
				case gatewayv1.NamespacesFromSame:
					if r.Namespace == gw.Namespace {
						return true
					}
				}
			}
		}
	}
	return false
}

// renderL7 describes a rule's conditions, filters, mirrors and timeout
// with the routing table's own dump (route.Dump).
func renderL7(r Rule) string {
	rt := route.Route{Filters: r.Filters, Conditions: r.Conditions}
	for _, m := range r.Mirrors {
		rt.Mirrors = append(rt.Mirrors, &route.Backend{Name: fmt.Sprintf("%s/%s:%d%s", m.Namespace, m.Service, m.Port, renderTLS(m.TLS))})
	}
	d := route.Dump(&route.Config{VirtualHosts: []route.VirtualHost{{Routes: []route.Route{rt}}}})
	line, _, _ := strings.Cut(strings.SplitN(d, "\n", 3)[1], "\n")
	_, l7, _ := strings.Cut(line, "(ingress )")
	if r.Timeout > 0 {
		l7 += fmt.Sprintf(" timeout=%s", r.Timeout)
	}
	return l7
}

// checkGRPCRule: a GRPCRoute's rule comes from a route Accepted on some
// parent and reaches another namespace only with a ReferenceGrant from
// GRPCRoutes.
func checkGRPCRule(t testing.TB, in Input, res Result, rl Rule) {
	t.Helper()
	var r *gatewayv1.GRPCRoute
	for _, x := range in.GRPCRoutes {
		if x != nil && x.Namespace+"/"+x.Name == rl.Route {
			r = x
		}
	}
	if r == nil {
		t.Fatalf("grpc rule %+v names no input GRPCRoute", rl)
	}
	accepted := false
	for _, st := range res.GRPCRoutes {
		if st.Namespace+"/"+st.Name != rl.Route {
			continue
		}
		for _, p := range st.Parents {
			accepted = accepted || meta.IsStatusConditionTrue(p.Conditions, "Accepted")
		}
	}
	if !accepted {
		t.Errorf("grpc rule %+v served for a route not Accepted on any parent", rl)
	}
	refs := []*BackendRef{rl.Backend}
	for _, w := range rl.Backends {
		refs = append(refs, w.Ref)
	}
	for _, be := range refs {
		if be == nil || be.Namespace == r.Namespace {
			continue
		}
		granted := false
		for _, g := range in.ReferenceGrants {
			if g == nil || g.Namespace != be.Namespace {
				continue
			}
			for _, f := range g.Spec.From {
				granted = granted || f.Kind == "GRPCRoute" && string(f.Namespace) == r.Namespace
			}
		}
		if !granted {
			t.Errorf("grpc rule %+v reaches namespace %s without a ReferenceGrant", rl, be.Namespace)
		}
	}
}
