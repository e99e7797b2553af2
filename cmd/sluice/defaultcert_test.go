package main

import (
	"crypto/tls"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/internal/proxy"
	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/server"
	"sluice.dev/sluice/internal/translate"
)

// TestHandshakeWithMissingSecret: a host listed in spec.tls whose Secret
// does not exist (cert-manager has not issued it yet) completes a TLS
// handshake with the generated default certificate, as does a name no
// Ingress mentions and a handshake before the first table; the Ingress
// gets a SecretNotFound problem (an Event).
func TestHandshakeWithMissingSecret(t *testing.T) {
	fallback, err := server.SelfSigned(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	px := proxy.New(proxy.Options{})
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: certificateFrom(px, fallback)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	handshake := func(name string) {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: name, InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("handshake for %s: %v", name, err)
		}
		defer c.Close()
		if got := c.ConnectionState().PeerCertificates[0]; !got.Equal(fallback.Leaf) {
			t.Errorf("handshake for %s served %s, want the generated default", name, got.Subject)
		}
	}
	handshake("app.example.com") // no table yet

	class := "sluice"
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "app"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{"app.example.com"}, SecretName: "app-tls"}},
			Rules:            []networkingv1.IngressRule{{Host: "app.example.com"}},
		},
	}
	cfg, problems := translate.Build(translate.Input{Ingresses: []*networkingv1.Ingress{ing}},
		translate.Options{DefaultCertificate: "sluice-system/absent"})
	reasons := map[string]bool{}
	for _, p := range problems {
		reasons[p.Kind+" "+p.Reason] = true
	}
	if !reasons["Ingress SecretNotFound"] || !reasons["Secret SecretNotFound"] {
		t.Errorf("problems %v, want SecretNotFound for the Ingress and the default certificate", problems)
	}
	px.Update(route.New(cfg))
	handshake("app.example.com")
	handshake("elsewhere.example.org")
	handshake("")
}
