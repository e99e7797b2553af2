//go:build e2e

package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
)

// TestLocalCluster starts one cluster and runs every scenario on it in
// sequence (a start costs seconds), then stops it and checks that no
// process, namespace or link is left.
func TestLocalCluster(t *testing.T) {
	images := buildBinaries(t)
	c := StartForTest(t, Options{Images: images})
	ctx := context.Background()
	ns := "e2e"
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "default service account in "+ns, func(ctx context.Context) (bool, error) {
		_, err := c.Client().CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})

	t.Run("Nodes", func(t *testing.T) { testNodes(t, c) })
	t.Run("InClusterConfig", func(t *testing.T) { testInCluster(t, c, ns) })
	t.Run("ScaleUpAndDown", func(t *testing.T) { testScale(t, c, ns) })
	t.Run("CrashRestart", func(t *testing.T) { testCrashRestart(t, c, ns) })
	t.Run("RollingUpdateHeldByReadinessGate", func(t *testing.T) { testRollingUpdate(t, c, ns) })
	t.Run("GracefulTermination", func(t *testing.T) { testGracefulTermination(t, c, ns) })
	t.Run("Drain", func(t *testing.T) { testDrain(t, c, ns) })
	t.Run("HostNetwork", func(t *testing.T) { testHostNetwork(t, c, ns) })
	t.Run("Logs", func(t *testing.T) { testLogs(t, c, ns) })

	// No process, namespace or link may outlive Stop.
	started := append([]Process(nil), c.everStarted...)
	netns := c.NodeNamespace("node-1")
	slotName := c.slot.name
	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	var pods int
	for _, p := range started {
		if strings.HasPrefix(p.Name, "pod ") {
			pods++
		}
		if alive(p.PID, p.start) {
			t.Errorf("process %s (pid %d) still runs after Stop", p.Name, p.PID)
		}
	}
	t.Logf("checked %d processes (%d pod containers) by PID: none left", len(started), pods)
	if pods == 0 {
		t.Error("no pod process was ever started")
	}
	for _, n := range listNetns() {
		if n == netns || strings.HasPrefix(n, slotName+"-") {
			t.Errorf("network namespace %s left after Stop", n)
		}
	}
	for _, l := range listLinks() {
		if strings.HasPrefix(l, slotName+"-") {
			t.Errorf("link %s left after Stop", l)
		}
	}
}

func testNodes(t *testing.T, c *Cluster) {
	nodes, err := c.Client().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]int{}
	for _, n := range nodes.Items {
		zones[n.Labels["topology.kubernetes.io/zone"]]++
		var ip string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		if want := c.NodeIP(n.Name).String(); ip != want {
			t.Errorf("node %s InternalIP = %q, want %s", n.Name, ip, want)
		}
		if !nodeReady(&n) || n.Status.Allocatable.Pods().Value() == 0 {
			t.Errorf("node %s not Ready or without capacity: %+v", n.Name, n.Status)
		}
	}
	if len(nodes.Items) != 3 || len(zones) != 2 {
		t.Errorf("got %d nodes in zones %v, want 3 in 2 zones", len(nodes.Items), zones)
	}
}

func testInCluster(t *testing.T, c *Cluster, ns string) {
	ctx := context.Background()
	rbac := c.Client().RbacV1()
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := echoDeployment(ns, "incluster", echoOpts{replicas: 1})
	d.Spec.Template.Spec.Containers[0].Image = "incluster"
	d.Spec.Template.Spec.Containers[0].Args = []string{"--listen", "$(POD_IP):8080"}
	d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path = "/"
	if _, err := c.Client().AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := waitReadyPods(t, c, ns, "incluster", 1)[0]
	body, err := get(fmt.Sprintf("http://%s:8080/", pod.Status.PodIP))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("ok %s\n", pod.UID); body != want {
		t.Errorf("in-cluster client answered %q, want %q", body, want)
	}
	// The token is mounted only in the pod's own mount namespace.
	if _, err := os.Stat(saMountPath + "/token"); err == nil {
		t.Errorf("%s/token is visible outside the pod", saMountPath)
	}
	deleteDeployment(t, c, ns, "incluster")
}

func deleteDeployment(t *testing.T, c *Cluster, ns, name string) {
	t.Helper()
	bg := metav1.DeletePropagationForeground
	if err := c.Client().AppsV1().Deployments(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "pods of "+name+" gone", func(ctx context.Context) (bool, error) {
		list, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		return err == nil && len(list.Items) == 0, err
	})
}

func scale(t *testing.T, c *Cluster, ns, name string, n int32) {
	t.Helper()
	ctx := context.Background()
	// The deployment controller writes the Deployment's status meanwhile:
	// a conflict means read the scale again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := c.Client().AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = n
		_, err = c.Client().AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("scaling %s/%s to %d: %v", ns, name, n, err)
	}
}

// checkServing asserts every pod answers on its own address with its own
// name, its address is on its node's block and the downward API resolved.
func checkServing(t *testing.T, c *Cluster, pods []corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || ip.IsLoopback() {
			t.Errorf("pod %s has IP %q", p.Name, p.Status.PodIP)
			continue
		}
		node := c.NodeIP(p.Spec.NodeName).As4()
		if ip.As4()[2] != node[2] || p.Status.HostIP != c.NodeIP(p.Spec.NodeName).String() {
			t.Errorf("pod %s on %s has IP %s / hostIP %s", p.Name, p.Spec.NodeName, ip, p.Status.HostIP)
		}
		body, err := get(fmt.Sprintf("http://%s:8080/hello", ip))
		if err != nil {
			t.Errorf("pod %s: %v", p.Name, err)
			continue
		}
		if want := p.Name + " GET " + ip.String() + ":8080 /hello\n"; body != want {
			t.Errorf("pod %s answered %q, want %q", p.Name, body, want)
		}
	}
}

func testScale(t *testing.T, c *Cluster, ns string) {
	ctx := context.Background()
	if _, err := c.Client().AppsV1().Deployments(ns).Create(ctx, echoDeployment(ns, "scale", echoOpts{replicas: 2}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	checkServing(t, c, waitReadyPods(t, c, ns, "scale", 2))

	scale(t, c, ns, "scale", 5)
	pods := waitReadyPods(t, c, ns, "scale", 5)
	checkServing(t, c, pods)
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
	}
	if len(nodes) < 2 {
		t.Errorf("5 pods on %d node(s), want them spread", len(nodes))
	}

	scale(t, c, ns, "scale", 1)
	left := waitReadyPods(t, c, ns, "scale", 1)
	eventually(t, 60*time.Second, "scaled-down pods removed", func(ctx context.Context) (bool, error) {
		list, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=scale"})
		return err == nil && len(list.Items) == 1, err
	})
	var wg sync.WaitGroup
	for _, p := range pods {
		if p.Name == left[0].Name {
			continue
		}
		wg.Go(func() {
			if !gone(fmt.Sprintf("http://%s:8080/", p.Status.PodIP)) {
				t.Errorf("removed pod %s still answers on %s", p.Name, p.Status.PodIP)
			}
		})
	}
	wg.Wait()
	deleteDeployment(t, c, ns, "scale")
}

func testCrashRestart(t *testing.T, c *Cluster, ns string) {
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crasher", Labels: map[string]string{"app": "crasher"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "echo", Image: "echo", Args: []string{"--listen", "not-an-address"},
		}}},
	}
	if _, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "crash loop back-off", func(ctx context.Context) (bool, error) {
		p, err := c.Client().CoreV1().Pods(ns).Get(ctx, "crasher", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 {
			return false, err
		}
		cs := p.Status.ContainerStatuses[0]
		last := cs.LastTerminationState.Terminated
		return cs.RestartCount >= 1 && last != nil && last.ExitCode == 1 &&
			cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" &&
			p.Status.Phase == corev1.PodRunning && !isReady(p), nil
	})
	if err := c.Client().CoreV1().Pods(ns).Delete(ctx, "crasher", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "crasher removed", func(ctx context.Context) (bool, error) {
		_, err := c.Client().CoreV1().Pods(ns).Get(ctx, "crasher", metav1.GetOptions{})
		return err != nil, nil
	})
}

// rolloutWatch records, for every pod event of app, how many live pods
// exist and how many of them are Ready, to check maxSurge and
// maxUnavailable over the whole rollout.
type rolloutWatch struct {
	mu                sync.Mutex
	pods              map[string]*corev1.Pod
	maxLive, minReady int
	violations        []string
	replicas, surge   int
	maxUnavailable    int
	stop              func()
}

func watchRollout(t *testing.T, c *Cluster, ns, app string, replicas, surge, unavailable int) *rolloutWatch {
	list, err := c.Client().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Client().CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	rw := &rolloutWatch{pods: map[string]*corev1.Pod{}, minReady: 1 << 30, replicas: replicas, surge: surge, maxUnavailable: unavailable, stop: w.Stop}
	for i := range list.Items {
		rw.pods[list.Items[i].Name] = &list.Items[i]
	}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rw.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(rw.pods, p.Name)
			} else {
				rw.pods[p.Name] = p
			}
			live, ready := 0, 0
			for _, p := range rw.pods {
				if p.DeletionTimestamp == nil {
					live++
					if isReady(p) {
						ready++
					}
				}
			}
			rw.maxLive = max(rw.maxLive, live)
			rw.minReady = min(rw.minReady, ready)
			if live > replicas+surge {
				rw.violations = append(rw.violations, fmt.Sprintf("%d live pods > %d+%d", live, replicas, surge))
			}
			if ready < replicas-unavailable {
				rw.violations = append(rw.violations, fmt.Sprintf("%d ready pods < %d-%d", ready, replicas, unavailable))
			}
			rw.mu.Unlock()
		}
	}()
	return rw
}

func testRollingUpdate(t *testing.T, c *Cluster, ns string) {
	ctx := context.Background()
	deps := c.Client().AppsV1().Deployments(ns)
	if _, err := deps.Create(ctx, echoDeployment(ns, "gated", echoOpts{replicas: 3, gate: true}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Containers become ready, but the pods stay un-Ready until the gate
	// condition is set.
	var pods []corev1.Pod
	eventually(t, 90*time.Second, "3 gated pods with ready containers", func(ctx context.Context) (bool, error) {
		var err error
		pods, err = livePods(ctx, c, ns, "gated")
		if err != nil || len(pods) != 3 {
			return false, err
		}
		for _, p := range pods {
			if podCondition(&p, corev1.ContainersReady) != corev1.ConditionTrue {
				return false, nil
			}
		}
		return true, nil
	})
	for _, p := range pods {
		ready := findCondition(p.Status.Conditions, corev1.PodReady)
		if ready == nil || ready.Status != corev1.ConditionFalse || ready.Reason != "ReadinessGatesNotReady" {
			t.Errorf("pod %s without its gate condition: Ready = %+v, want False/ReadinessGatesNotReady", p.Name, ready)
		}
	}
	for _, p := range pods {
		if err := setGate(ctx, c, ns, p.Name, p.UID); err != nil {
			t.Fatal(err)
		}
	}
	waitReadyPods(t, c, ns, "gated", 3)
	oldPods := map[string]bool{}
	for _, p := range pods {
		oldPods[p.Name] = true
	}

	rw := watchRollout(t, c, ns, "gated", 3, 1, 0)
	defer rw.stop()
	// The deployment controller writes its status concurrently: retry
	// the read-modify-write on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deps.Get(ctx, "gated", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Env = append(d.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "VERSION", Value: "2"})
		_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	opened := map[string]bool{}
	for round := 1; round <= 3; round++ {
		// Exactly one new pod gets its containers ready; the rollout waits
		// for its gate.
		var fresh corev1.Pod
		eventually(t, 90*time.Second, fmt.Sprintf("new pod %d with ready containers", round), func(ctx context.Context) (bool, error) {
			live, err := livePods(ctx, c, ns, "gated")
			if err != nil {
				return false, err
			}
			for _, p := range live {
				if !oldPods[p.Name] && !opened[p.Name] && podCondition(&p, corev1.ContainersReady) == corev1.ConditionTrue {
					fresh = p
					return true, nil
				}
			}
			return false, nil
		})
		// Hold: while the gate is closed, the rollout must not progress.
		time.Sleep(2 * time.Second)
		live, err := livePods(ctx, c, ns, "gated")
		if err != nil {
			t.Fatal(err)
		}
		var old, waiting int
		for _, p := range live {
			switch {
			case oldPods[p.Name]:
				old++
			case !opened[p.Name]:
				waiting++
				if isReady(&p) {
					t.Errorf("round %d: pod %s is Ready with its gate closed", round, p.Name)
				}
			}
		}
		if want := 3 - (round - 1); old != want || waiting != 1 {
			t.Errorf("round %d while the gate is closed: %d old and %d waiting new pods, want %d and 1", round, old, waiting, want)
		}
		if err := setGate(ctx, c, ns, fresh.Name, fresh.UID); err != nil {
			t.Fatal(err)
		}
		opened[fresh.Name] = true
	}
	eventually(t, 90*time.Second, "rollout complete", func(ctx context.Context) (bool, error) {
		d, err := deps.Get(ctx, "gated", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := d.Status
		return d.Status.ObservedGeneration == d.Generation && s.UpdatedReplicas == 3 && s.ReadyReplicas == 3 &&
			s.AvailableReplicas == 3 && s.Replicas == 3, nil
	})
	pods = waitReadyPods(t, c, ns, "gated", 3)
	for _, p := range pods {
		if !opened[p.Name] {
			t.Errorf("pod %s is not one of the new pods", p.Name)
		}
		// The kubelet's status writes kept the controller's gate condition.
		if podCondition(&p, gateType) != corev1.ConditionTrue {
			t.Errorf("pod %s lost its gate condition", p.Name)
		}
	}
	rw.mu.Lock()
	t.Logf("rollout: at most %d live pods, at least %d ready", rw.maxLive, rw.minReady)
	if len(rw.violations) > 0 {
		t.Errorf("maxSurge/maxUnavailable violated: %v", rw.violations)
	}
	if rw.maxLive != 4 {
		t.Errorf("at most %d live pods during the rollout, want 4 (maxSurge 1)", rw.maxLive)
	}
	rw.mu.Unlock()
	deleteDeployment(t, c, ns, "gated")
}

func testGracefulTermination(t *testing.T, c *Cluster, ns string) {
	ctx := context.Background()
	// preStop sleeps 3 s; then SIGTERM makes echo fail /healthz for 3 s
	// before it exits, so the pod must turn un-Ready while terminating.
	// A bare pod: nothing replaces it.
	d := echoDeployment(ns, "graceful", echoOpts{replicas: 1, preStop: []string{"sleep", "3"}, grace: 20, extra: []string{"--shutdown-delay", "3s"}})
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "graceful", Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
	if _, err := c.Client().CoreV1().Pods(ns).Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := waitReadyPods(t, c, ns, "graceful", 1)[0]
	w, err := c.Client().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := c.Client().CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// During preStop the process has not been signalled: it still serves.
	if _, err := get(fmt.Sprintf("http://%s:8080/healthz", pod.Status.PodIP)); err != nil {
		t.Errorf("pod failed /healthz during its preStop hook: %v", err)
	}
	var sawUnready, deleted bool
	timeout := time.After(60 * time.Second)
	for !deleted {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			p := ev.Object.(*corev1.Pod)
			switch {
			case ev.Type == watch.Deleted:
				deleted = true
			case p.DeletionTimestamp != nil && !isReady(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil:
				sawUnready = true
			}
		case <-timeout:
			t.Fatal("terminating pod not removed")
		}
	}
	if !sawUnready {
		t.Error("the terminating pod never turned un-Ready while its process still ran")
	}
	if !gone(fmt.Sprintf("http://%s:8080/healthz", pod.Status.PodIP)) {
		t.Error("removed pod still answers")
	}
}

func testDrain(t *testing.T, c *Cluster, ns string) {
	ctx := context.Background()
	if _, err := c.Client().AppsV1().Deployments(ns).Create(ctx, echoDeployment(ns, "drain", echoOpts{replicas: 4}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	maxUnavailable := intstr.FromInt32(1)
	if _, err := c.Client().PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "drain"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &maxUnavailable,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "drain"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitReadyPods(t, c, ns, "drain", 4)
	counts := map[string]int{}
	for _, p := range pods {
		counts[p.Spec.NodeName]++
	}
	victim := pods[0].Spec.NodeName
	for n, k := range counts {
		if k > counts[victim] {
			victim = n
		}
	}
	t.Logf("draining %s (pods per node: %v)", victim, counts)
	kubectl(t, c, "drain", victim, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
	after := waitReadyPods(t, c, ns, "drain", 4)
	for _, p := range after {
		if p.Spec.NodeName == victim {
			t.Errorf("pod %s still on drained node %s", p.Name, victim)
		}
	}
	checkServing(t, c, after)
	n, err := c.Client().CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
	if err != nil || !n.Spec.Unschedulable {
		t.Errorf("node %s not cordoned: %v", victim, err)
	}
	kubectl(t, c, "uncordon", victim)
	deleteDeployment(t, c, ns, "drain")
}
