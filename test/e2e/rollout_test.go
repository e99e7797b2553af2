//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestZeroDowntime is the end-to-end proof: fixed-rate load through
// HAProxy while the ingress tier and the app change underneath. sluice is
// installed with `helm install` of its chart: the controller runs in the
// cluster under the chart's RBAC, so a missing permission fails a case.
// Every case prints one summary line; every case but the last must lose
// no request. The last, a twin, repeats the proxy rollout with the
// readiness gate and the drain handshake off and proxies that exit at
// once: it must lose requests.
func TestZeroDowntime(t *testing.T) {
	// Beside TestDNS (no load, mostly waiting) on another cluster.
	t.Parallel()
	h := newChartEnv(t, "slz", chartOptions{})
	e := h.env

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
		h.killControllers()
		e.settled(proxyNS, proxyName, 4*time.Minute)
		h.leader() // the latency scrape reads the new leader
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
		h.bindingGate(false)
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
			// As kubectl drain: an eviction a PodDisruptionBudget refuses
			// for now (429) is tried again until the budget allows it.
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
			e.eventually(3*time.Minute, "evicting "+p.Namespace+"/"+p.Name, func(ctx context.Context) (bool, error) {
				err := e.kube.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev)
				if apierrors.IsTooManyRequests(err) {
					return false, err
				}
				if err != nil && !apierrors.IsNotFound(err) {
					e.t.Fatalf("evicting %s/%s: %v", p.Namespace, p.Name, err)
				}
				return true, nil
			})
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
