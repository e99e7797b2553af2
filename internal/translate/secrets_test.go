package translate

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestSecretsUnread: a caller that reads no Secrets (the controller by
// default) gets no Secret problems and counts an Ingress serving only a
// certificate as served; a caller that reads them (the proxy) gets both.
func TestSecretsUnread(t *testing.T) {
	tlsOnly := fuzzIngress("tls-only", "a.example.com", "/", networkingv1.PathTypePrefix, "http", 0)
	tlsOnly.Spec.Rules = nil
	tlsOnly.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"a.example.com"}, SecretName: "missing"}}
	ca := fuzzIngress("ca", "b.example.com", "/", networkingv1.PathTypePrefix, "http", 0)
	ca.Annotations = map[string]string{AnnotationBackendProtocol: "https", AnnotationBackendCASecret: "pod-ca"}
	in := Input{Ingresses: []*networkingv1.Ingress{tlsOnly, ca}}
	count := func(ps []Problem, name, reason string) int {
		n := 0
		for _, p := range ps {
			if p.Name == name && p.Reason == reason {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		unread                 bool
		secretProblems, fatals int
	}{
		{unread: false, secretProblems: 2, fatals: 1},
		{unread: true, secretProblems: 0, fatals: 0},
	} {
		_, ps := Build(in, Options{SecretsUnread: tc.unread})
		got := count(ps, "tls-only", "SecretNotFound") + count(ps, "ca", "SecretNotFound")
		fatals := 0
		for _, name := range []string{"tls-only", "ca"} {
			if Fatal(ps, "default", name) {
				fatals++
			}
		}
		if got != tc.secretProblems || fatals != tc.fatals {
			t.Errorf("SecretsUnread=%v: %d SecretNotFound, %d not served, want %d and %d; problems %v", tc.unread, got, fatals, tc.secretProblems, tc.fatals, ps)
		}
	}
}
