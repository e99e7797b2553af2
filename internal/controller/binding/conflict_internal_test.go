package binding

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	provider "sluice.dev/sluice/internal/controller/lbcache"
)

func TestGroupOwner(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bind := func(ns, name string, age int, p v1alpha1.ProviderSpec) v1alpha1.LoadBalancerBinding {
		return v1alpha1.LoadBalancerBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(-age) * time.Hour))},
			Spec:       v1alpha1.LoadBalancerBindingSpec{Provider: p},
		}
	}
	hap := func(api, backend string) v1alpha1.ProviderSpec {
		return v1alpha1.ProviderSpec{HAProxy: &v1alpha1.HAProxyProvider{RuntimeAPI: api, Backend: backend}}
	}
	aws := func(arns ...string) v1alpha1.ProviderSpec {
		return v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{TargetGroupARNs: arns}}
	}
	sock := "unix:///run/haproxy.sock"
	// keys stands in for the discovery: a binding named web that lists
	// no ARN finds arn:web, other names find nothing.
	keys := func(b *v1alpha1.LoadBalancerBinding) []string {
		k := provider.GroupKeys(b.Spec.Provider)
		if a := b.Spec.Provider.AWS; a != nil && len(a.TargetGroupARNs) == 0 && b.Name == "web" {
			k = append(k, provider.AWSGroupKeys([]string{"arn:web"})...)
		}
		return k
	}
	cases := []struct {
		name  string
		self  v1alpha1.LoadBalancerBinding
		other []v1alpha1.LoadBalancerBinding
		want  string // owner "ns/name", "" for none
	}{
		{"alone", bind("a", "x", 1, hap(sock, "be")), nil, ""},
		{"older on the same backend", bind("a", "x", 1, hap(sock, "be")), []v1alpha1.LoadBalancerBinding{bind("b", "y", 2, hap(sock, "be"))}, "b/y"},
		{"newer on the same backend", bind("a", "x", 2, hap(sock, "be")), []v1alpha1.LoadBalancerBinding{bind("b", "y", 1, hap(sock, "be"))}, ""},
		{"same age: namespace/name decides", bind("a", "y", 1, hap(sock, "be")), []v1alpha1.LoadBalancerBinding{bind("a", "x", 1, hap(sock, "be"))}, "a/x"},
		{"other backend", bind("a", "x", 1, hap(sock, "be")), []v1alpha1.LoadBalancerBinding{bind("b", "y", 2, hap(sock, "be2"))}, ""},
		{"other HAProxy", bind("a", "x", 1, hap(sock, "be")), []v1alpha1.LoadBalancerBinding{bind("b", "y", 2, hap("tcp://10.0.0.1:9999", "be"))}, ""},
		{"one shared ARN", bind("a", "x", 1, aws("arn:1", "arn:2")), []v1alpha1.LoadBalancerBinding{bind("b", "y", 2, aws("arn:2"))}, "b/y"},
		{"oldest of several", bind("a", "x", 1, aws("arn:1", "arn:2")),
			[]v1alpha1.LoadBalancerBinding{bind("b", "y", 2, aws("arn:2")), bind("c", "z", 3, aws("arn:1"))}, "c/z"},
		{"undiscovered groups are not compared", bind("a", "x", 1, aws()), []v1alpha1.LoadBalancerBinding{bind("b", "y", 2, aws())}, ""},
		// The same name in another namespace discovers the same groups.
		{"discovered group shared", bind("tenant", "web", 1, aws()), []v1alpha1.LoadBalancerBinding{bind("ingress", "web", 2, aws())}, "ingress/web"},
		{"discovered group of the newer", bind("ingress", "web", 2, aws()), []v1alpha1.LoadBalancerBinding{bind("tenant", "web", 1, aws())}, ""},
		{"discovered against listed", bind("tenant", "web", 1, aws()), []v1alpha1.LoadBalancerBinding{bind("ingress", "edge", 2, aws("arn:web"))}, "ingress/edge"},
		{"listed against discovered", bind("a", "x", 1, aws("arn:web")), []v1alpha1.LoadBalancerBinding{bind("ingress", "web", 2, aws())}, "ingress/web"},
		{"other frontend discovered", bind("tenant", "shop", 1, aws()), []v1alpha1.LoadBalancerBinding{bind("ingress", "web", 2, aws())}, ""},
		{"itself in the list", bind("a", "x", 1, hap(sock, "be")), []v1alpha1.LoadBalancerBinding{bind("a", "x", 1, hap(sock, "be"))}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if o := groupOwner(&tc.self, tc.other, keys); o != nil {
				got = o.Namespace + "/" + o.Name
			}
			if got != tc.want {
				t.Errorf("groupOwner = %q, want %q", got, tc.want)
			}
		})
	}
}
