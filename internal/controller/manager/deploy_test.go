package manager

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
)

// TestDeployManifests decodes every object in deploy/ strictly and checks
// the settings zero-downtime depends on.
func TestDeployManifests(t *testing.T) {
	files, err := filepath.Glob("../../../deploy/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	examples, _ := filepath.Glob("../../../deploy/examples/*.yaml")
	files = append(files, examples...)
	decoder := serializer.NewCodecFactory(ct.Scheme(), serializer.EnableStrict).UniversalDeserializer()
	objs := map[string]runtime.Object{}
	for _, f := range files {
		if strings.HasSuffix(f, "kustomization.yaml") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufioReader(data))
		for {
			doc, err := r.Read()
			if err != nil {
				break
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, gvk, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			name := obj.(interface{ GetName() string }).GetName()
			objs[gvk.Kind+"/"+name] = obj
		}
	}
	proxy, ok := objs["Deployment/sluice-proxy"].(*appsv1.Deployment)
	if !ok {
		t.Fatal("no sluice-proxy Deployment")
	}
	pod := proxy.Spec.Template.Spec
	if !slices.ContainsFunc(pod.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == v1alpha1.ReadinessGateHealthy }) {
		t.Error("proxy lacks the readiness gate")
	}
	c := pod.Containers[0]
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		t.Error("proxy has a preStop hook")
	}
	if lp := c.LivenessProbe; lp != nil && lp.HTTPGet != nil && lp.HTTPGet.Path == "/healthz" {
		t.Error("proxy liveness probe on /healthz, which fails while draining: the kubelet would kill it mid-drain")
	}
	var drain, shutdown time.Duration
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--drain-max-wait="); ok {
			drain, _ = time.ParseDuration(v)
		}
		if v, ok := strings.CutPrefix(a, "--shutdown-timeout="); ok {
			shutdown, _ = time.ParseDuration(v)
		}
	}
	if grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; drain == 0 || shutdown == 0 || grace < drain+shutdown {
		t.Errorf("terminationGracePeriodSeconds %v < drain-max-wait %v + shutdown-timeout %v", grace, drain, shutdown)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("downward API env = %v", env)
	}
	if ru := proxy.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Error("proxy rollout may take pods away before new ones are healthy")
	}
	role, ok := objs["ClusterRole/sluice-controller"].(*rbacv1.ClusterRole)
	if !ok {
		t.Fatal("no sluice-controller ClusterRole")
	}
	// Pods written only in the binding namespaces: the ClusterRole
	// sluice-controller-pods, bound there by RoleBindings. Cluster-wide
	// only list and watch (the endpoint checks compare endpoints with
	// Pods' addresses).
	pods, ok := objs["ClusterRole/sluice-controller-pods"].(*rbacv1.ClusterRole)
	if _, bound := objs["RoleBinding/sluice-controller-pods"].(*rbacv1.RoleBinding); !ok || !bound {
		t.Fatal("no sluice-controller-pods ClusterRole bound by a RoleBinding")
	}
	if !allows(pods.Rules, "", "pods", "watch") || !allows(pods.Rules, "", "pods/status", "patch") ||
		allows(role.Rules, "", "pods", "patch") || allows(role.Rules, "", "pods", "get") || allows(role.Rules, "", "pods/status", "patch") {
		t.Error("pods not granted in the binding namespace, or more than list/watch cluster-wide")
	}
	if !allows(role.Rules, "", "pods", "list") || !allows(role.Rules, "", "pods", "watch") {
		t.Error("controller may not list and watch Pods cluster-wide (the endpoint checks' Pod addresses)")
	}
	// Bindings are read everywhere, written only in the binding namespaces.
	if !allows(pods.Rules, "sluice.dev", "loadbalancerbindings", "patch") || !allows(pods.Rules, "sluice.dev", "loadbalancerbindings/status", "patch") ||
		allows(role.Rules, "sluice.dev", "loadbalancerbindings", "patch") || allows(role.Rules, "sluice.dev", "loadbalancerbindings/status", "patch") {
		t.Error("bindings not writable in the binding namespace, or writable cluster-wide")
	}
	for _, need := range []struct{ group, resource, verb string }{
		{"", "nodes", "list"},
		{"networking.k8s.io", "ingresses/status", "patch"}, {"networking.k8s.io", "ingressclasses", "watch"},
		{"sluice.dev", "loadbalancerbindings", "watch"},
		{"events.k8s.io", "events", "create"},
	} {
		if !allows(role.Rules, need.group, need.resource, need.verb) {
			t.Errorf("controller may not %s %s/%s", need.verb, need.group, need.resource)
		}
	}
	if _, ok := objs["LoadBalancerBinding/haproxy"].(*v1alpha1.LoadBalancerBinding); !ok {
		t.Error("no example binding")
	}
}

func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
