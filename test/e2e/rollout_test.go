//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestZeroDowntime is the end-to-end proof: fixed-rate load through
// HAProxy while the ingress tier and the app change underneath. Every case
// prints one summary line; every case but the last must lose no request.
// The last, a twin, repeats the proxy rollout with the readiness gate and
// the drain handshake off and proxies that exit at once: it must lose
// requests.
func TestZeroDowntime(t *testing.T) {
	// Beside TestDNS (no load, mostly waiting) on another cluster.
	t.Parallel()
	e := newEnv(t)
	e.create(echoObjects()...)
	e.binding(true)
	e.create(e.proxyDeployment())
	e.settled(appNS, appName, 2*time.Minute)
	e.settled(proxyNS, proxyName, 2*time.Minute)
	e.eventually(30*time.Second, "a request through HAProxy", func(context.Context) (bool, error) {
		code, body, err := e.get()
		return err == nil && code == 200 && strings.Contains(body, "echo"), err
	})
	e.eventually(30*time.Second, "ingress status published", func(ctx context.Context) (bool, error) {
		var ing networkingv1.Ingress
		err := e.cl.Get(ctx, client.ObjectKey{Namespace: appNS, Name: appName}, &ing)
		lbs := ing.Status.LoadBalancer.Ingress
		return err == nil && len(lbs) == 1 && lbs[0].IP == "127.0.0.1", err
	})

	cs := newCases(e)
	run := cs.run

	run("proxy-roll", func() {
		e.restartDeployment(proxyNS, proxyName)
		e.settled(proxyNS, proxyName, 3*time.Minute)
	})
	run("app-roll", func() {
		e.restartDeployment(appNS, appName)
		e.settled(appNS, appName, 3*time.Minute)
	})
	run("node-drain", func() {
		node := e.busiestNode()
		e.drainNode(node)
		e.settled(proxyNS, proxyName, 3*time.Minute)
		e.settled(appNS, appName, 3*time.Minute)
		e.cordon(node, false)
	})
	run("controller-restart", func() {
		e.restartDeployment(proxyNS, proxyName)
		e.eventually(time.Minute, "the rollout to start", func(ctx context.Context) (bool, error) {
			_, terminating, err := e.pods(ctx, proxyNS, proxyName)
			return len(terminating) > 0, err
		})
		e.killController()
		time.Sleep(3 * time.Second)
		e.startController()
		e.settled(proxyNS, proxyName, 4*time.Minute)
	})
	run("scale-3-6-2", func() {
		e.scale(proxyNS, proxyName, 6)
		e.settled(proxyNS, proxyName, 3*time.Minute)
		e.scale(proxyNS, proxyName, 2)
		e.settled(proxyNS, proxyName, 3*time.Minute)
	})

	// The twin (it must lose requests): the same rollout as the first case
	// with the readiness gate and drain handshake off and proxies that stop
	// at SIGKILL speed on SIGTERM (no drain wait, no time for in-flight
	// requests). First roll, unmeasured, to such proxies (the pods being
	// replaced still wait 30s), then measure the next roll, which replaces
	// exactly those pods.
	if cs.wants("proxy-roll-no-wait-off") {
		e.scale(proxyNS, proxyName, 3)
		e.settled(proxyNS, proxyName, 3*time.Minute)
		e.binding(false)
		e.proxyWithoutGate()
		e.settled(proxyNS, proxyName, 3*time.Minute)
		e.holdInFlight()
	}
	run("proxy-roll-no-wait-off", func() {
		e.restartDeployment(proxyNS, proxyName)
		e.settled(proxyNS, proxyName, 3*time.Minute)
	})
	if os.Getenv("SLUICE_E2E_KEEP") != "" {
		t.Error("SLUICE_E2E_KEEP set: failing so that the cluster state is kept")
	}

}

// restartDeployment changes the pod template, as `kubectl rollout restart`.
func (e *env) restartDeployment(ns, name string) {
	e.t.Helper()
	e.patchDeployment(ns, name, fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"e2e.sluice.dev/restartedAt":%q}}}}}`,
		time.Now().Format(time.RFC3339Nano)))
}

func (e *env) patchDeployment(ns, name, patch string) {
	e.t.Helper()
	if _, err := e.kube.AppsV1().Deployments(ns).Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("patching %s/%s: %v", ns, name, err)
	}
}

func (e *env) scale(ns, name string, n int32) {
	e.t.Helper()
	e.patchDeployment(ns, name, fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
}

// busiestNode is the node running the most proxy pods.
func (e *env) busiestNode() string {
	e.t.Helper()
	live, _, err := e.pods(context.Background(), proxyNS, proxyName)
	if err != nil || len(live) == 0 {
		e.t.Fatalf("listing proxy pods: %v", err)
	}
	count := map[string]int{}
	best := live[0].Spec.NodeName
	for _, p := range live {
		count[p.Spec.NodeName]++
		if count[p.Spec.NodeName] > count[best] {
			best = p.Spec.NodeName
		}
	}
	return best
}

func (e *env) cordon(node string, on bool) {
	e.t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": on}})
	if _, err := e.kube.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("cordoning %s: %v", node, err)
	}
}

// drainNode cordons node and evicts its pods, as `kubectl drain`.
func (e *env) drainNode(node string) {
	e.t.Helper()
	e.cordon(node, true)
	ctx := context.Background()
	for _, ns := range []string{proxyNS, appNS} {
		pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, p := range pods.Items {
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
			if err := e.kube.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev); err != nil {
				e.t.Fatalf("evicting %s/%s: %v", p.Namespace, p.Name, err)
			}
		}
	}
	e.eventually(3*time.Minute, "node "+node+" empty", func(ctx context.Context) (bool, error) {
		for _, ns := range []string{proxyNS, appNS} {
			pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			if err != nil || len(pods.Items) > 0 {
				return false, err
			}
		}
		return true, nil
	})
}
