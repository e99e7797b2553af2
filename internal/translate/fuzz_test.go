package translate

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/route"
)

var annotationKeys = []string{
	AnnotationLoadBalance,
	AnnotationHashByHeader,
	AnnotationAffinity,
	AnnotationAffinityCookieName,
	AnnotationAffinityCookieMaxAge,
	AnnotationRetries,
	AnnotationConnectTimeout,
	AnnotationResponseTimeout,
	AnnotationProxyReadTimeout,
	AnnotationProxySendTimeout,
}

// FuzzAnnotations feeds arbitrary annotation maps to the parsers and to
// Build: no panic, a valid Policy, problems that never quote a value.
func FuzzAnnotations(f *testing.F) {
	f.Add(uint8(0xff), "round-robin", "X-User", "cookie", "sid", "1h", "3", "2s", "30", "other/key", "v")
	f.Add(uint8(0x00), "", "", "", "", "", "", "", "", "", "")
	f.Add(uint8(0x5a), "random", "bad header", "ip", "a;b", "1.5s", "-1", "2h", "9223372036854775807", "sluice.dev/x", "{{x}}")
	f.Add(uint8(0x14), "least-request", "\x00", "cookie", "\xff", "8760h", "5", "-0", "0s", "", "")
	f.Fuzz(func(t *testing.T, set uint8, lb, hash, aff, cookie, maxAge, retries, connect, response, k, v string) {
		ann := map[string]string{}
		for i, val := range []string{lb, hash, aff, cookie, maxAge, retries, connect, response} {
			if set&(1<<i) != 0 {
				ann[annotationKeys[i]] = val
			}
		}
		if k != "" {
			ann[k] = v
		}
		p, errs := parsePolicy(ann)
		checkPolicy(t, p)
		for _, e := range errs {
			if _, ok := ann[e.key]; !ok {
				t.Errorf("problem about absent annotation %s", e.key)
			}
			for _, val := range ann {
				if quotable(val) && strings.Contains(e.msg, val) {
					t.Errorf("problem %q quotes the value %q", e.msg, val)
				}
			}
		}

		ing := fuzzIngress("annotated", "a.example.com", "/", networkingv1.PathTypePrefix, "", 80)
		ing.Annotations = ann
		ing.Spec.DefaultBackend = &ing.Spec.Rules[0].HTTP.Paths[0].Backend
		cfg, problems := Build(Input{Ingresses: []*networkingv1.Ingress{ing}}, Options{})
		checkInvariants(t, &cfg)
		for _, pr := range problems {
			if pr.Reason != "InvalidAnnotation" && pr.Reason != "ServiceNotFound" {
				t.Errorf("unexpected problem %+v", pr)
			}
		}
	})
}

// quotable reports whether v contains a byte that no fixed problem message
// contains, so finding v in a message means the value was quoted.
func quotable(v string) bool {
	return strings.IndexFunc(v, func(r rune) bool {
		return r < ' ' || r > '~' || strings.ContainsRune("$%&'*+<=>?@[\\]^_`{|}~!#", r)
	}) >= 0
}

func checkPolicy(t *testing.T, p route.Policy) {
	t.Helper()
	if p.Retries < -1 || p.Retries > MaxRetries {
		t.Errorf("retries %d out of range", p.Retries)
	}
	for _, d := range []time.Duration{p.ConnectTimeout, p.ResponseTimeout} {
		if d < 0 || d > MaxTimeout {
			t.Errorf("timeout %s out of range", d)
		}
	}
	switch p.Algorithm {
	case route.LeastRequest, route.RoundRobin:
		if p.HashHeader != "" {
			t.Errorf("hash header %q without HeaderHash", p.HashHeader)
		}
	case route.HeaderHash:
		if _, ok := parseToken(p.HashHeader); !ok {
			t.Errorf("invalid hash header %q", p.HashHeader)
		}
	default:
		t.Errorf("unknown algorithm %d", p.Algorithm)
	}
	if a := p.Affinity; a != nil {
		if _, ok := parseToken(a.Name); !ok {
			t.Errorf("invalid cookie name %q", a.Name)
		}
		if a.MaxAge < 0 || a.MaxAge > MaxCookieMaxAge || a.MaxAge%time.Second != 0 {
			t.Errorf("cookie max-age %s invalid", a.MaxAge)
		}
	}
}

// FuzzBuild builds an Ingress from fuzzed host, path, path type and port
// next to a fixed one, checks the Config's invariants, compiles it with
// route.New and matches the fuzzed host and path against it.
func FuzzBuild(f *testing.F) {
	f.Add("foo.example.com", "/", "Prefix", "", int32(80), "foo.example.com")
	f.Add("*.example.com", "/a/b/", "Exact", "http", int32(0), "")
	f.Add("FOO.Example.com", "", "ImplementationSpecific", "", int32(8080), "*.example.com")
	f.Add("192.0.2.1", "/a//b", "Prefix", "Bad_Name", int32(-1), "::1")
	f.Add("", "/fixed", "Prefix", "", int32(80), "")
	f.Add("a.b", "relative", "Regex", "", int32(70000), "a.b")
	f.Fuzz(func(t *testing.T, host, path, pathType, portName string, portNum int32, tlsHost string) {
		fuzzed := fuzzIngress("fuzzed", host, path, networkingv1.PathType(pathType), portName, portNum)
		if pathType == "" {
			fuzzed.Spec.Rules[0].HTTP.Paths[0].PathType = nil
		}
		fuzzed.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{tlsHost}, SecretName: "cert"}}
		fuzzed.CreationTimestamp = metav1.Unix(2, 0)
		fixed := fuzzIngress("fixed", "", "/fixed", networkingv1.PathTypePrefix, "http", 0)
		in := Input{
			Ingresses: []*networkingv1.Ingress{fuzzed, fixed},
			Services: []*corev1.Service{{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
					{Name: "http", Port: 80}, {Name: portName, Port: portNum},
				}},
			}},
			EndpointSlices: []*discoveryv1.EndpointSlice{fuzzSlice(portName, portNum)},
		}
		cfg, _ := Build(in, Options{})
		checkInvariants(t, &cfg)

		// The older fixed Ingress keeps its route whatever the fuzzed one says.
		if len(cfg.VirtualHosts) == 0 || cfg.VirtualHosts[0].Host != "" ||
			!slices.ContainsFunc(cfg.VirtualHosts[0].Routes, func(r route.Route) bool {
				return r.Path == "/fixed" && r.Ingress == "default/fixed"
			}) {
			t.Fatalf("route * Prefix /fixed of default/fixed lost:\n%s", route.Dump(&cfg))
		}

		tbl := route.New(cfg)
		for _, vh := range cfg.VirtualHosts {
			reqHost := vh.Host
			if strings.HasPrefix(reqHost, "*.") {
				reqHost = "x" + reqHost[1:]
			}
			for _, r := range vh.Routes {
				got := tbl.Match(reqHost, r.Path)
				if got == nil || got.Backend == nil {
					t.Fatalf("Match(%q, %q) = nil; want a route", reqHost, r.Path)
				}
				if r.PathType == route.PathExact && got.Path != r.Path {
					t.Errorf("Match(%q, %q) = %s %q; want the Exact route", reqHost, r.Path, got.PathType, got.Path)
				}
			}
		}
		tbl.Match(host, path)
		tbl.Certificate(tlsHost)
	})
}

func fuzzIngress(name, host, path string, pt networkingv1.PathType, portName string, portNum int32) *networkingv1.Ingress {
	class := DefaultIngressClass
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: metav1.Unix(0, 0)},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{
				Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path:     path,
						PathType: &pt,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: "web",
							Port: networkingv1.ServiceBackendPort{Name: portName, Number: portNum},
						}},
					}},
				}},
			}},
		},
	}
}

func fuzzSlice(portName string, portNum int32) *discoveryv1.EndpointSlice {
	http, ready := "http", false
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &http, Port: new(int32(8080))}, {Name: &portName, Port: &portNum}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.0.2"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-a"}},
			{Addresses: []string{"10.244.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-b"}},
		},
	}
}

// FuzzHostCheck holds isDNS1123Subdomain to the API machinery's
// validation it stands in for, plain and as the rest of a wildcard, and
// isIPLike's shortcut to net.ParseIP.
func FuzzHostCheck(f *testing.F) {
	for _, h := range []string{"a", "shop.example.com", "a-b.c", "-a", "a-", "a..b", ".a", "a.", "A.com",
		"xn--bcher-kva.example", "1.2.3.4", "a_b", "*.example.com", "*.", "*", strings.Repeat("a", 254),
		strings.Repeat("a", 64) + ".com", "a.-b.c", "a\x00b", "é.com", "::1", "::ffff:1.2.3.4", "01.2.3.4", "fe80::1%eth0"} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if net.ParseIP(h) != nil && !isIPLike(h) {
			t.Errorf("isIPLike(%q) = false, but it is an IP address", h)
		}
		if got, want := isDNS1123Subdomain(h), len(validation.IsDNS1123Subdomain(h)) == 0; got != want {
			t.Errorf("isDNS1123Subdomain(%q) = %v, validation says %v", h, got, want)
		}
		for _, host := range []string{h, "*." + h} {
			valid := validation.IsDNS1123Subdomain
			if strings.Contains(host, "*") {
				valid = validation.IsWildcardDNS1123Subdomain
			}
			if got, want := wellFormedHost(host), len(valid(host)) == 0; got != want {
				t.Errorf("wellFormedHost(%q) = %v, validation says %v", host, got, want)
			}
		}
	})
}
