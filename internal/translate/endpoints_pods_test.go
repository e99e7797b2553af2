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

// TestCheckPodAddress: an endpoint is used only when its address is one
// of the named Pod's status.podIPs, exactly.
func TestCheckPodAddress(t *testing.T) {
	pods := PodMap{
		"team-b/b-1":    {"10.244.2.7", "fd00:10:244:2::7"},
		"team-b/b-host": {"192.0.2.21"}, // hostNetwork: the node's address
		"team-b/new":    nil,            // Pending: no address yet
		"team-a/a-1":    {"10.244.1.5"},
	}
	for _, tc := range []struct {
		name, addr, pod, want string
	}{
		{"true IPv4", "10.244.2.7", "b-1", ""},
		{"true IPv6 of a dual-stack Pod", "fd00:10:244:2::7", "b-1", ""},
		{"IPv6 spelled otherwise", "fd00:10:244:2:0:0:0:7", "b-1", ""},
		{"hostNetwork Pod: the node's address", "192.0.2.21", "b-host", ""},
		{"forged: another namespace's Pod's address", "10.244.1.5", "b-1", reasonNotPodIP},
		{"forged: the node's address on a Pod network Pod", "192.0.2.21", "b-1", reasonNotPodIP},
		{"IPv4-mapped form of the Pod's address", "::ffff:10.244.2.7", "b-1", reasonNotPodIP},
		{"Pod without addresses yet", "10.244.2.8", "new", reasonNotPodIP},
		{"Pod missing", "10.244.2.9", "b-2", reasonNoPod},
	} {
		addr := netip.MustParseAddr(tc.addr)
		got := checkPodAddress(addr, &corev1.ObjectReference{Kind: "Pod", Namespace: "team-b", Name: tc.pod}, pods)
		if got != tc.want {
			t.Errorf("%s: checkPodAddress(%s, %s) = %q, want %q", tc.name, tc.addr, tc.pod, got, tc.want)
		}
	}
}

// podCase is one Ingress of team-b to Service web, whose slice names Pod
// b-1 with address addr.
func podCase(addr string, pods PodAddresses) Input {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "team-b", Name: "web-x", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "team-b", Name: "b-1"}}},
	}
	ing := fuzzIngress("ing", "b.example.com", "/", networkingv1.PathTypePrefix, "http", 0)
	ing.Namespace = "team-b"
	return Input{
		Ingresses: []*networkingv1.Ingress{ing},
		Services: []*corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "web"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}},
		EndpointSlices: []*discoveryv1.EndpointSlice{s},
		Pods:           pods,
	}
}

func ptr[T any](v T) *T { return &v }

// backendOf returns the only backend's endpoints and refused count.
func backendOf(t *testing.T, in Input) ([]string, int, []Problem) {
	t.Helper()
	cfg, problems := Build(in, Options{})
	for _, vh := range cfg.VirtualHosts {
		for _, r := range vh.Routes {
			var eps []string
			for _, e := range r.Backend.Endpoints {
				eps = append(eps, e.Address)
			}
			return eps, r.Backend.RefusedEndpoints, problems
		}
	}
	t.Fatalf("no route built; problems %v", problems)
	return nil, 0, nil
}

// TestEndpointUsedOncePodArrives: a slice that reaches the proxy before
// its Pod is refused (no traffic to an address nobody vouched for) and
// used by the next build once the Pod is in the index; a forged address
// stays refused, and the problem names the slice and the address only.
func TestEndpointUsedOncePodArrives(t *testing.T) {
	pods := PodMap{}
	eps, refused, problems := backendOf(t, podCase("10.244.2.7", pods))
	if len(eps) != 0 || refused != 1 || len(problems) != 1 || !strings.Contains(problems[0].Message, reasonNoPod) {
		t.Fatalf("before the Pod: endpoints %v, %d refused, problems %v; want none used, 1 refused (%s)", eps, refused, problems, reasonNoPod)
	}
	pods["team-b/b-1"] = []string{"10.244.2.7"}
	eps, refused, problems = backendOf(t, podCase("10.244.2.7", pods))
	if len(eps) != 1 || eps[0] != "10.244.2.7:8080" || refused != 0 || len(problems) != 0 {
		t.Fatalf("after the Pod: endpoints %v, %d refused, problems %v; want 10.244.2.7:8080 used", eps, refused, problems)
	}

	pods["team-a/a-1"] = []string{"10.244.1.5"}
	eps, refused, problems = backendOf(t, podCase("10.244.1.5", pods))
	if len(eps) != 0 || refused != 1 || len(problems) != 1 {
		t.Fatalf("forged: endpoints %v, %d refused, problems %v; want none used, 1 refused", eps, refused, problems)
	}
	msg := problems[0].Message
	if problems[0].Reason != ReasonEndpointsRefused || !strings.Contains(msg, `10.244.1.5 of EndpointSlice "web-x" (`+reasonNotPodIP+`)`) || strings.Contains(msg, "team-a") || strings.Contains(msg, "a-1") {
		t.Errorf("forged: problem %s %q: want the address and slice, nothing of the victim beyond its address", problems[0].Reason, msg)
	}

	// Without the index (--manifests mode), the targetRef is believed.
	if eps, refused, _ := backendOf(t, podCase("10.244.1.5", nil)); len(eps) != 1 || refused != 0 {
		t.Errorf("without Pods: endpoints %v, %d refused; want the endpoint used (today's behaviour)", eps, refused)
	}
}

// FuzzPodEndpoints: one endpoint whose targetRef names a Pod with the
// given addresses (comma-separated; known false: no such Pod). No panic;
// a used endpoint's address is one of the Pod's.
func FuzzPodEndpoints(f *testing.F) {
	f.Add("10.244.2.7", "10.244.2.7", true)
	f.Add("10.244.1.5", "10.244.2.7", true)
	f.Add("10.244.2.7", "", false)
	f.Add("10.244.2.7", "", true)
	f.Add("::ffff:10.244.2.7", "10.244.2.7,fd00::7", true)
	f.Add("10.244.2.7", "not-an-ip,10.244.2.7", true)
	f.Fuzz(func(t *testing.T, addr, podIPs string, known bool) {
		pods := PodMap{}
		if known {
			pods["team-b/b-1"] = strings.Split(podIPs, ",")
		}
		in := podCase(addr, pods)
		cfg, _ := Build(in, Options{})
		checkInvariants(t, &cfg)
		for _, vh := range cfg.VirtualHosts {
			for _, r := range vh.Routes {
				be := r.Backend
				if len(be.Endpoints)+be.RefusedEndpoints != 1 {
					t.Fatalf("endpoint %q: %d used, %d refused; want exactly one of them", addr, len(be.Endpoints), be.RefusedEndpoints)
				}
				if len(be.Endpoints) == 0 {
					continue
				}
				a := netip.MustParseAddr(addr)
				ok := false
				for _, ip := range pods["team-b/b-1"] {
					if p, err := netip.ParseAddr(ip); err == nil && p == a {
						ok = true
					}
				}
				if !known || !ok {
					t.Fatalf("endpoint %q used, but the Pod's addresses are %q (known %v)", addr, podIPs, known)
				}
			}
		}
	})
}
