package translate

import (
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/route"
)

func TestParseShareHostWith(t *testing.T) {
	many := strings.Repeat("ns,", maxShareNamespaces) // one name, repeated
	var distinct []string
	for i := 0; i <= maxShareNamespaces; i++ {
		distinct = append(distinct, "ns"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want []string
		errs int
	}{
		{"absent", nil, nil, 0},
		{"empty", map[string]string{AnnotationShareHostWith: ""}, nil, 0},
		{"list", map[string]string{AnnotationShareHostWith: " team-b ,team-c,,team-b"}, []string{"team-b", "team-c"}, 0},
		{"invalid left out", map[string]string{AnnotationShareHostWith: "team-b,Team_C,*,a.b"}, []string{"team-b"}, 1},
		{"repeats count once", map[string]string{AnnotationShareHostWith: many}, []string{"ns"}, 0},
		{"too many", map[string]string{AnnotationShareHostWith: strings.Join(distinct, ",")}, distinct[:maxShareNamespaces], 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := parseShareHostWith(tc.ann)
			if !slices.Equal(got, tc.want) || len(errs) != tc.errs {
				t.Errorf("got %v with %d problems %v; want %v with %d", got, len(errs), errs, tc.want, tc.errs)
			}
		})
	}
}

// TestOwnership: the oldest Ingress's namespace owns its rule and TLS
// hosts; only the owner's share annotation counts; mode none owns nothing.
func TestOwnership(t *testing.T) {
	a := tenantIngress("team-a", "a", 1, "shop.example.com", "team-c")
	a.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"TLS.example.com"}}}
	b := tenantIngress("team-b", "b", 2, "shop.example.com", "team-d")
	b2 := tenantIngress("team-b", "b2", 0, "b.example.com", "")
	o := NewOwnership([]*networkingv1.Ingress{b, nil, a, b2}, "")
	for _, tc := range []struct {
		ns, host    string
		owns, serve bool
	}{
		{"team-a", "shop.example.com", true, true},
		{"team-b", "shop.example.com", false, false},
		{"team-c", "shop.example.com", false, true},
		{"team-d", "shop.example.com", false, false},
		{"team-a", "tls.example.com", true, true},
		{"team-b", "tls.example.com", false, false},
		{"team-b", "b.example.com", true, true},
		{"team-a", "nobody.example.com", true, true},
	} {
		if got := o.Owns(tc.ns, tc.host); got != tc.owns {
			t.Errorf("Owns(%s, %s) = %v, want %v", tc.ns, tc.host, got, tc.owns)
		}
		if got := o.Serves(tc.ns, tc.host); got != tc.serve {
			t.Errorf("Serves(%s, %s) = %v, want %v", tc.ns, tc.host, got, tc.serve)
		}
	}
	if got := o.Owner("shop.example.com"); got != "team-a" {
		t.Errorf("Owner = %q, want team-a", got)
	}
	none := NewOwnership([]*networkingv1.Ingress{a, b}, HostOwnershipNone)
	if !none.Serves("team-b", "shop.example.com") || !none.Owns("team-b", "shop.example.com") || none.Owner("shop.example.com") != "" {
		t.Error("mode none: every namespace must own and serve every host")
	}
	var nilOwn *Ownership
	if !nilOwn.Serves("x", "y") || nilOwn.owners() != nil {
		t.Error("nil Ownership must allow everything")
	}
}

// TestBuildWithOwnership: Input.Ownership decides instead of the Ingresses
// translated (the controller's one-Ingress translation).
func TestBuildWithOwnership(t *testing.T) {
	a := tenantIngress("team-a", "a", 1, "shop.example.com", "")
	b := tenantIngress("team-b", "b", 2, "shop.example.com", "")
	own := NewOwnership([]*networkingv1.Ingress{a, b}, "")
	_, ps := Build(Input{Ingresses: []*networkingv1.Ingress{b}, Ownership: own}, Options{})
	if !Fatal(ps, "team-b", "b") || !slices.ContainsFunc(ps, func(p Problem) bool { return p.Reason == ReasonHostOwnedElsewhere }) {
		t.Errorf("team-b/b alone against team-a's ownership: problems %v; want HostOwnedElsewhere and NotServed", ps)
	}
	for _, p := range ps {
		if strings.Contains(p.Message, "team-a") {
			t.Errorf("problem names the owner's namespace: %s", p.Message)
		}
	}
}

func tenantIngress(ns, name string, created int64, host, share string) *networkingv1.Ingress {
	ing := fuzzIngress(name, host, "/"+ns, networkingv1.PathTypePrefix, "http", 0)
	ing.Namespace = ns
	ing.CreationTimestamp = metav1.Unix(created, 0)
	if share != "" {
		ing.Annotations = map[string]string{AnnotationShareHostWith: share}
	}
	return ing
}

// FuzzShareHostWith: any annotation value gives valid, unique namespace
// names, at most maxShareNamespaces, problems that never quote it, and a
// translation in which another namespace's rules under the owner's host are
// served exactly when the parsed list names that namespace.
func FuzzShareHostWith(f *testing.F) {
	f.Add("team-b", "team-b")
	f.Add(" team-b , team-c ", "team-c")
	f.Add("Team-B,team_b,*", "team-b")
	f.Add(",,,", "x")
	f.Add("team-b\x00,team-b", "team-b")
	f.Add(strings.Repeat("a,", 100), "a")
	f.Fuzz(func(t *testing.T, v, guest string) {
		ann := map[string]string{AnnotationShareHostWith: v}
		got, errs := parseShareHostWith(ann)
		if len(got) > maxShareNamespaces {
			t.Fatalf("%d namespaces, more than %d", len(got), maxShareNamespaces)
		}
		for i, ns := range got {
			if len(validation.IsDNS1123Label(ns)) > 0 || slices.Contains(got[:i], ns) {
				t.Fatalf("invalid or repeated namespace %q in %q", ns, got)
			}
		}
		for _, e := range errs {
			if quotable(v) && strings.Contains(e.msg, v) {
				t.Errorf("problem %q quotes the value", e.msg)
			}
		}
		if len(validation.IsDNS1123Label(guest)) > 0 || guest == "owner" {
			return
		}
		owner := tenantIngress("owner", "a", 1, "shop.example.com", "")
		owner.Annotations = ann
		other := tenantIngress(guest, "b", 2, "shop.example.com", "")
		cfg, _ := Build(Input{Ingresses: []*networkingv1.Ingress{other, owner}}, Options{})
		checkInvariants(t, &cfg)
		r := route.New(cfg).Match("shop.example.com", "/"+guest)
		served := r != nil && r.Ingress == guest+"/b"
		if want := slices.Contains(got, guest); served != want {
			t.Errorf("share %q: rules of %s served = %v, want %v", v, guest, served, want)
		}
	})
}
