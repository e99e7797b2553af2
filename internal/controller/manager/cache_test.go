package manager

import (
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// Pods and the objects of IngressDaemonSets are cached only in the
// binding namespaces (the chart grants them there only); with every
// namespace allowed, cluster-wide. Secrets are always only TLS ones.
func TestCacheByObject(t *testing.T) {
	for _, all := range [][]string{nil, {"*"}, {"a", "*"}} {
		by := cacheByObject(all, all)
		if len(by) != 1 {
			t.Errorf("%q: %d objects limited, want only Secrets", all, len(by))
		}
		for o, b := range by {
			if _, ok := o.(*corev1.Secret); !ok || b.Field == nil || b.Field.String() != "type=kubernetes.io/tls" {
				t.Errorf("%q: %T limited by %+v", all, o, b)
			}
		}
	}
	by := cacheByObject([]string{"a", "b"}, []string{"a", "b"})
	kinds := map[string]bool{}
	for o, b := range by {
		switch o.(type) {
		case *corev1.Secret:
			continue
		case *corev1.Pod:
			kinds["Pod"] = true
		case *appsv1.Deployment:
			kinds["Deployment"] = true
		case *appsv1.DaemonSet:
			kinds["DaemonSet"] = true
		case *policyv1.PodDisruptionBudget:
			kinds["PodDisruptionBudget"] = true
		default:
			kinds["other"] = true
		}
		if ns := slices.Sorted(maps.Keys(b.Namespaces)); !slices.Equal(ns, []string{"a", "b"}) {
			t.Errorf("%T cached in %v", o, ns)
		}
	}
	if !kinds["Pod"] || !kinds["Deployment"] || !kinds["DaemonSet"] || !kinds["PodDisruptionBudget"] || kinds["other"] || len(by) != 5 {
		t.Errorf("limited %v (%d objects)", kinds, len(by))
	}
	// Pods follow the binding namespaces, the IngressDaemonSets' objects
	// their own list.
	by = cacheByObject([]string{"a", "b"}, []string{"edge"})
	for o, b := range by {
		want := []string{"edge"}
		switch o.(type) {
		case *corev1.Secret:
			continue
		case *corev1.Pod:
			want = []string{"a", "b"}
		}
		if ns := slices.Sorted(maps.Keys(b.Namespaces)); !slices.Equal(ns, want) {
			t.Errorf("%T cached in %v, want %v", o, ns, want)
		}
	}
	if by = cacheByObject([]string{"a"}, []string{"*"}); len(by) != 2 {
		t.Errorf("IngressDaemonSets everywhere: %d objects limited, want Secrets and Pods", len(by))
	}
}
