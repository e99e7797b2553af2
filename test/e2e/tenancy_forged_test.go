//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// forgedRequests is how many requests tenancy-forged-endpoint-ip sends.
const forgedRequests = 200

// forgedEndpointIP: team B writes an EndpointSlice for its Service that
// names its own Pod as targetRef twice, once with the Pod's own IP and
// once with team A's Pod IP. The proxies use the first and refuse the
// second (the address is not the targetRef Pod's): every request to B's
// host is answered by B's pod, none reaches A's, and B's Ingress gets an
// EndpointsRefused Event naming the slice and A's address, nothing else
// of A. Without the Pod check half the requests would reach A's pod.
//
//	e2e tenancy-forged-endpoint-ip: requests=N failed=F reached_victim=V
//
// failed (not answered 200 by B's pod) and reached_victim must be 0.
func (tn *tenancy) forgedEndpointIP() {
	const name = "tenancy-forged-endpoint-ip"
	if !tn.cs.wants(name) {
		return
	}
	e, t := tn.e, tn.e.t
	ctx := context.Background()
	pod := func(ns, app string) corev1.Pod {
		live, _, err := e.pods(ctx, ns, app)
		if err != nil || len(live) == 0 || live[0].Status.PodIP == "" {
			t.Fatalf("pod of %s/%s: %v %v", ns, app, live, err)
		}
		return live[0]
	}
	victim, own := pod(teamA, echoA), pod(teamB, echoB)
	port, portName := int32(8080), "http"
	ownRef := &corev1.ObjectReference{Kind: "Pod", Namespace: teamB, Name: own.Name}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: teamB, Name: "forged-ip", Labels: map[string]string{discoveryv1.LabelServiceName: "forged"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{own.Status.PodIP}, TargetRef: ownRef},
			{Addresses: []string{victim.Status.PodIP}, TargetRef: ownRef},
		},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
	}
	ing := ingress(teamB, "forged", classPublic, rule("forged.b.test", prefix("/", "forged")))
	objs := []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "forged"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(port)}}}},
		slice, ing,
	}
	e.create(objs...)
	defer tn.remove(append(objs, tn.settle(classPublic, fleetPublic, "forged"))...)

	note := tn.warned(ing, "EndpointsRefused")
	want := fmt.Sprintf("%s of EndpointSlice %q (address is not the targetRef Pod's)", victim.Status.PodIP, slice.Name)
	if !strings.Contains(note, want) || strings.Contains(note, teamA) || strings.Contains(note, victim.Name) || strings.Contains(note, own.Status.PodIP+" ") {
		t.Errorf("%s: Event %q: want %q, and nothing of A but its address, and not B's true endpoint", name, note, want)
	}
	for _, ip := range tn.podIPs(proxyNS, fleetPublic) {
		e.eventually(tenancyTimeout, "the forged slice judged by "+ip, func(context.Context) (bool, error) {
			n, err := scrapeLabelled(net.JoinHostPort(ip, "9090"), "sluice_endpoints_refused", "")
			return err == nil && n >= 1, nil
		})
	}
	tn.until(tn.public(), "forged.b.test", "/", 200, echoB)

	var failed, reached int
	for i := range forgedRequests {
		a, err := get(tn.public(), "forged.b.test", fmt.Sprintf("/r%d", i))
		if a.from(echoA) {
			reached++
		}
		if err != nil || a.status != 200 || !a.from(echoB) {
			if failed < 5 {
				t.Logf("%s: request %d: %v, error %v", name, i, a, err)
			}
			failed++
		}
	}
	line := fmt.Sprintf("e2e %s: requests=%d failed=%d reached_victim=%d", name, forgedRequests, failed, reached)
	t.Log(line)
	writeSummary([]string{line})
	if failed != 0 || reached != 0 {
		t.Errorf("%s: %d of %d requests failed, %d reached team A's pod", name, failed, forgedRequests, reached)
	}
}
