package translate

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/testcert"
)

// world is a small random cluster whose objects collide on purpose: a few
// namespaces, hosts, Services and Secrets shared by many Ingresses.
type world struct {
	r        *rand.Rand
	certs    [][2][]byte // valid key pairs
	ings     map[string]*networkingv1.Ingress
	svcs     map[string]*corev1.Service
	eps      map[string]*discoveryv1.EndpointSlice
	secrets  map[string]*corev1.Secret
	classes  []*networkingv1.IngressClass
	wildcard bool // hosts may be wildcards and hostless rules
	routes   map[string]*gatewayv1.HTTPRoute
	gateway  bool // Gateway API objects (Options.Gateway)
	// pods, when not nil, is Input.Pods: one live map changed in place
	// between steps, as the proxy's Pod cache is.
	pods PodMap
}

var (
	worldNamespaces = []string{"team-a", "team-b", "platform"}
	worldHosts      = []string{"a.example.com", "b.example.com", "c.example.com", "d.example.org", "x.b.example.com"}
	worldPaths      = []string{"/", "/api", "/api/", "/static"}
)

func (w *world) pick(s []string) string { return s[w.r.IntN(len(s))] }

func (w *world) input() Input {
	in := Input{IngressClasses: w.classes}
	for _, k := range sortedKeys(w.ings) {
		in.Ingresses = append(in.Ingresses, w.ings[k])
	}
	for _, k := range sortedKeys(w.svcs) {
		in.Services = append(in.Services, w.svcs[k])
	}
	for _, k := range sortedKeys(w.eps) {
		in.EndpointSlices = append(in.EndpointSlices, w.eps[k])
	}
	for _, k := range sortedKeys(w.secrets) {
		in.Secrets = append(in.Secrets, w.secrets[k])
	}
	if w.pods != nil {
		in.Pods = w.pods
	}
	if w.gateway {
		in.Gateway = worldGateway()
		for _, k := range sortedKeys(w.routes) {
			in.Gateway.HTTPRoutes = append(in.Gateway.HTTPRoutes, w.routes[k])
		}
	}
	// Sources list objects in any order (informer stores).
	w.r.Shuffle(len(in.Ingresses), func(i, j int) { in.Ingresses[i], in.Ingresses[j] = in.Ingresses[j], in.Ingresses[i] })
	w.r.Shuffle(len(in.EndpointSlices), func(i, j int) {
		in.EndpointSlices[i], in.EndpointSlices[j] = in.EndpointSlices[j], in.EndpointSlices[i]
	})
	return in
}

func sortedKeys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (w *world) host() string {
	if w.wildcard {
		switch w.r.IntN(12) {
		case 0:
			return "*.example.com"
		case 1:
			return ""
		}
	}
	return w.pick(worldHosts)
}

func (w *world) backend(ns string) networkingv1.IngressBackend {
	sb := &networkingv1.IngressServiceBackend{Name: fmt.Sprintf("svc-%d", w.r.IntN(3))}
	switch w.r.IntN(4) {
	case 0:
		sb.Port.Name = "http"
	case 1:
		sb.Port.Number = 81 // no such port
	default:
		sb.Port.Number = 80
	}
	return networkingv1.IngressBackend{Service: sb}
}

func (w *world) ingress(ns, name string) *networkingv1.Ingress {
	class := DefaultIngressClass
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, Annotations: map[string]string{},
		CreationTimestamp: metav1.Unix(int64(w.r.IntN(4)), 0), // ties: then by namespace/name
	}}
	switch w.r.IntN(9) {
	case 0:
		other := "other"
		ing.Spec.IngressClassName = &other
	case 8:
		nginx := DefaultIngressNginxClass // served with Options.IngressNginx
		ing.Spec.IngressClassName = &nginx
	case 1: // no class: the default class serves it
	default:
		ing.Spec.IngressClassName = &class
	}
	prefix, exact := networkingv1.PathTypePrefix, networkingv1.PathTypeExact
	for range 1 + w.r.IntN(2) {
		rule := networkingv1.IngressRule{Host: w.host()}
		if w.r.IntN(6) > 0 {
			rule.HTTP = &networkingv1.HTTPIngressRuleValue{}
			for range 1 + w.r.IntN(2) {
				pt := &prefix
				if w.r.IntN(3) == 0 {
					pt = &exact
				}
				rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{Path: w.pick(worldPaths), PathType: pt, Backend: w.backend(ns)})
			}
		}
		ing.Spec.Rules = append(ing.Spec.Rules, rule)
	}
	if w.r.IntN(2) == 0 {
		t := networkingv1.IngressTLS{SecretName: fmt.Sprintf("tls-%d", w.r.IntN(3))}
		if w.r.IntN(3) > 0 {
			t.Hosts = []string{w.host()}
		}
		if w.r.IntN(5) == 0 {
			t.SecretName = ""
		}
		ing.Spec.TLS = append(ing.Spec.TLS, t)
	}
	if w.wildcard && w.r.IntN(10) == 0 {
		be := w.backend(ns)
		ing.Spec.DefaultBackend = &be
	}
	a := ing.Annotations
	switch w.r.IntN(12) {
	case 10:
		a[NginxAnnotationPrefix+"canary"] = "true"
		a[NginxAnnotationPrefix+"canary-weight"] = "50"
	case 11:
		a[NginxAnnotationPrefix+"rewrite-target"] = "/"
		a[NginxAnnotationPrefix+"configuration-snippet"] = "return 200;" // refused
	case 0:
		a[AnnotationCanary] = "true"
		a[AnnotationCanaryWeight] = "30"
	case 1:
		a[AnnotationShareHostWith] = w.pick(worldNamespaces)
	case 2:
		a[AnnotationLoadBalance] = "least-request" // another backend variant
	case 3:
		a[AnnotationAuthType] = "basic"
		a[AnnotationAuthSecret] = fmt.Sprintf("auth-%d", w.r.IntN(2))
	case 4:
		a[AnnotationCustomHTTPErrors] = "503"
		a[AnnotationErrorBackend] = fmt.Sprintf("svc-%d", w.r.IntN(3))
	case 5:
		a[AnnotationAppRoot] = "/app"
	case 6:
		a[AnnotationAuthURL] = fmt.Sprintf("http://svc-%d.%s.svc:80/check", w.r.IntN(3), ns)
	case 7:
		a[AnnotationSSLRedirect] = "true"
	}
	return ing
}

func (w *world) service(ns, name string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	if w.r.IntN(5) == 0 {
		s.Spec.Ports[0].Name = "web"
	}
	if w.r.IntN(8) == 0 {
		s.Spec.Type = corev1.ServiceTypeExternalName
		s.Spec.ExternalName = "example.net"
	}
	return s
}

func (w *world) slice(ns, name, svc string) *discoveryv1.EndpointSlice {
	port, pname := int32(8080), "http"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pname, Port: &port}},
	}
	for i := range 1 + w.r.IntN(3) {
		ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.%d.%d", w.r.IntN(3), i+1)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-%d", svc, i)}}
		switch w.r.IntN(8) {
		case 0:
			ep.Addresses = []string{"169.254.169.254"} // refused
		case 1:
			ready := false
			ep.Conditions.Ready = &ready
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

func (w *world) secret(ns, name string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if strings.HasPrefix(name, "auth-") {
		s.Data = map[string][]byte{AuthSecretKey: []byte("user:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=\n")}
		return s
	}
	s.Type = corev1.SecretTypeTLS
	kp := w.certs[w.r.IntN(len(w.certs))]
	s.Data = map[string][]byte{corev1.TLSCertKey: kp[0], corev1.TLSPrivateKeyKey: kp[1]}
	if w.r.IntN(6) == 0 {
		s.Data[corev1.TLSCertKey] = []byte("not a certificate")
	}
	return s
}

// step changes one random object: adds, replaces, deletes, or rewrites it
// unchanged as a new object (as a manifest file read again does).
func (w *world) step() string {
	ns := w.pick(worldNamespaces)
	op := w.r.IntN(10)
	kind := w.r.IntN(10)
	if w.gateway && w.r.IntN(6) == 0 {
		kind = 10
	}
	if w.pods != nil && w.r.IntN(5) == 0 {
		return w.podStep(ns, op)
	}
	switch {
	case kind == 10:
		name := fmt.Sprintf("route-%d", w.r.IntN(3))
		return apply(w.routes, "HTTPRoute", ns, name, op, func() *gatewayv1.HTTPRoute { return w.route(ns, name) },
			func(o *gatewayv1.HTTPRoute) *gatewayv1.HTTPRoute { return o.DeepCopy() })
	case kind < 5:
		name := fmt.Sprintf("ing-%d", w.r.IntN(5))
		return apply(w.ings, "Ingress", ns, name, op, func() *networkingv1.Ingress { return w.ingress(ns, name) },
			func(o *networkingv1.Ingress) *networkingv1.Ingress { return o.DeepCopy() })
	case kind < 7:
		name := fmt.Sprintf("svc-%d", w.r.IntN(3))
		if w.r.IntN(2) == 0 {
			svc := name
			if w.r.IntN(4) == 0 {
				svc = fmt.Sprintf("svc-%d", w.r.IntN(3)) // a slice may move to another Service
			}
			return apply(w.eps, "EndpointSlice", ns, name+"-1", op, func() *discoveryv1.EndpointSlice { return w.slice(ns, name+"-1", svc) },
				func(o *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice { return o.DeepCopy() })
		}
		return apply(w.svcs, "Service", ns, name, op, func() *corev1.Service { return w.service(ns, name) },
			func(o *corev1.Service) *corev1.Service { return o.DeepCopy() })
	default:
		name := fmt.Sprintf("tls-%d", w.r.IntN(3))
		if w.r.IntN(4) == 0 {
			name = fmt.Sprintf("auth-%d", w.r.IntN(2))
		}
		return apply(w.secrets, "Secret", ns, name, op, func() *corev1.Secret { return w.secret(ns, name) },
			func(o *corev1.Secret) *corev1.Secret { return o.DeepCopy() })
	}
}

// podStep changes a Pod's addresses in the live map: op 0-1 deletes the
// Pod, others give it an address an endpoint may or may not carry.
func (w *world) podStep(ns string, op int) string {
	svc, i := w.r.IntN(3), w.r.IntN(3)
	k := fmt.Sprintf("%s/svc-%d-%d", ns, svc, i)
	if op < 2 {
		delete(w.pods, k)
		return "delete Pod " + k
	}
	w.pods[k] = []string{fmt.Sprintf("10.0.%d.%d", w.r.IntN(3), i+1)}
	return "put Pod " + k + " " + w.pods[k][0]
}

// apply changes m[ns/name]: op 0-1 deletes it, 2 copies it unchanged,
// others put a new random version.
func apply[T any](m map[string]*T, kind, ns, name string, op int, gen func() *T, copyOf func(*T) *T) string {
	k := ns + "/" + name
	switch {
	case op < 2:
		delete(m, k)
		return "delete " + kind + " " + k
	case op == 2 && m[k] != nil:
		m[k] = copyOf(m[k])
		return "copy " + kind + " " + k
	}
	m[k] = gen()
	return "put " + kind + " " + k
}

func newWorld(t testing.TB, seed uint64, certs [][2][]byte) *world {
	w := &world{
		r:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		certs: certs,
		ings:  map[string]*networkingv1.Ingress{}, svcs: map[string]*corev1.Service{},
		eps: map[string]*discoveryv1.EndpointSlice{}, secrets: map[string]*corev1.Secret{},
		routes: map[string]*gatewayv1.HTTPRoute{},
	}
	w.wildcard = w.r.IntN(3) == 0
	w.gateway = seed%4 == 1
	if seed%3 == 0 {
		w.pods = PodMap{}
		for _, ns := range worldNamespaces {
			for svc := range 3 {
				for i := range 3 {
					w.pods[fmt.Sprintf("%s/svc-%d-%d", ns, svc, i)] = []string{fmt.Sprintf("10.0.%d.%d", w.r.IntN(3), i+1)}
				}
			}
		}
	}
	w.classes = []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: DefaultIngressClass,
		Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}}
	for range 12 {
		w.step()
	}
	return w
}

// worldCerts are key pairs for the worlds' Secrets, made once.
func worldCerts(t testing.TB) [][2][]byte {
	var out [][2][]byte
	for _, names := range [][]string{{"a.example.com", "b.example.com"}, {"*.example.com"}} {
		c, k := testcert.SelfSigned(t, names...)
		out = append(out, [2][]byte{c, k})
	}
	return out
}

// worldOptions varies the options that change cross-object decisions.
func worldOptions(seed uint64) Options {
	o := Options{}
	switch seed % 3 {
	case 1:
		o.DefaultBackendNamespaces = []string{"platform"}
	case 2:
		o.HostOwnership = HostOwnershipNone
	}
	if seed%5 == 0 {
		o.DefaultCertificate = "platform/tls-0"
	}
	if seed%4 == 3 {
		o.IngressNginx = &IngressNginx{}
	}
	if seed%4 == 1 {
		o.Gateway = &gateway.Options{}
		if seed%8 == 5 {
			// The world's Gateway holds an address of its own, and its
			// listener on 8080 is served: every route in scopes too.
			o.Gateway.Addresses = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
			o.Gateway.ExtraHTTPPorts = []int32{8080}
		}
	}
	return o
}

// checkIncremental runs steps random changes and compares, after every
// one, Update's result with a full Build of the same Input.
func checkIncremental(t *testing.T, seed uint64, steps int, certs [][2][]byte) (incremental int) {
	t.Helper()
	w := newWorld(t, seed, certs)
	opts := worldOptions(seed)
	cache := NewKeyPairCache()
	res := Translate(w.input(), opts, cache)
	var history []string
	for i := range steps {
		history = append(history, w.step())
		in := w.input()
		res = Update(res, in, opts, cache)
		if !res.Full {
			incremental++
		}
		want, wantProblems := Build(in, opts)
		if !reflect.DeepEqual(res.Config, want) {
			t.Fatalf("seed %d step %d (%s): incremental table differs from a full translation\nchanges: %s\ngot:  %s\nwant: %s",
				seed, i, fullOr(res), strings.Join(history, "; "), dumpConfig(res.Config), dumpConfig(want))
		}
		if !reflect.DeepEqual(res.Problems, wantProblems) {
			t.Fatalf("seed %d step %d (%s): problems differ from a full translation\nchanges: %s\ngot:  %v\nwant: %v",
				seed, i, fullOr(res), strings.Join(history, "; "), res.Problems, wantProblems)
		}
	}
	return incremental
}

func fullOr(r *Result) string {
	if r.Full {
		return "full"
	}
	return fmt.Sprintf("incremental, %d Ingresses", r.Retranslated)
}

func dumpConfig(c interface{}) string { return fmt.Sprintf("%+v", c) }

// TestIncrementalMatchesFull: random change sequences over colliding hosts,
// namespaces, Services, Secrets and canaries give, after every step, the
// same table and problems incrementally as a full translation.
func TestIncrementalMatchesFull(t *testing.T) {
	certs := worldCerts(t)
	seeds, steps := 300, 40
	if testing.Short() {
		seeds = 60
	}
	total, inc := 0, 0
	for seed := range uint64(seeds) {
		inc += checkIncremental(t, seed, steps, certs)
		total += steps
	}
	// A test that cannot fail: most steps must take the incremental path.
	if inc < total/3 {
		t.Fatalf("only %d of %d steps were incremental", inc, total)
	}
	t.Logf("%d of %d steps incremental", inc, total)
}

// FuzzIncremental explores change sequences from any seed.
func FuzzIncremental(f *testing.F) {
	for _, s := range []uint64{0, 1, 2, 7, 42, 1 << 40} {
		f.Add(s, uint8(30))
	}
	certs := worldCerts(f)
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		checkIncremental(t, seed, int(steps%64), certs)
	})
}

// TestUpdateFallsBackToFull: what is not decided per host, Service or
// Secret is translated in full; a plain change is not.
func TestUpdateFallsBackToFull(t *testing.T) {
	prefix := networkingv1.PathTypePrefix
	class := DefaultIngressClass
	ing := func(name, host string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}
	}
	base := func() Input {
		return Input{Ingresses: []*networkingv1.Ingress{ing("a", "a.example.com"), ing("b", "b.example.com")},
			Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}}}
	}
	cases := []struct {
		name   string
		change func(in *Input)
		full   bool
	}{
		{"a host changes", func(in *Input) { in.Ingresses[0] = ing("a", "c.example.com") }, false},
		{"an Ingress is added", func(in *Input) { in.Ingresses = append(in.Ingresses, ing("c", "c.example.com")) }, false},
		{"a default backend is set", func(in *Input) {
			in.Ingresses[0] = ing("a", "a.example.com")
			in.Ingresses[0].Spec.DefaultBackend = &in.Ingresses[0].Spec.Rules[0].HTTP.Paths[0].Backend
		}, true},
		{"a rule without a host", func(in *Input) { in.Ingresses[0] = ing("a", "") }, true},
		{"a wildcard host comes", func(in *Input) { in.Ingresses[0] = ing("a", "*.example.com") }, true},
		{"an IngressClass comes", func(in *Input) {
			in.IngressClasses = []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: "other"}}}
		}, true},
		{"the Input names an Ingress twice", func(in *Input) { in.Ingresses = append(in.Ingresses, ing("a", "d.example.com")) }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Translate(base(), Options{}, nil)
			in := base()
			c.change(&in)
			res = Update(res, in, Options{}, nil)
			if res.Full != c.full {
				t.Errorf("full translation: %t; want %t", res.Full, c.full)
			}
			if want, wantProblems := Build(in, Options{}); !reflect.DeepEqual(res.Config, want) || !reflect.DeepEqual(res.Problems, wantProblems) {
				t.Errorf("result differs from Build's")
			}
		})
	}
}

// worldGateway is the Gateway of the worlds with Gateway API: an HTTP
// listener, and an HTTPS one for b.example.com with the Secret tls-0 of
// its namespace, both open to routes of every namespace.
func worldGateway() GatewayInput {
	all := &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptrTo(gatewayv1.NamespacesFromAll)}}
	return GatewayInput{
		GatewayClasses: []*gatewayv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "sluice"},
			Spec: gatewayv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}},
		Gateways: []*gatewayv1.Gateway{{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "web"},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice", Listeners: []gatewayv1.Listener{
				{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80, AllowedRoutes: all},
				{Name: "alt", Protocol: gatewayv1.HTTPProtocolType, Port: 8080, AllowedRoutes: all},
				{Name: "https", Protocol: gatewayv1.HTTPSProtocolType, Port: 443, Hostname: ptrTo(gatewayv1.Hostname("b.example.com")), AllowedRoutes: all,
					TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "tls-0"}}}},
			}},
			Status: gatewayv1.GatewayStatus{Addresses: []gatewayv1.GatewayStatusAddress{{Type: ptrTo(gatewayv1.IPAddressType), Value: "192.0.2.10"}}}}},
	}
}

func ptrTo[T any](v T) *T { return &v }

// route is an HTTPRoute attached to the world's Gateway, for a host of the
// pool (shared with Ingresses), to a Service of its namespace.
func (w *world) route(ns, name string) *gatewayv1.HTTPRoute {
	rt := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Unix(int64(w.r.IntN(4)), 0)},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
			Name: "web", Namespace: ptrTo(gatewayv1.Namespace("platform"))}}}}}
	if w.r.IntN(4) > 0 {
		rt.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(w.pick(worldHosts))}
	}
	for range 1 + w.r.IntN(2) {
		rt.Spec.Rules = append(rt.Spec.Rules, gatewayv1.HTTPRouteRule{
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptrTo(gatewayv1.PathMatchPathPrefix), Value: ptrTo(w.pick(worldPaths))}}},
			BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(fmt.Sprintf("svc-%d", w.r.IntN(3))), Port: ptrTo(gatewayv1.PortNumber(80))}}}},
		})
	}
	return rt
}
