package translate

import (
	"crypto/tls"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/testcert"
)

// TestBuildCachedSameAsBuild: a cache, cold or warm, never changes the
// result of any golden case.
func TestBuildCachedSameAsBuild(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/*/input.yaml")
	for _, in := range dirs {
		dir := filepath.Dir(in)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			input, opts := loadCase(t, dir)
			want := dumpAll(Build(input, opts))
			cache := NewKeyPairCache()
			for i := range 2 {
				if got := dumpAll(BuildCached(input, opts, cache)); got != want {
					t.Fatalf("build %d with the cache:\n--- got\n%s\n--- want\n%s", i, got, want)
				}
			}
		})
	}
}

func tlsSecret(name, uid, rv string, crt, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
}

func tlsIngress(name, host, secret string) *networkingv1.Ingress {
	class := DefaultIngressClass
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: secret}},
		},
	}
}

// TestKeyPairCache: a Secret is parsed again only when its resourceVersion
// (or, without one, its content) changes; entries of Secrets that are gone
// are evicted; a broken Secret reports the same problem from the cache.
func TestKeyPairCache(t *testing.T) {
	crtA, keyA := testcert.SelfSigned(t, "a.example.com")
	crtA2, keyA2 := testcert.SelfSigned(t, "a.example.com")
	crtB, keyB := testcert.SelfSigned(t, "b.example.com")
	crtC, keyC := testcert.SelfSigned(t, "c.example.com")
	ings := []*networkingv1.Ingress{
		tlsIngress("a", "a.example.com", "a"),
		tlsIngress("b", "b.example.com", "b"),
		tlsIngress("c", "c.example.com", "c"),
		tlsIngress("d", "d.example.com", "d"),
	}
	broken := tlsSecret("d", "uid-d", "1", crtC, keyA) // key does not match
	cache := NewKeyPairCache()
	build := func(secrets ...*corev1.Secret) (*route.Table, []Problem) {
		t.Helper()
		in := Input{Ingresses: ings, Secrets: secrets}
		cfg, problems := BuildCached(in, Options{}, cache)
		want := dumpAll(Build(in, Options{}))
		if got := dumpAll(cfg, problems); got != want {
			t.Fatalf("cached build differs from Build:\n--- got\n%s\n--- want\n%s", got, want)
		}
		return route.New(cfg), problems
	}
	certOf := func(tb *route.Table, host string) *tls.Certificate {
		t.Helper()
		c := tb.Certificate(host)
		if c == nil {
			t.Fatalf("no certificate for %s", host)
		}
		return c
	}

	// C has no resourceVersion, as objects read from manifest files.
	tb1, p1 := build(tlsSecret("a", "uid-a", "1", crtA, keyA), tlsSecret("b", "uid-b", "1", crtB, keyB),
		tlsSecret("c", "", "", crtC, keyC), broken)
	if cache.Len() != 4 || reasons(p1, "InvalidSecret") != 1 {
		t.Fatalf("first build: %d cached, problems %+v", cache.Len(), p1)
	}
	a1, b1, c1 := certOf(tb1, "a.example.com"), certOf(tb1, "b.example.com"), certOf(tb1, "c.example.com")

	// Same versions, new objects: nothing parsed again.
	tb2, p2 := build(tlsSecret("a", "uid-a", "1", crtA, keyA), tlsSecret("b", "uid-b", "1", crtB, keyB),
		tlsSecret("c", "", "", append([]byte(nil), crtC...), keyC), broken)
	if certOf(tb2, "a.example.com") != a1 || certOf(tb2, "b.example.com") != b1 || certOf(tb2, "c.example.com") != c1 {
		t.Error("unchanged Secrets were parsed again")
	}
	if !slices.Equal(p1, p2) {
		t.Errorf("broken Secret from the cache: problems %+v, want %+v", p2, p1)
	}

	// A new resourceVersion of A with a new certificate, C's content
	// changed: both parsed again, B not.
	tb3, _ := build(tlsSecret("a", "uid-a", "2", crtA2, keyA2), tlsSecret("b", "uid-b", "1", crtB, keyB),
		tlsSecret("c", "", "", crtA2, keyA2), broken)
	a3, c3 := certOf(tb3, "a.example.com"), certOf(tb3, "c.example.com")
	if a3 == a1 || c3 == c1 || certOf(tb3, "b.example.com") != b1 {
		t.Error("changed Secrets not parsed again, or unchanged one parsed")
	}
	if string(a3.Leaf.Raw) == string(a1.Leaf.Raw) {
		t.Error("A still serves its old certificate")
	}

	// A deleted and created again with the same resourceVersion string but
	// a new UID is a new object.
	tb4, _ := build(tlsSecret("a", "uid-a-new", "2", crtA, keyA), tlsSecret("b", "uid-b", "1", crtB, keyB),
		tlsSecret("c", "", "", crtA2, keyA2), broken)
	if string(certOf(tb4, "a.example.com").Leaf.Raw) != string(a1.Leaf.Raw) {
		t.Error("recreated Secret A not parsed again")
	}

	// B and the broken D gone: evicted, B's host reported.
	_, p5 := build(tlsSecret("a", "uid-a-new", "2", crtA, keyA), tlsSecret("c", "", "", crtA2, keyA2))
	if cache.Len() != 2 {
		t.Errorf("%d entries cached after two Secrets went, want 2", cache.Len())
	}
	if reasons(p5, "SecretNotFound") != 2 || reasons(p5, "InvalidSecret") != 0 {
		t.Errorf("problems %+v, want SecretNotFound for b and d", p5)
	}
}

func reasons(ps []Problem, reason string) int {
	n := 0
	for _, p := range ps {
		if p.Reason == reason {
			n++
		}
	}
	return n
}
