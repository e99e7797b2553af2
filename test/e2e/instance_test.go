//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
)

// Instance mode on the host network: names and ports of the proxies (a
// DaemonSet, one per node, at the node's address) and of sluice
// node-health, which HAProxy health-checks instead of the proxies.
const (
	nodeProxyName   = "sluice-proxy-node"
	nodeHealthName  = "sluice-node-health"
	nodeTrafficPort = 30080
	nodeAdminPort   = 30090
	nodeHealthPort  = 10254
)

// TestInstanceDaemonSet: proxies in a hostNetwork DaemonSet behind an
// Instance binding (HAProxy targets node:30080, health-checked on
// node-health's port) become Ready through the readiness gate, and a
// rollout of the DaemonSet (one node at a time, each node's only proxy
// replaced) loses no request: the node leaves HAProxy, drains, then its
// new proxy is registered.
func TestInstanceDaemonSet(t *testing.T) {
	e := newEnv(t)
	e.create(echoObjects()...)
	e.create(nodeHealthObjects()...)
	e.instanceBinding()
	e.create(nodeProxyDaemonSet())
	e.settled(appNS, appName, 2*time.Minute)
	e.daemonSetSettled(proxyNS, nodeProxyName, 3*time.Minute)
	e.daemonSetSettled(proxyNS, nodeHealthName, 2*time.Minute)
	e.eventually(30*time.Second, "a request through HAProxy to a node", func(context.Context) (bool, error) {
		code, body, err := e.get()
		return err == nil && code == 200 && strings.Contains(body, "echo"), err
	})

	cs := newCases(e)
	cs.run("instance-daemonset-roll", func() {
		e.restartDaemonSet(proxyNS, nodeProxyName)
		e.daemonSetSettled(proxyNS, nodeProxyName, 4*time.Minute)
	})
}

// instanceBinding creates the Instance binding of the node proxies.
func (e *env) instanceBinding() {
	e.t.Helper()
	gate, port := true, int32(nodeHealthPort)
	e.create(&v1alpha1.LoadBalancerBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "haproxy-nodes"},
		Spec: v1alpha1.LoadBalancerBindingSpec{
			Selector:        metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": nodeProxyName}},
			TargetType:      v1alpha1.TargetInstance,
			Port:            intstr.FromInt32(nodeTrafficPort),
			HealthCheckPort: &port,
			Provider:        v1alpha1.ProviderSpec{HAProxy: &v1alpha1.HAProxyProvider{RuntimeAPI: "unix://" + e.lbSock, Backend: backend}},
			ReadinessGate:   &gate,
			Drain:           v1alpha1.DrainSpec{Handshake: &gate},
			Publish:         []v1alpha1.PublishAddress{{IP: "127.0.0.1"}},
		},
	})
}

func podEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// nodeProxyDaemonSet runs sluice proxy on every node's host network with
// --reuse-port and no declared ports (they would become host ports).
func nodeProxyDaemonSet() *appsv1.DaemonSet {
	labels := map[string]string{"app.kubernetes.io/name": nodeProxyName}
	grace := int64(60)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: nodeProxyName},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName:            proxyName,
					HostNetwork:                   true,
					TerminationGracePeriodSeconds: &grace,
					ReadinessGates:                []corev1.PodReadinessGate{{ConditionType: v1alpha1.ReadinessGateHealthy}},
					Containers: []corev1.Container{{
						Name: "proxy", Image: "ghcr.io/sluice-dev/sluice:0.1.0",
						Args: []string{"proxy", fmt.Sprintf("--http-address=$(POD_IP):%d", nodeTrafficPort), "--https-address=",
							fmt.Sprintf("--admin-address=$(POD_IP):%d", nodeAdminPort), "--reuse-port",
							"--drain-max-wait=30s", "--shutdown-timeout=10s", "--log-format=text"},
						Env: []corev1.EnvVar{podEnv("POD_NAME", "metadata.name"), podEnv("POD_NAMESPACE", "metadata.namespace"), podEnv("POD_IP", "status.podIP")},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(nodeAdminPort)}},
							PeriodSeconds: 1, FailureThreshold: 1,
						},
					}},
				},
			},
		},
	}
}

// nodeHealthObjects is sluice node-health as a hostNetwork DaemonSet with
// its service account and RBAC.
func nodeHealthObjects() []client.Object {
	labels := map[string]string{"app.kubernetes.io/name": nodeHealthName}
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: nodeHealthName}},
		// Own names: deploy/rbac.yaml (applied by newEnv) has the chart's
		// sluice-node-health ClusterRole already.
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: nodeHealthName + "-e2e"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list", "watch"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: nodeHealthName + "-e2e"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: nodeHealthName + "-e2e"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: proxyNS, Name: nodeHealthName}},
		},
		&appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: nodeHealthName},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: nodeHealthName,
						HostNetwork:        true,
						Containers: []corev1.Container{{
							Name: "node-health", Image: "ghcr.io/sluice-dev/sluice:0.1.0",
							Args: []string{"node-health", fmt.Sprintf("--health-address=$(POD_IP):%d", nodeHealthPort),
								"--selector=app.kubernetes.io/name=" + nodeProxyName},
							Env: []corev1.EnvVar{podEnv("NODE_NAME", "spec.nodeName"), podEnv("POD_NAMESPACE", "metadata.namespace"), podEnv("POD_IP", "status.podIP")},
						}},
					},
				},
			},
		},
	}
}

// restartDaemonSet changes the pod template, as `kubectl rollout restart`.
func (e *env) restartDaemonSet(ns, name string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"e2e.sluice.dev/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := e.kube.AppsV1().DaemonSets(ns).Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("patching %s/%s: %v", ns, name, err)
	}
}

// daemonSetSettled waits until the DaemonSet runs one updated, Ready pod
// on every node and no terminating one.
func (e *env) daemonSetSettled(ns, name string, timeout time.Duration) {
	e.t.Helper()
	e.eventually(timeout, ns+"/"+name+" settled", func(ctx context.Context) (bool, error) {
		var d appsv1.DaemonSet
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return false, err
		}
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.DesiredNumberScheduled == 0 || s.UpdatedNumberScheduled != s.DesiredNumberScheduled ||
			s.NumberReady != s.DesiredNumberScheduled || s.NumberAvailable != s.DesiredNumberScheduled {
			return false, nil
		}
		live, terminating, err := e.pods(ctx, ns, name)
		if err != nil || len(terminating) > 0 || int32(len(live)) != s.DesiredNumberScheduled {
			return false, err
		}
		for i := range live {
			if !ready(&live[i]) {
				return false, nil
			}
		}
		return true, nil
	})
}
