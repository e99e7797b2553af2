//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb/aws"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
	"sluice.dev/sluice/internal/targets"
)

// TestFloorAWS rolls the proxies behind the fake NLB with cross-zone load
// balancing off and two zones, zone-b holding a single proxy replica
// (three replicas, nodes node-1 and node-3 in zone-a, node-2 in zone-b;
// maxSurge 1, maxUnavailable 0, the default soft topology spread by zone,
// ScheduleAnyway). zone-b's node carries a PreferNoSchedule taint during
// the rollouts, as a fuller or costlier zone would: the scheduler then
// puts every surge pod it may place freely in zone-a. The load goes to
// zone-b's load-balancer node only, as from clients that cached its
// address: whenever zone-b has no healthy target, they get resets. The
// provider is sampled every 100 ms for min_zone_healthy (zone-b's fewest
// healthy targets).
//
//   - floor-rollout: zoneFloor 1 (the default): the steering webhook puts
//     the first surge pod in zone-b (pod-deletion-cost alone could not:
//     it orders deletions, it does not place pods); failed=0.
//   - floor-rollout-off: zoneFloor 0 (no steering, no pod-deletion-cost),
//     the twin: every surge pod lands in zone-a, and the ReplicaSet
//     finally deletes zone-b's last pod; it must show that (failed>0 or
//     min_zone_healthy=0).
func TestFloorAWS(t *testing.T) {
	// sluice from its chart with the webhooks on (the API server calls the
	// steering webhook through the chart's Service, whichever controller
	// replica it picks); the test creates the aws binding.
	var f *awsfake.Fake
	var arn string
	h := installChart(t, "sfa", chartOptions{lb: func(e *env) string {
		f, arn = e.fakeNLB("sluice-floor", map[string]string{aws.OwnedTag: "true"}, "zone-b")
		return chartAWSValues(f.URL(), "--allowed-aws-target-groups="+arn) + `  evictionWebhook: {enabled: true}
bindings: []
ingressClasses: [{name: sluice, binding: aws}]
`
	}})
	e := h.env

	e.create(echoObjects()...)
	e.awsBinding(arn)
	e.eventually(30*time.Second, "the zone steering webhook configured", func(ctx context.Context) (bool, error) {
		return e.webhooksReady(ctx), nil
	})
	e.settled(appNS, appName, 2*time.Minute)
	e.settled(proxyNS, proxyName, 2*time.Minute)
	e.eventually(60*time.Second, "a request through zone-b's node", func(context.Context) (bool, error) {
		code, body, err := e.get()
		return err == nil && code == 200 && strings.Contains(body, "echo"), err
	})
	e.oneIn(t, f, arn, "zone-b")
	if n := zoneHealthy(f, arn, "zone-b"); n != 1 {
		t.Fatalf("zone-b holds %d healthy targets, want the single replica: %+v", n, f.Targets(arn))
	}
	e.preferNoSchedule(t, "zone-b")

	cs := newCases(e)
	roll := func() {
		e.restartDeployment(proxyNS, proxyName)
		e.settled(proxyNS, proxyName, 3*time.Minute)
	}
	s := sampleZone(f, arn, "zone-b")
	cs.runWith("floor-rollout", s, roll)

	if cs.wants("floor-rollout-off") {
		off := int32(0)
		b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "aws"}}
		if err := e.update(b, func() { b.Spec.ZoneFloor = &off }); err != nil {
			t.Fatal(err)
		}
		e.clearDeletionCosts(t)
		e.oneIn(t, f, arn, "zone-b")
	}
	// The first roll may have left zone-b with two replicas (the spread
	// is a preference): the line says how many it started with.
	start := zoneHealthy(f, arn, "zone-b")
	offZone := sampleZone(f, arn, "zone-b")
	cs.runWith("floor-rollout-off", func() string {
		return offZone() + fmt.Sprintf(" zone_b_start=%d", start)
	}, roll)
}

// zoneHealthy counts the healthy targets of zone in the fake group.
func zoneHealthy(f *awsfake.Fake, arn, zone string) int {
	n := 0
	for _, t := range f.Targets(arn) {
		if t.Zone == zone && t.State == "healthy" {
			n++
		}
	}
	return n
}

// sampleZone samples zone's healthy targets from the provider every
// 100 ms from now on; the returned func stops and gives the field.
func sampleZone(f *awsfake.Fake, arn, zone string) func() string {
	stop := make(chan struct{})
	var mu sync.Mutex
	least := -1
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			n := zoneHealthy(f, arn, zone)
			mu.Lock()
			if least < 0 || n < least {
				least = n
			}
			mu.Unlock()
		}
	}()
	return func() string {
		close(stop)
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("min_zone_healthy=%d", least)
	}
}

// clearDeletionCosts removes pod-deletion-cost from the proxies (the floor
// off leaves what it set before).
func (e *env) clearDeletionCosts(t *testing.T) {
	t.Helper()
	live, _, err := e.pods(context.Background(), proxyNS, proxyName)
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, targets.AnnotationDeletionCost)
	for _, p := range live {
		if _, err := e.kube.CoreV1().Pods(p.Namespace).Patch(context.Background(), p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// oneIn deletes proxies in zone until it holds one (their replacements
// may land in either zone), at most a few times.
func (e *env) oneIn(t *testing.T, f *awsfake.Fake, arn, zone string) {
	t.Helper()
	ctx := context.Background()
	for range 6 {
		live, _, err := e.pods(ctx, proxyNS, proxyName)
		if err != nil {
			t.Fatal(err)
		}
		var in []string
		for _, p := range live {
			n, err := e.kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err == nil && n.Labels["topology.kubernetes.io/zone"] == zone {
				in = append(in, p.Name)
			}
		}
		if len(in) <= 1 {
			break
		}
		if err := e.kube.CoreV1().Pods(proxyNS).Delete(ctx, in[0], metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.settled(proxyNS, proxyName, 3*time.Minute)
	}
	e.eventually(60*time.Second, zone+" healthy", func(context.Context) (bool, error) {
		return zoneHealthy(f, arn, zone) >= 1, nil
	})
}

// preferNoSchedule taints zone's nodes PreferNoSchedule until the test
// ends.
func (e *env) preferNoSchedule(t *testing.T, zone string) {
	t.Helper()
	ctx := context.Background()
	nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "topology.kubernetes.io/zone=" + zone})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes of %s: %v", zone, err)
	}
	for _, n := range nodes.Items {
		// The kubelet writes the Node's status meanwhile: a conflict
		// means read it again.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			fresh, err := e.kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			fresh.Spec.Taints = append(fresh.Spec.Taints, corev1.Taint{Key: "e2e.sluice.dev/fuller", Effect: corev1.TaintEffectPreferNoSchedule})
			_, err = e.kube.CoreV1().Nodes().Update(ctx, fresh, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("tainting %s: %v", n.Name, err)
		}
	}
}
