//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb/aws"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
)

// awsSpeed scales the fake NLB's timings down 10×: health checks every
// 1s (AWS: 10s), two to change state, registration one interval, a 3s
// deregistration delay (30s), new connections still sent to a
// deregistered target for 1s (10s).
const awsSpeed = 10

// TestAWS runs the controller's rollout cases through the fake Network
// Load Balancer instead of HAProxy:
//
//	load ─► awsfake NLB listener 127.0.0.1 (TCP) ─► sluice proxy pods 10.244.x.y ─► echo pods
//	                 ▲ ELBv2 Query API (--aws-endpoint)
//	           sluice controller ◄── kube-apiserver
//
// The proxies are IP targets of one target group (type ip, TCP, health
// check GET /healthz on the traffic port). Every case must lose no request.
func TestAWS(t *testing.T) {
	// sluice from its chart, with no binding of its own: the test creates
	// the aws binding, the IngressClass names it. The controller pods
	// reach the fake's API on the cluster bridge.
	var f *awsfake.Fake
	var arn string
	h := installChart(t, "sla", chartOptions{lb: func(e *env) string {
		// The cluster and frontend tags let a binding named "aws" find the
		// group by tag: privilege-tag-binding shows a tenant's cannot.
		f, arn = e.fakeNLB("sluice-e2e", map[string]string{aws.OwnedTag: "true", aws.ClusterTag: awsTagCluster, aws.FrontendTag: "aws"}, "")
		// The tenants' namespaces exist before the chart's Roles in them.
		e.createNamespaces(tenantNoTag, tenantTagged)
		return chartAWSValues(f.URL(), awsAllowListArgs(arn)...) + fmt.Sprintf(`  bindingNamespaces: [%s, %s, %s]
bindings: []
ingressClasses: [{name: sluice, binding: aws}]
`, proxyNS, tenantNoTag, tenantTagged)
	}})
	e := h.env

	e.create(echoObjects()...)
	e.awsBinding(arn)
	e.settled(appNS, appName, 2*time.Minute)
	e.settled(proxyNS, proxyName, 2*time.Minute)
	e.eventually(30*time.Second, "a request through the fake NLB", func(context.Context) (bool, error) {
		code, body, err := e.get()
		return err == nil && code == 200 && strings.Contains(body, "echo"), err
	})
	e.eventually(30*time.Second, "ingress status published", func(ctx context.Context) (bool, error) {
		var ing networkingv1.Ingress
		err := e.cl.Get(ctx, client.ObjectKey{Namespace: appNS, Name: appName}, &ing)
		lbs := ing.Status.LoadBalancer.Ingress
		return err == nil && len(lbs) == 1 && lbs[0].IP == "127.0.0.1", err
	})
	if got := healthyTargets(f, arn); got != 3 {
		t.Fatalf("target group holds %d healthy targets, want 3: %+v", got, f.Targets(arn))
	}

	cs := newCases(e)
	run := cs.run
	run("aws-proxy-roll", func() {
		e.restartDeployment(proxyNS, proxyName)
		e.settled(proxyNS, proxyName, 2*time.Minute)
	})
	// Issue 24: tenants' bindings named like the platform's, finding its
	// group by tag, are refused and change nothing in it.
	tagAction, tagExtra := e.tagBindingCase(f, arn)
	cs.runWith("privilege-tag-binding", tagExtra, tagAction)
	run("aws-proxy-roll-throttled", func() {
		f.SetFaults(awsfake.Faults{Throttle: 0.5})
		defer f.SetFaults(awsfake.Faults{})
		e.restartDeployment(proxyNS, proxyName)
		e.settled(proxyNS, proxyName, 2*time.Minute)
		if calls := f.Calls(); calls["RegisterTargets"] < 2 || calls["DeregisterTargets"] < 2 {
			t.Errorf("too few writes under throttling: %v", calls)
		}
	})
	// After the rolls the group holds exactly the live proxies, healthy.
	e.eventually(30*time.Second, "the target group to hold exactly the live proxies", func(ctx context.Context) (bool, error) {
		live, _, err := e.pods(ctx, proxyNS, proxyName)
		if err != nil {
			return false, err
		}
		var want, got []string
		for _, p := range live {
			want = append(want, p.Status.PodIP+":8080=healthy")
		}
		for _, ts := range f.Targets(arn) {
			got = append(got, fmt.Sprintf("%s:%d=%s", ts.ID, ts.Port, ts.State))
		}
		slices.Sort(want)
		return slices.Equal(got, want), nil
	})
	var b v1alpha1.LoadBalancerBinding
	if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: proxyNS, Name: "aws"}, &b); err != nil {
		t.Fatal(err)
	}
	for _, c := range b.Status.Conditions {
		switch c.Type {
		case v1alpha1.ConditionHeld: // False while nothing is held
			if c.Status != metav1.ConditionFalse {
				t.Errorf("binding condition Held = %s (%s: %s)", c.Status, c.Reason, c.Message)
			}
			continue
		case v1alpha1.ConditionTimersConsistent:
			// The fake's timings are scaled down 10×, the attributes it
			// reports (deregistration delay 30s) are not.
			continue
		}
		if c.Status != metav1.ConditionTrue {
			t.Errorf("binding condition %s = %s (%s: %s)", c.Type, c.Status, c.Reason, c.Message)
		}
	}

	// The twin (it must lose requests): the same roll with the readiness
	// gate and drain handshake off and proxies that stop at once on
	// SIGTERM, as behind an ingress without sluice's controller: the NLB
	// still sends new connections to a deregistered pod for a while. First
	// roll to such proxies (the old ones still drain 30s; the test does not
	// wait for them to exit), then roll those.
	if cs.wants("aws-proxy-roll-no-wait-off") {
		e.awsBindingGate(false)
		e.proxyWithoutGate()
		e.rolledOut(proxyNS, proxyName, 2*time.Minute)
		e.holdInFlight()
	}
	run("aws-proxy-roll-no-wait-off", func() {
		e.restartDeployment(proxyNS, proxyName)
		e.settled(proxyNS, proxyName, 2*time.Minute)
	})

	// Last, since it deletes the binding: the load balancer's API fails
	// every call, the deleted binding stays on its finalizer and reports
	// DeletionBlocked once its drain.timeout has passed; annotated to
	// abandon its targets, it is gone at the next reconcile and its
	// targets stay in the target group (serving: the load runs on).
	cs.runNoted("privilege-finalizer", func() string { return e.abandonStuckBinding(f, arn) })
}

// abandonStuckBinding deletes the aws binding while the fake's API fails,
// waits for DeletionBlocked, annotates sluice.dev/abandon-targets and
// returns the summary fields: blocked, abandoned, the seconds from the
// annotation until the binding was gone, and the targets left.
func (e *env) abandonStuckBinding(f *awsfake.Fake, arn string) string {
	e.t.Helper()
	ctx := context.Background()
	b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "aws"}}
	if err := e.update(b, func() { b.Spec.Drain.Timeout = &metav1.Duration{Duration: 3 * time.Second} }); err != nil {
		e.t.Fatalf("shortening the aws binding's drain.timeout: %v", err)
	}
	f.SetFaults(awsfake.Faults{ServerError: 1})
	defer f.SetFaults(awsfake.Faults{})
	before := len(f.Targets(arn))
	if err := e.cl.Delete(ctx, b); err != nil {
		e.t.Fatalf("deleting the aws binding: %v", err)
	}
	var blocked metav1.Condition
	e.eventually(2*time.Minute, "the deleted binding to report DeletionBlocked", func(ctx context.Context) (bool, error) {
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionDeletionBlocked)
		if c == nil || c.Status != metav1.ConditionTrue {
			return false, nil
		}
		blocked = *c
		return true, nil
	})
	if b.DeletionTimestamp == nil || !slices.Contains(b.Finalizers, "sluice.dev/deregister-targets") {
		e.t.Fatalf("binding not Terminating on its finalizer: %v %v", b.DeletionTimestamp, b.Finalizers)
	}
	e.t.Logf("DeletionBlocked %s: %s", blocked.Reason, blocked.Message)
	blockedCount := 0
	if blocked.Status == metav1.ConditionTrue {
		blockedCount = 1
	}
	abandoned := 0
	gen := strconv.FormatInt(b.Generation, 10)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationAbandonTargets, gen)
	start := time.Now()
	if err := e.cl.Patch(ctx, b, client.RawPatch(types.MergePatchType, patch)); err != nil {
		e.t.Fatalf("annotating the binding: %v", err)
	}
	e.eventually(30*time.Second, "the abandoned binding to be gone", func(ctx context.Context) (bool, error) {
		err := e.cl.Get(ctx, client.ObjectKeyFromObject(b), &v1alpha1.LoadBalancerBinding{})
		if apierrors.IsNotFound(err) {
			abandoned = 1
			return true, nil
		}
		return false, err
	})
	gone := time.Since(start)
	left := len(f.Targets(arn))
	if left != before || left == 0 {
		e.t.Errorf("the target group holds %d targets after the binding was abandoned, want the %d it held", left, before)
	}
	return fmt.Sprintf("blocked=%d abandoned=%d gone_after=%.2fs targets_left=%d", blockedCount, abandoned, gone.Seconds(), left)
}

// fakeNLB starts the AWS fake on the cluster bridge (the controller pods
// reach its API there) with one TCP target group of the proxies' port,
// named name and tagged tags, that listens like an NLB, and points the
// load at it: at its single listener, or, when zone is set, at the node of
// that zone with cross-zone load balancing off. The fake is closed when
// the test ends.
func (e *env) fakeNLB(name string, tags map[string]string, zone string) (*awsfake.Fake, string) {
	t := e.t
	t.Helper()
	f, err := awsfake.New(awsfake.Options{Speed: awsSpeed, Zones: []string{"zone-a", "zone-b"}, Address: net.JoinHostPort(e.c.BridgeIP().String(), "0")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	arn, err := f.AddTargetGroup(awsfake.TargetGroup{
		Name: name, TargetType: "ip", Protocol: "TCP", Port: 8080,
		HealthCheckPath: "/healthz", HealthCheckInterval: 10 * time.Second,
		HealthyThreshold: 2, UnhealthyThreshold: 2,
		DeregistrationDelay: 30 * time.Second, NewConnectionWindow: 10 * time.Second,
		Tags: tags, Listen: true, CrossZoneOff: zone != "",
	})
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := f.Listener(arn)
	if zone != "" {
		addr, ok = f.ZoneListener(arn, zone)
	}
	if !ok {
		t.Fatalf("the fake NLB has no listener (zone %q)", zone)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if e.lbPort, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	return f, arn
}

func healthyTargets(f *awsfake.Fake, arn string) int {
	n := 0
	for _, t := range f.Targets(arn) {
		if t.State == "healthy" {
			n++
		}
	}
	return n
}

// awsBindingGate turns the aws binding's readiness gate and drain
// handshake on or off.
func (e *env) awsBindingGate(on bool) {
	e.t.Helper()
	b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "aws"}}
	if err := e.update(b, func() { b.Spec.ReadinessGate, b.Spec.Drain.Handshake = &on, &on }); err != nil {
		e.t.Fatalf("updating the aws binding: %v", err)
	}
}

// proxyWithoutGate rolls the proxies, in one rollout, to pods without the
// readiness gate that stop at SIGKILL speed on SIGTERM: no drain wait
// (--drain-max-wait=0s) and no time for in-flight requests
// (--shutdown-timeout=0s), as an ingress without sluice's controller
// that exits at once.
func (e *env) proxyWithoutGate() {
	e.t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: proxyName}}
	err := e.update(d, func() {
		spec := &d.Spec.Template.Spec
		spec.ReadinessGates = nil
		for i, a := range spec.Containers[0].Args {
			for _, flag := range []string{"--drain-max-wait=", "--shutdown-timeout="} {
				if strings.HasPrefix(a, flag) {
					spec.Containers[0].Args[i] = flag + "0s"
				}
			}
		}
	})
	if err != nil {
		e.t.Fatalf("updating the proxy deployment: %v", err)
	}
}

// rolledOut waits until every replica of the deployment is updated and
// available; unlike settled, old pods may still be terminating.
func (e *env) rolledOut(ns, name string, timeout time.Duration) {
	e.t.Helper()
	e.eventually(timeout, ns+"/"+name+" rolled out", func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return false, err
		}
		want, s := *d.Spec.Replicas, d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want, nil
	})
}

// awsBinding creates the binding of the proxies to the fake target group.
func (e *env) awsBinding(arn string) {
	e.t.Helper()
	gate := true
	b := &v1alpha1.LoadBalancerBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "aws"},
		Spec: v1alpha1.LoadBalancerBindingSpec{
			Selector:      metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": proxyName}},
			Port:          intstr.FromString("http"),
			TargetType:    v1alpha1.TargetIP,
			Provider:      v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{TargetGroupARNs: []string{arn}}},
			ReadinessGate: &gate,
			Drain:         v1alpha1.DrainSpec{Handshake: &gate},
			Publish:       []v1alpha1.PublishAddress{{IP: "127.0.0.1"}},
		},
	}
	if err := e.cl.Create(context.Background(), b); err != nil {
		e.t.Fatalf("creating the aws binding: %v", err)
	}
	// The class's Ingresses take their status from this binding.
	e.kubectl("patch", "ingressclass", "sluice", "--type=merge", "-p", `{"spec":{"parameters":{"name":"aws"}}}`)
}

// fakeAWSEnv is the controller's environment against the AWS fake: a
// region, static credentials, and no instance metadata or config files.
func fakeAWSEnv() []string {
	return []string{"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=secret",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"}
}
