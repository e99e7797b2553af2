//go:build e2e

package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"sluice.dev/sluice/internal/translate"
	"sluice.dev/sluice/test/cluster"
)

// realClient connects to the cluster named by SLUICE_KUBECONFIG, or starts
// the local cluster of test/cluster, and makes a namespace the test
// deletes at the end.
func realClient(t *testing.T) (kubernetes.Interface, string) {
	return cluster.NamespaceForTest(t, "slsrc", "sluice-source")
}

func suffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// startReal runs a Source for one namespace of a real cluster.
func startReal(t *testing.T, client kubernetes.Interface, ns string) *harness {
	t.Helper()
	src, err := New(Options{Client: client, Namespaces: []string{ns}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, src: src, notes: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, h.notify) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	h.wait("first load")
	return h
}

func TestE2EChanges(t *testing.T) {
	client, ns := realClient(t)
	ctx := context.Background()
	className := "sluice-e2e-" + suffix()
	t.Cleanup(func() {
		_ = client.NetworkingV1().IngressClasses().Delete(context.Background(), className, metav1.DeleteOptions{})
	})
	// Objects in another namespace must stay out of the snapshot.
	other, otherNS := client, ns+"-other"
	if _, err := other.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.CoreV1().Namespaces().Delete(context.Background(), otherNS, metav1.DeleteOptions{}) })
	if _, err := other.CoreV1().Services(otherNS).Create(ctx, service(otherNS, "web", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	h := startReal(t, client, ns)
	ing := ingress(ns, "web", "a.example")

	steps := []struct {
		name string
		do   func() error
		ok   func(translate.Input) bool
	}{
		{"create ingress", func() error {
			_, err := client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{})
			return err
		}, func(in translate.Input) bool { return hosts(in)[ns+"/web"] == "a.example" }},
		{"update ingress", func() error {
			cur, err := client.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Rules[0].Host = "b.example"
			_, err = client.NetworkingV1().Ingresses(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}, func(in translate.Input) bool { return hosts(in)[ns+"/web"] == "b.example" }},
		{"delete ingress", func() error {
			return client.NetworkingV1().Ingresses(ns).Delete(ctx, "web", metav1.DeleteOptions{})
		}, func(in translate.Input) bool { return len(in.Ingresses) == 0 }},

		{"create class", func() error {
			_, err := client.NetworkingV1().IngressClasses().Create(ctx, class(className), metav1.CreateOptions{})
			return err
		}, func(in translate.Input) bool { return hasClass(in, className) }},
		{"delete class", func() error {
			return client.NetworkingV1().IngressClasses().Delete(ctx, className, metav1.DeleteOptions{})
		}, func(in translate.Input) bool { return !hasClass(in, className) }},

		{"create service", func() error {
			_, err := client.CoreV1().Services(ns).Create(ctx, service(ns, "web", 80), metav1.CreateOptions{})
			return err
		}, func(in translate.Input) bool { return len(in.Services) == 1 && in.Services[0].Spec.Ports[0].Port == 80 }},
		{"update service", func() error {
			cur, err := client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Ports[0].Port = 81
			_, err = client.CoreV1().Services(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}, func(in translate.Input) bool { return len(in.Services) == 1 && in.Services[0].Spec.Ports[0].Port == 81 }},
		{"delete service", func() error {
			return client.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{})
		}, func(in translate.Input) bool { return len(in.Services) == 0 }},

		{"create slice", func() error {
			_, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice(ns, "web-1", "10.244.1.10"), metav1.CreateOptions{})
			return err
		}, func(in translate.Input) bool { return sliceAddr(in) == "10.244.1.10" }},
		{"update slice", func() error {
			cur, err := client.DiscoveryV1().EndpointSlices(ns).Get(ctx, "web-1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.11"}}}
			_, err = client.DiscoveryV1().EndpointSlices(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}, func(in translate.Input) bool { return sliceAddr(in) == "10.244.1.11" }},
		{"delete slice", func() error {
			return client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, "web-1", metav1.DeleteOptions{})
		}, func(in translate.Input) bool { return len(in.EndpointSlices) == 0 }},

		{"create secrets", func() error {
			if _, err := client.CoreV1().Secrets(ns).Create(ctx, secret(ns, "plain", corev1.SecretTypeOpaque, "x"), metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := client.CoreV1().Secrets(ns).Create(ctx, secret(ns, "cert", corev1.SecretTypeTLS, "one"), metav1.CreateOptions{})
			return err
		}, func(in translate.Input) bool { return secretCrt(in) == "one" }},
		{"update secret", func() error {
			cur, err := client.CoreV1().Secrets(ns).Get(ctx, "cert", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Data["tls.crt"] = []byte("two")
			_, err = client.CoreV1().Secrets(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}, func(in translate.Input) bool { return secretCrt(in) == "two" }},
		{"delete secret", func() error {
			return client.CoreV1().Secrets(ns).Delete(ctx, "cert", metav1.DeleteOptions{})
		}, func(in translate.Input) bool { return len(in.Secrets) == 0 }},
	}
	for _, s := range steps {
		select {
		case <-h.notes:
		default:
		}
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		h.wait(s.name)
		h.eventually(s.name, s.ok)
		in := h.src.Snapshot()
		for _, sec := range in.Secrets {
			if sec.Type != corev1.SecretTypeTLS {
				t.Errorf("%s: non-TLS secret %s in snapshot", s.name, sec.Name)
			}
		}
		for _, svc := range in.Services {
			if svc.Namespace != ns {
				t.Errorf("%s: service of namespace %s in snapshot", s.name, svc.Namespace)
			}
			if svc.ManagedFields != nil {
				t.Errorf("%s: managedFields not stripped", s.name)
			}
		}
	}
}

func hasClass(in translate.Input, name string) bool {
	for _, c := range in.IngressClasses {
		if c.Name == name {
			return true
		}
	}
	return false
}

func sliceAddr(in translate.Input) string {
	if len(in.EndpointSlices) != 1 || len(in.EndpointSlices[0].Endpoints) != 1 {
		return ""
	}
	return in.EndpointSlices[0].Endpoints[0].Addresses[0]
}

func secretCrt(in translate.Input) string {
	if len(in.Secrets) != 1 {
		return ""
	}
	return string(in.Secrets[0].Data["tls.crt"])
}
