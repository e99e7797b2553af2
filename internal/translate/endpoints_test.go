package translate

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCheckAddress(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		loopback bool // allowLoopback
		want     string
	}{
		{"10.244.1.1", false, ""},
		{"192.0.2.10", false, ""},
		{"203.0.113.7", false, ""},
		{"fd00:10:244::1", false, ""},
		{"2001:db8::1", false, ""},
		{"::ffff:10.1.2.3", false, ""},
		{"2002:0a01:0203::1", false, ""}, // 6to4 of 10.1.2.3
		{"64:ff9b::10.1.2.3", false, ""},

		{"0.0.0.0", false, reasonUnspecified},
		{"0.1.2.3", false, reasonUnspecified},
		{"::", false, reasonUnspecified},
		{"::ffff:0.0.0.0", false, reasonUnspecified},

		{"127.0.0.1", false, reasonLoopback},
		{"127.1.2.3", false, reasonLoopback},
		{"::1", false, reasonLoopback},
		{"::ffff:127.0.0.1", false, reasonLoopback},
		{"64:ff9b::127.0.0.1", false, reasonLoopback},
		{"127.0.0.1", true, ""},
		{"127.0.0.2", true, ""},
		{"::1", true, ""},
		{"::ffff:127.0.0.1", true, ""},

		{"169.254.169.254", false, reasonLinkLocal},
		{"169.254.169.254", true, reasonLinkLocal},
		{"169.254.0.1", false, reasonLinkLocal},
		{"fe80::1", false, reasonLinkLocal},
		{"febf::1", false, reasonLinkLocal},
		{"::ffff:169.254.169.254", false, reasonLinkLocal},
		{"::ffff:a9fe:a9fe", false, reasonLinkLocal},
		{"::169.254.169.254", false, reasonLinkLocal},
		{"64:ff9b::169.254.169.254", false, reasonLinkLocal},
		{"2002:a9fe:a9fe::", false, reasonLinkLocal},
		{"224.0.0.1", false, reasonLinkLocal}, // link-local multicast
		{"ff02::1", false, reasonLinkLocal},

		{"fd00:ec2::254", false, reasonMetadata},
		{"fd00:ec2::253", false, reasonMetadata},
		{"fd00:ec2:0:0:0:0:0:fe", false, reasonMetadata},
		{"168.63.129.16", false, reasonMetadata},
		{"::ffff:168.63.129.16", false, reasonMetadata},
		{"100.100.100.200", false, reasonMetadata},

		{"239.1.2.3", false, reasonMulticast},
		{"ff05::2", false, reasonMulticast},
		{"ff01::1", false, reasonMulticast},
		{"::ffff:239.1.2.3", false, reasonMulticast},
		{"255.255.255.255", false, reasonBroadcast},
		{"240.0.0.1", false, reasonReserved},
		{"64:ff9b:1::1", false, reasonReserved},

		{"fe80::1%eth0", false, "address with a zone"},
		{"not-an-ip", false, "not an IP address"},
		{"", false, "not an IP address"},
		{"10.0.0.1/32", false, "not an IP address"},
	} {
		_, got := checkAddress(tc.addr, tc.loopback)
		if got != tc.want {
			t.Errorf("checkAddress(%q, loopback %t) = %q, want %q", tc.addr, tc.loopback, got, tc.want)
		}
	}
}

func TestCheckTargetRef(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ref        *corev1.ObjectReference
		withoutPod bool
		want       string // substring; "" means accepted
	}{
		{"pod", &corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "p"}, false, ""},
		{"pod v1", &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "team-a", Name: "p"}, false, ""},
		{"none", nil, false, "no targetRef"},
		{"none allowed", nil, true, ""},
		{"node", &corev1.ObjectReference{Kind: "Node", Name: "n"}, false, `a "Node", not a Pod`},
		{"node with flag", &corev1.ObjectReference{Kind: "Node", Name: "n"}, true, `a "Node", not a Pod`},
		{"pod of another group", &corev1.ObjectReference{APIVersion: "x.example.com/v1", Kind: "Pod", Namespace: "team-a"}, false, "not a Pod"},
		{"lower-case kind", &corev1.ObjectReference{Kind: "pod", Namespace: "team-a"}, false, "not a Pod"},
		{"other namespace", &corev1.ObjectReference{Kind: "Pod", Namespace: "team-b", Name: "p"}, false, `namespace "team-b"`},
		{"other namespace with flag", &corev1.ObjectReference{Kind: "Pod", Namespace: "team-b", Name: "p"}, true, `namespace "team-b"`},
		{"no namespace", &corev1.ObjectReference{Kind: "Pod", Name: "p"}, false, `namespace ""`},
	} {
		got := checkTargetRef(tc.ref, "team-a", tc.withoutPod)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: checkTargetRef = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestEndpointsRefusedCounted checks that refused endpoints, ready or not,
// are counted on the backend and named in one problem per Ingress, and
// that the problem message names at most maxListedRefusals addresses.
func TestEndpointsRefusedCounted(t *testing.T) {
	in, _ := loadCase(t, "testdata/endpoint_checks")
	cfg, problems := Build(in, Options{})
	refused := map[string]int{}
	for _, vh := range cfg.VirtualHosts {
		for _, r := range vh.Routes {
			refused[r.Backend.Name] = r.Backend.RefusedEndpoints
		}
	}
	want := map[string]int{"team-a/web:80": 9, "team-a/web6:80": 12, "team-a/refs:80": 5}
	for name, n := range want {
		if refused[name] != n {
			t.Errorf("backend %s: %d refused, want %d", name, refused[name], n)
		}
	}
	n := 0
	for _, p := range problems {
		if p.Reason != ReasonEndpointsRefused {
			t.Errorf("unexpected problem %v", p)
			continue
		}
		n++
		if strings.Count(p.Message, "; ") > maxListedRefusals {
			t.Errorf("problem names more than %d endpoints: %s", maxListedRefusals, p.Message)
		}
	}
	if n != 3 {
		t.Errorf("%d EndpointsRefused problems, want 3 (one per Service)", n)
	}

	// The flags: without a targetRef allowed, loopback allowed.
	cfg, _ = Build(in, Options{AllowEndpointsWithoutPod: true, AllowLoopbackEndpoints: true})
	for _, vh := range cfg.VirtualHosts {
		for _, r := range vh.Routes {
			if r.Backend.Name == "team-a/refs:80" && r.Backend.RefusedEndpoints != 4 {
				t.Errorf("refs with AllowEndpointsWithoutPod: %d refused, want 4", r.Backend.RefusedEndpoints)
			}
			if r.Backend.Name == "team-a/web:80" && r.Backend.RefusedEndpoints != 8 {
				t.Errorf("web with AllowLoopbackEndpoints: %d refused, want 8", r.Backend.RefusedEndpoints)
			}
		}
	}
}

// FuzzCheckAddress: no panic; an accepted address is a valid, zone-free
// address of none of the refused kinds, also once unmapped; loopback is
// accepted only when allowed.
func FuzzCheckAddress(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "127.0.0.1", "::1", "::ffff:169.254.169.254", "fd00:ec2::254", "64:ff9b::a9fe:a9fe",
		"2002:a9fe:a9fe::", "fe80::1%eth0", "0.0.0.0", "255.255.255.255", "", "::ffff:1.2.3.4%x", "1.2.3.4.5"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, allowLoopback bool) {
		a, why := checkAddress(s, allowLoopback)
		if why != "" {
			return
		}
		if !a.IsValid() || a.Zone() != "" {
			t.Fatalf("accepted %q: invalid or zoned", s)
		}
		for _, x := range []netip.Addr{a, a.Unmap()} {
			if x.IsUnspecified() || x.IsLinkLocalUnicast() || x.IsLinkLocalMulticast() || x.IsMulticast() ||
				x.IsInterfaceLocalMulticast() || !allowLoopback && x.IsLoopback() || awsServices.Contains(x) ||
				x == netip.MustParseAddr("169.254.169.254") || x == broadcast4 {
				t.Fatalf("accepted special address %q (%s)", s, x)
			}
		}
		if !allowLoopback {
			if _, why := checkAddress(s, true); why != "" {
				t.Fatalf("%q accepted without loopback but refused with it: %s", s, why)
			}
		}
	})
}

// TestEndpointFamilyChecked: an IPv4 address in an IPv6 slice (and the
// other way round) is refused, as the API server would refuse it.
func TestEndpointFamilyChecked(t *testing.T) {
	s := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv6}
	s.Namespace = "ns"
	ep := &discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns"}}
	if _, why := checkEndpoint(s, ep, nil, Options{}); !strings.Contains(why, "other family") {
		t.Errorf("IPv4 address in an IPv6 slice: %q", why)
	}
	s.AddressType = discoveryv1.AddressTypeIPv4
	if _, why := checkEndpoint(s, ep, nil, Options{}); why != "" {
		t.Errorf("IPv4 address in an IPv4 slice refused: %q", why)
	}
}

// FuzzEndpoints builds a Service with one hostile endpoint (address,
// family, targetRef): no panic; the endpoint is either used or counted as
// refused, never both; a used one passed every check.
func FuzzEndpoints(f *testing.F) {
	f.Add("10.244.0.1", false, "Pod", "v1", "default", false, false)
	f.Add("169.254.169.254", false, "Pod", "", "default", true, true)
	f.Add("::ffff:127.0.0.1", true, "Pod", "", "default", false, true)
	f.Add("10.0.0.1", false, "Node", "", "", true, false)
	f.Add("fd00:ec2::254", true, "", "", "", true, false)
	f.Fuzz(func(t *testing.T, addr string, v6 bool, kind, apiVersion, ns string, noRef, loopback bool) {
		s := fuzzSlice("http", 80)
		if v6 {
			s.AddressType = discoveryv1.AddressTypeIPv6
		}
		ep := discoveryv1.Endpoint{Addresses: []string{addr}}
		if !noRef {
			ep.TargetRef = &corev1.ObjectReference{Kind: kind, APIVersion: apiVersion, Namespace: ns, Name: "p"}
		}
		s.Endpoints = []discoveryv1.Endpoint{ep}
		in := Input{
			Ingresses: []*networkingv1.Ingress{fuzzIngress("ing", "h.example.com", "/", networkingv1.PathTypePrefix, "http", 0)},
			Services: []*corev1.Service{{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
			}},
			EndpointSlices: []*discoveryv1.EndpointSlice{s},
		}
		opts := Options{AllowEndpointsWithoutPod: kind == "", AllowLoopbackEndpoints: loopback}
		cfg, _ := Build(in, opts)
		checkInvariants(t, &cfg)
		for _, vh := range cfg.VirtualHosts {
			for _, r := range vh.Routes {
				be := r.Backend
				if len(be.Endpoints)+be.RefusedEndpoints != 1 {
					t.Fatalf("endpoint %q: %d used, %d refused; want exactly one of them", addr, len(be.Endpoints), be.RefusedEndpoints)
				}
				if len(be.Endpoints) == 1 {
					if _, why := checkEndpoint(s, &s.Endpoints[0], nil, opts); why != "" {
						t.Fatalf("endpoint %q used although %s", addr, why)
					}
				}
			}
		}
	})
}
