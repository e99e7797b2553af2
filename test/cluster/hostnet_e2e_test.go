//go:build e2e

package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// testHostNetwork: two hostNetwork pods pinned to one node share a port
// with SO_REUSEPORT and answer at the node's address (podIP = hostIP =
// node InternalIP); a hostPort on a pod with its own address is refused
// with a reason.
func testHostNetwork(t *testing.T, c *Cluster, ns string) {
	ctx := context.Background()
	const node, port = "node-2", 18080
	d := echoDeployment(ns, "hostnet", echoOpts{replicas: 2, extra: []string{"--reuse-port"}})
	spec := &d.Spec.Template.Spec
	spec.HostNetwork = true
	spec.NodeName = node // two on one node: no scheduler host-port check
	ctr := &spec.Containers[0]
	ctr.Args[1] = fmt.Sprintf("$(POD_IP):%d", port)
	ctr.Ports = nil // hostNetwork defaults hostPort to containerPort; none declared
	ctr.ReadinessProbe.HTTPGet.Port = intstr.FromInt32(port)
	if _, err := c.Client().AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitReadyPods(t, c, ns, "hostnet", 2)
	nodeIP := c.NodeIP(node).String()
	for _, p := range pods {
		if p.Status.PodIP != nodeIP || p.Status.HostIP != nodeIP {
			t.Errorf("hostNetwork pod %s: podIP %s hostIP %s, want both %s", p.Name, p.Status.PodIP, p.Status.HostIP, nodeIP)
		}
	}
	seen := map[string]bool{}
	for range 60 {
		body, err := get(fmt.Sprintf("http://%s:%d/", nodeIP, port))
		if err != nil {
			t.Fatal(err)
		}
		seen[strings.Fields(body)[0]] = true
	}
	if len(seen) != 2 {
		t.Errorf("answers at %s:%d came from %v, want both pods", nodeIP, port, seen)
	}

	// A hostPort without hostNetwork is refused, not silently unreachable.
	bad := echoDeployment(ns, "hostport", echoOpts{replicas: 1})
	bad.Spec.Template.Spec.Containers[0].Ports[0].HostPort = port + 1
	if _, err := c.Client().AppsV1().Deployments(ns).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "hostPort pod refused", func(ctx context.Context) (bool, error) {
		all, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=hostport"})
		if err != nil || len(all.Items) == 0 {
			return false, err
		}
		for _, cs := range all.Items[0].Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "hostNetwork") {
				return true, nil
			}
		}
		return false, nil
	})
	for _, name := range []string{"hostnet", "hostport"} {
		if err := c.Client().AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
}
