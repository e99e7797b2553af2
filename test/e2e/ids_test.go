//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/nodes"
	"sluice.dev/sluice/test/cluster"
)

const (
	// idsName is the chart's IngressDaemonSet: the proxy fleet of binding
	// edge, proxy.kind IngressDaemonSet.
	idsName     = "sluice-proxy-edge"
	idsLabel    = "sluice-proxy-edge" // app.kubernetes.io/name of the per-node proxies
	idsPort     = 18080               // the proxies' traffic port on every node's address
	idsAdmin    = 19090
	idsHealth   = 10080 // healthCheckNodePort: sluice node-health
	idsNodeRole = "sluice.dev/test-edge"
)

// TestIngressDaemonSet is issue 12's end-to-end proof: HAProxy in front
// with instance targets (node address:port), an IngressDaemonSet with two
// `sluice proxy --reuse-port` per node on the host network, fixed-rate load
// while its template changes, a node drains, nodes come and go and the
// controller dies mid-rollout. The last case, ids-daemonset-off, is the
// twin: the same template change on the same nodes behind the same
// node-health check, rolled by an ordinary DaemonSet (one proxy per node)
// without readiness gate, drain handshake or detachment, its proxies
// stopping at once on SIGTERM (--drain-max-wait=0s); it must lose
// requests, and its line gives min_healthy_nodes, the fewest node targets
// HAProxy had up at once. ids-uninstall then checks that one `helm
// uninstall` removes the release, IngressDaemonSet included.
//
// The local cluster's nodes are fixed at start: a node "joins" the
// IngressDaemonSet by getting its node-selector label and "leaves" by
// being cordoned (the controller detaches it and removes its replicas)
// and losing the label.
func TestIngressDaemonSet(t *testing.T) {
	// sluice from its chart, the proxies as the chart's IngressDaemonSet
	// (the fleet of binding edge, proxy.kind IngressDaemonSet, which also
	// turns the controller's IngressDaemonSets on): the chart renders the
	// object, the binding of node targets checked on node-health and the
	// health checkers' ServiceAccount and RBAC; the controller pods create
	// the per-node Deployments under the chart's RBAC. A tenant namespace
	// is a binding namespace, not an IngressDaemonSet one
	// (privilege-tenant-ids); it exists before the chart's Roles in it.
	h := installChart(t, "sli", chartOptions{nodes: cluster.Nodes(4, 2),
		setup: func(e *env) string {
			e.createNamespaces(tenantIDS)
			return ""
		},
		base: func(runtimeAPI string) string {
			return fmt.Sprintf(`image: {repository: ghcr.io/sluice-dev/sluice, tag: e2e}
listenOnPodIP: true
controller:
  logFormat: text
  logLevel: debug
  bindingNamespaces: [%s, %s]
proxy:
  httpsPort: 0
  drainMaxWaitSeconds: 30
  shutdownTimeoutSeconds: 10
  terminationMarginSeconds: 20
  logFormat: text
ingressClasses: [{name: sluice, binding: edge}]
bindings:
  - name: edge
    provider:
      haproxy: {runtimeAPI: %q, backend: %s}
    publish: [{ip: 127.0.0.1}]
    proxy:
      kind: IngressDaemonSet
      nodeSelector: {%s: "true"}
      httpPort: %d
      adminPort: %d
      ingressDaemonSet: {podsPerNode: 2, healthCheckNodePort: %d}
`, proxyNS, tenantIDS, runtimeAPI, backend, idsNodeRole, idsPort, idsAdmin, idsHealth)
		}})
	e := h.env
	e.create(echoObjects()...)
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		e.labelNode(n, idsNodeRole, "true")
	}
	e.settled(appNS, appName, 2*time.Minute)
	e.idsSettled(3)
	e.eventually(30*time.Second, "a request through HAProxy", func(context.Context) (bool, error) {
		code, body, err := e.get()
		return err == nil && code == 200 && strings.Contains(body, "echo"), err
	})

	cs := newCases(e)
	roll := 0
	template := func(x *v1alpha1.IngressDaemonSet) {
		roll++
		c := &x.Spec.Template.Spec.Containers[0]
		c.Env = setEnv(c.Env, "ROLL", itoa(roll))
	}
	cs.runNoted("ids-template", func() string {
		s := e.sampleDetach()
		e.updateIDS(template)
		e.idsSettled(3)
		return s()
	})
	idsAction, idsExtra := e.tenantIDSCase()
	cs.runWith("privilege-tenant-ids", idsExtra, idsAction)
	cs.runNoted("ids-detach-mode", func() string {
		s := e.sampleDetach()
		e.updateIDS(func(x *v1alpha1.IngressDaemonSet) {
			one := int32(1)
			x.Spec.UpdateStrategy.RollingUpdate = v1alpha1.RollingUpdateIngressDaemonSet{MaxUnavailableNodes: &one}
			template(x)
		})
		e.idsSettled(3)
		return s()
	})
	cs.runNoted("ids-drain", func() string {
		s := e.sampleDetach()
		e.drainIDSNode("node-3")
		e.eventually(2*time.Minute, "node-3's replicas gone", func(ctx context.Context) (bool, error) {
			err := e.cl.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: idsName + "-node-3"}, &appsv1.Deployment{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		e.settled(appNS, appName, 2*time.Minute)
		e.cordon("node-3", false)
		e.idsSettled(3)
		return s()
	})
	cs.runNoted("ids-add-remove", func() string {
		s := e.sampleDetach()
		e.labelNode("node-4", idsNodeRole, "true")
		e.idsSettled(4)
		e.cordon("node-1", true)
		e.eventually(2*time.Minute, "node-1's replicas gone", func(ctx context.Context) (bool, error) {
			err := e.cl.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: idsName + "-node-1"}, &appsv1.Deployment{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		e.labelNode("node-1", idsNodeRole, "")
		e.cordon("node-1", false)
		e.idsSettled(3)
		return s()
	})
	cs.runNoted("ids-controller-restart", func() string {
		s := e.sampleDetach()
		e.updateIDS(template)
		e.eventually(time.Minute, "a node detached", func(ctx context.Context) (bool, error) {
			n, err := e.detachedNodes(ctx)
			return n > 0, err
		})
		h.killControllers()
		e.idsSettled(3)
		return s()
	})
	// The chart's IngressDaemonSet as the chart made it, for ids-uninstall
	// after the twin (which deletes it).
	var chartIDS v1alpha1.IngressDaemonSet
	if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: proxyNS, Name: idsName}, &chartIDS); err != nil {
		t.Fatal(err)
	}
	// The twin (it must lose requests): the same template change on the
	// same nodes behind the same check, rolled by a plain DaemonSet.
	if cs.wants("ids-daemonset-off") {
		e.swapToDaemonSet() // not measured: only the DaemonSet's rollout is
		e.holdInFlight()
		cs.runNoted("ids-daemonset-off", func() string {
			s := e.sampleHealthyNodes()
			e.patchDaemonSetEnv("ROLL", "ds-1")
			e.edgeDaemonSetSettled(3)
			return s() + fmt.Sprintf(" nodes_rolled=%d", e.nodesRunning("edge-ds", "ROLL", "ds-1"))
		})
	}
	// ids-uninstall: one `helm uninstall` removes a release whose proxies
	// are the chart's IngressDaemonSet: its pre-delete Job deletes the
	// IngressDaemonSet and waits until the controller has let it go (its
	// finalizer), then the bindings, under the Job's own RBAC. Nothing of
	// the release stays. The proxies go, so no load runs during it: the
	// one "request" of its line is the uninstall.
	if cs.wants("ids-uninstall") {
		start := time.Now()
		left := e.uninstallWithIDS(h, &chartIDS)
		failed := 0
		if len(left) > 0 {
			failed = 1
			t.Errorf("after helm uninstall, left behind: %q", left)
		}
		e.summary(fmt.Sprintf("e2e ids-uninstall: requests=1 failed=%d left_behind=%d seconds=%.0f", failed, len(left), time.Since(start).Seconds()))
	}
}

// uninstallWithIDS makes sure the chart's IngressDaemonSet exists and
// carries the controller's finalizer (the twin deleted it: it is made
// again from the chart's copy), runs `helm uninstall`, and returns what
// of the release is left.
func (e *env) uninstallWithIDS(h *helmEnv, chartIDS *v1alpha1.IngressDaemonSet) []string {
	e.t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "edge-ds"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "edge-ds-health"}},
	} {
		if err := e.cl.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			e.t.Fatal(err)
		}
	}
	var cur v1alpha1.IngressDaemonSet
	if err := e.cl.Get(ctx, client.ObjectKeyFromObject(chartIDS), &cur); apierrors.IsNotFound(err) {
		again := &v1alpha1.IngressDaemonSet{ObjectMeta: metav1.ObjectMeta{
			Namespace: chartIDS.Namespace, Name: chartIDS.Name,
			Labels: chartIDS.Labels, Annotations: chartIDS.Annotations,
		}, Spec: chartIDS.Spec}
		if err := e.cl.Create(ctx, again); err != nil {
			e.t.Fatal(err)
		}
	} else if err != nil {
		e.t.Fatal(err)
	}
	e.eventually(time.Minute, "the IngressDaemonSet holds the controller's finalizer", func(ctx context.Context) (bool, error) {
		var x v1alpha1.IngressDaemonSet
		err := e.cl.Get(ctx, client.ObjectKeyFromObject(chartIDS), &x)
		return err == nil && slices.Contains(x.Finalizers, "sluice.dev/ingress-daemonset"), err
	})
	h.helm("uninstall", release, "-n", proxyNS, "--wait", "--timeout", "5m")
	var left []string
	var idss v1alpha1.IngressDaemonSetList
	var bindings v1alpha1.LoadBalancerBindingList
	if err := e.cl.List(ctx, &idss); err != nil {
		e.t.Fatal(err)
	}
	if err := e.cl.List(ctx, &bindings); err != nil {
		e.t.Fatal(err)
	}
	for _, x := range idss.Items {
		left = append(left, "ingressdaemonset "+x.Namespace+"/"+x.Name+" finalizers="+strings.Join(x.Finalizers, ","))
	}
	for _, b := range bindings.Items {
		left = append(left, "binding "+b.Namespace+"/"+b.Name+" finalizers="+strings.Join(b.Finalizers, ","))
	}
	// The per-node Deployments go with their IngressDaemonSet (garbage
	// collection, after the uninstall returned).
	var rest []string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Second) {
		out := h.kubectl("get", "deployments,serviceaccounts,roles,rolebindings,leases", "-n", proxyNS,
			"-l", "app.kubernetes.io/instance="+release, "-o", "name")
		if rest = strings.Fields(out); len(rest) == 0 || time.Now().After(deadline) {
			break
		}
	}
	return append(left, rest...)
}

// labelNode sets (value "" removes) a node label.
func (e *env) labelNode(node, key, value string) {
	e.t.Helper()
	arg := key + "=" + value
	if value == "" {
		arg = key + "-"
	}
	e.kubectl("label", "node", node, arg, "--overwrite")
}

func setEnv(env []corev1.EnvVar, name, value string) []corev1.EnvVar {
	out := slices.DeleteFunc(slices.Clone(env), func(v corev1.EnvVar) bool { return v.Name == name })
	return append(out, corev1.EnvVar{Name: name, Value: value})
}

// proxyTemplate is a pod template like the chart's IngressDaemonSet's,
// written by hand (for the tenant's IngressDaemonSet of
// privilege-tenant-ids and the DaemonSet twin): on the host network, both
// replicas of a node listen on the node's address with SO_REUSEPORT. It
// lists no readiness gate: on a detached node no target exists to turn it
// True; the IngressDaemonSet controller waits for the node target itself.
func (e *env) proxyTemplate() corev1.PodTemplateSpec {
	tmpl := e.proxyDeployment().Spec.Template
	tmpl.Labels = map[string]string{"app.kubernetes.io/name": idsLabel}
	spec := &tmpl.Spec
	spec.HostNetwork = true
	spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	spec.ReadinessGates = nil
	spec.TopologySpreadConstraints = nil
	spec.Affinity = nil
	c := &spec.Containers[0]
	c.Args = []string{"proxy", "--reuse-port", fmt.Sprintf("--http-address=$(POD_IP):%d", idsPort), "--https-address=",
		fmt.Sprintf("--admin-address=$(POD_IP):%d", idsAdmin), "--health-on-traffic-port",
		"--drain-max-wait=30s", "--shutdown-timeout=10s", "--log-format=text"}
	c.Ports = nil // host network: declared ports become host ports, one pod per node
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(idsAdmin)}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	c.LivenessProbe = nil
	return tmpl
}

// ingressDaemonSet is an IngressDaemonSet like the chart's (the tenant's
// copy, and the twin's health checker, are built from it).
func (e *env) ingressDaemonSet() *v1alpha1.IngressDaemonSet {
	two := int32(2)
	return &v1alpha1.IngressDaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: idsName},
		Spec: v1alpha1.IngressDaemonSetSpec{
			PodsPerNode:         &two,
			NodeSelector:        map[string]string{idsNodeRole: "true"},
			Template:            e.proxyTemplate(),
			HealthCheckNodePort: idsHealth,
			HealthChecker:       v1alpha1.HealthCheckerSpec{ServiceAccountName: "sluice-node-health"},
		},
	}
}

func (e *env) updateIDS(mutate func(*v1alpha1.IngressDaemonSet)) {
	e.t.Helper()
	x := &v1alpha1.IngressDaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: idsName}}
	if err := e.update(x, func() { mutate(x) }); err != nil {
		e.t.Fatalf("updating the IngressDaemonSet: %v", err)
	}
}

// idsSettled waits until the IngressDaemonSet's status says n nodes run
// the current template, all ready and attached, the rollout is complete,
// and HAProxy has n healthy node targets.
func (e *env) idsSettled(n int32) {
	e.t.Helper()
	e.eventually(4*time.Minute, fmt.Sprintf("the IngressDaemonSet settled on %d nodes", n), func(ctx context.Context) (bool, error) {
		var x v1alpha1.IngressDaemonSet
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: idsName}, &x); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(x.Status.Conditions, v1alpha1.ConditionProgressing)
		if c != nil && c.Reason == v1alpha1.ReasonNodeFailed {
			return false, errors.New(c.Message)
		}
		want := v1alpha1.NodeCounts{Desired: n, Ready: n, Updated: n}
		if x.Status.ObservedGeneration != x.Generation || x.Status.Nodes != want || c == nil || c.Reason != "Complete" {
			return false, fmt.Errorf("status %+v, progressing %+v", x.Status.Nodes, c)
		}
		return e.healthyTargets(ctx, n)
	})
}

// healthyTargets: the binding lists n targets, all healthy.
func (e *env) healthyTargets(ctx context.Context, n int32) (bool, error) {
	var b v1alpha1.LoadBalancerBinding
	if err := e.cl.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: "edge"}, &b); err != nil {
		return false, err
	}
	t := b.Status.Targets
	return t.Healthy == n && t.Initial+t.Unhealthy+t.Draining+t.Unavailable == 0, fmt.Errorf("targets %+v", t)
}

func (e *env) detachedNodes(ctx context.Context) (int, error) {
	var nl corev1.NodeList
	if err := e.cl.List(ctx, &nl); err != nil {
		return 0, err
	}
	n := 0
	for _, node := range nl.Items {
		if _, ok := node.Annotations[v1alpha1.DefaultDetachAnnotation]; ok {
			n++
		}
	}
	return n, nil
}

// sampleDetach polls the nodes' detach annotation every 100ms; the
// returned func stops and gives detached_p50 (how long a node stayed
// detached) and nodes_rolled (nodes detached at least once). Every case
// rolls one node at a time (maxDegradedNodes 1 or maxUnavailableNodes 1):
// seeing two nodes detached at once fails the test.
func (e *env) sampleDetach() func() string {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	since := map[string]time.Time{}
	var spans []time.Duration
	rolled := map[string]bool{}
	most := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			var nl corev1.NodeList
			if e.cl.List(ctx, &nl) == nil {
				now := time.Now()
				for _, n := range nl.Items {
					_, on := n.Annotations[v1alpha1.DefaultDetachAnnotation]
					start, was := since[n.Name]
					switch {
					case on && !was:
						since[n.Name] = now
						rolled[n.Name] = true
					case !on && was:
						spans = append(spans, now.Sub(start))
						delete(since, n.Name)
					}
				}
				most = max(most, len(since))
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() string {
		cancel()
		wg.Wait()
		if most > 1 {
			e.t.Errorf("%d nodes were detached at once; the budget is 1", most)
		}
		p50 := "-"
		if len(spans) > 0 {
			sort.Slice(spans, func(i, j int) bool { return spans[i] < spans[j] })
			p50 = fmtSeconds(spans[len(spans)/2].Seconds())
		}
		return fmt.Sprintf("detached_p50=%s nodes_rolled=%d", p50, len(rolled))
	}
}

// drainIDSNode is `kubectl drain --ignore-daemonsets`: it cordons the
// node and evicts its pods through the eviction API, again while a
// PodDisruptionBudget refuses (429), until none but DaemonSet pods is
// left.
func (e *env) drainIDSNode(node string) {
	e.t.Helper()
	e.cordon(node, true)
	e.eventually(3*time.Minute, "node "+node+" drained", func(ctx context.Context) (bool, error) {
		left := 0
		for _, ns := range []string{proxyNS, appNS} {
			pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			if err != nil {
				return false, err
			}
			for _, p := range pods.Items {
				if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "DaemonSet" {
					continue
				}
				left++
				if p.DeletionTimestamp != nil {
					continue
				}
				ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
				if err := e.kube.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev); err != nil && !apierrors.IsTooManyRequests(err) && !apierrors.IsNotFound(err) {
					return false, fmt.Errorf("evicting %s/%s: %w", p.Namespace, p.Name, err)
				}
			}
		}
		return left == 0, nil
	})
}

// swapToDaemonSet replaces the IngressDaemonSet by its twin: an ordinary
// DaemonSet of the same proxies (one per node, on the same three nodes),
// behind the same HAProxy backend and the same node-health check, with
// sluice's mechanisms off: no readiness gate, no drain handshake, no
// detachment, nodes registered for as long as they run the checker, and
// proxies that stop at SIGKILL speed on SIGTERM (--drain-max-wait=0s
// --shutdown-timeout=0s). It waits until HAProxy has the three node
// targets healthy.
func (e *env) swapToDaemonSet() {
	e.t.Helper()
	ctx := context.Background()
	ids := e.ingressDaemonSet()
	if err := e.cl.Delete(ctx, &v1alpha1.IngressDaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: idsName}}); err != nil {
		e.t.Fatal(err)
	}
	// The IngressDaemonSet's health checker goes with it (its owner):
	// wait until its pods and the proxies are gone, so that the twin's
	// checker can take the same host port.
	e.eventually(2*time.Minute, "the IngressDaemonSet's pods gone", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.cl.List(ctx, &pods, client.InNamespace(proxyNS), client.MatchingLabels{v1alpha1.LabelIngressDaemonSet: idsName}); err != nil {
			return false, err
		}
		var proxies corev1.PodList
		err := e.cl.List(ctx, &proxies, client.InNamespace(proxyNS), client.MatchingLabels{"app.kubernetes.io/name": idsLabel})
		return err == nil && len(pods.Items)+len(proxies.Items) == 0, err
	})
	// The same checker (`sluice node-health` on the health port of every
	// node), owned by nobody, watching the DaemonSet's proxies.
	hc := nodes.HealthChecker(ids, "")
	hc.Name, hc.OwnerReferences, hc.Annotations = "edge-ds-health", nil, nil
	sel := map[string]string{v1alpha1.LabelHealthChecker: hc.Name}
	hc.Labels, hc.Spec.Selector.MatchLabels, hc.Spec.Template.Labels = sel, sel, sel
	// The binding registers the nodes running the checker: they stay
	// registered while the proxies roll, as in an instance target group
	// whose membership is the node group's, and HAProxy's check of
	// node-health alone decides where traffic goes. (Selecting the
	// proxies would have the controller take a node out whenever its
	// proxy pod goes: sluice's own mechanism.)
	off := false
	b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "edge"}}
	if err := e.update(b, func() {
		b.Spec.Selector = metav1.LabelSelector{MatchLabels: sel}
		b.Spec.ReadinessGate, b.Spec.Drain.Handshake = &off, &off
	}); err != nil {
		e.t.Fatal(err)
	}
	args := hc.Spec.Template.Spec.Containers[0].Args
	for i, a := range args {
		if strings.HasPrefix(a, "--selector=") {
			args[i] = "--selector=app.kubernetes.io/name=" + idsLabel
		}
	}
	tmpl := e.proxyTemplate()
	tmpl.Spec.NodeSelector = map[string]string{idsNodeRole: "true"}
	c := &tmpl.Spec.Containers[0]
	for i, a := range c.Args {
		for _, flag := range []string{"--drain-max-wait=", "--shutdown-timeout="} {
			if strings.HasPrefix(a, flag) {
				c.Args[i] = flag + "0s"
			}
		}
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "edge-ds"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: tmpl,
		},
	}
	e.create(hc, ds)
	e.edgeDaemonSetSettled(3)
}

// sampleHealthyNodes reads HAProxy's servers (show servers state, on the
// runtime socket) every 100 ms from now on; the returned func stops and
// gives min_healthy_nodes, the fewest node targets that were up (checked
// healthy, not in maintenance or drain) at once.
func (e *env) sampleHealthyNodes() func() string {
	stop := make(chan struct{})
	done := make(chan struct{})
	least := -1
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if n, ok := e.healthyServers(); ok && (least < 0 || n < least) {
				least = n
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() string {
		close(stop)
		<-done
		return fmt.Sprintf("min_healthy_nodes=%d", least)
	}
}

// healthyServers counts the backend's servers that are up: operational
// state 2 (running), administrative state 0 (no maintenance, no drain),
// weight above 0. ok is false when the runtime API did not answer.
func (e *env) healthyServers() (n int, ok bool) {
	out := e.runtime(e.t, e.lbSock, "show servers state "+backend)
	for _, l := range strings.Split(out, "\n") {
		// be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight ...
		f := strings.Fields(l)
		if len(f) < 8 || f[1] != backend {
			continue
		}
		ok = true
		if f[5] == "2" && f[6] == "0" && f[7] != "0" {
			n++
		}
	}
	return n, ok
}

func (e *env) patchDaemonSetEnv(name, value string) {
	e.t.Helper()
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "edge-ds"}}
	if err := e.update(ds, func() {
		c := &ds.Spec.Template.Spec.Containers[0]
		c.Env = setEnv(c.Env, name, value)
	}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) edgeDaemonSetSettled(n int32) {
	e.t.Helper()
	e.eventually(4*time.Minute, "the DaemonSet settled", func(ctx context.Context) (bool, error) {
		var ds appsv1.DaemonSet
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: "edge-ds"}, &ds); err != nil {
			return false, err
		}
		s := ds.Status
		if s.ObservedGeneration < ds.Generation || s.UpdatedNumberScheduled != n || s.NumberReady != n || s.NumberAvailable != n {
			return false, nil
		}
		return e.healthyTargets(ctx, n)
	})
}

// nodesRunning counts the nodes where a ready pod of the DaemonSet ds runs
// with the environment variable name set to value: the nodes a template
// change reached, read from the pods.
func (e *env) nodesRunning(ds, name, value string) int {
	e.t.Helper()
	var pods corev1.PodList
	if err := e.cl.List(context.Background(), &pods, client.InNamespace(proxyNS)); err != nil {
		e.t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		owned := slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" && o.Name == ds })
		if !owned || p.DeletionTimestamp != nil || !ready(&p) {
			continue
		}
		if slices.ContainsFunc(p.Spec.Containers[0].Env, func(v corev1.EnvVar) bool { return v.Name == name && v.Value == value }) {
			nodes[p.Spec.NodeName] = true
		}
	}
	return len(nodes)
}
