// Package nodehealth is the per-node health check of instance-mode load
// balancers (`sluice node-health`): the load balancer health-checks a node
// port served by this agent on the host network, and the answer says
// whether the node's ingress replicas can take traffic.
//
//	node + its selected pods (informers) ─► Decide (pure) ─► 200 / 503 + reason
//
// # Contract
//
// The agent answers every GET (any path) with 200 iff all of these hold,
// otherwise 503; the body is one line: "ok: …" or the reason.
//
//   - The node (--node-name) and the replicas on it are known: both
//     informers have synced.
//   - The node is not being detached: it does not carry the annotation
//     --detach-annotation (default "ingress-daemonset-controller/detach")
//     with the value --detach-value (default "true"; an empty
//     --detach-value means any value).
//   - No update is pending for the node: the annotation
//     --update-pending-annotation (default "sluice.dev/update-pending") is
//     absent, empty or "false". Whoever rolls the node's replicas (the
//     IngressDaemonSet controller) sets it to any other value (for
//     example the revision it will roll to) before it replaces the node's
//     pods and removes it once they are updated and ready; the load
//     balancer then stops sending new connections to the node for the
//     whole update.
//   - At least one replica runs on the node: a pod in --namespace that
//     matches --selector, has spec.nodeName = --node-name, is not being
//     deleted and has not finished. Pods being deleted do not count
//     either way (a Deployment does not count them as replicas).
//   - Replicas are ready: with --min-ready 0 (the default) every such pod,
//     with --min-ready N at least N of them (so that a surge pod that is
//     still starting does not fail the node). Ready here is the pod's
//     ContainersReady condition, not Ready: in an Instance binding with a
//     readiness gate, Ready waits for the node's target to be healthy,
//     which waits for this check.
package nodehealth

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Defaults of the annotation contract (see the package doc).
const (
	DefaultDetachAnnotation        = "ingress-daemonset-controller/detach"
	DefaultDetachValue             = "true"
	DefaultUpdatePendingAnnotation = "sluice.dev/update-pending"
)

// Rules are the node-health settings.
type Rules struct {
	// DetachAnnotation and DetachValue mark a node being detached; an
	// empty DetachValue matches any value. An empty DetachAnnotation
	// turns the check off.
	DetachAnnotation, DetachValue string
	// UpdatePendingAnnotation marks a node whose replicas are about to
	// be replaced (any value but "" and "false"). Empty turns it off.
	UpdatePendingAnnotation string
	// MinReady: 0 wants every replica ready; N > 0 wants at least N.
	MinReady int
}

// Verdict is the health check's answer.
type Verdict struct {
	Healthy bool
	Reason  string
}

// Decide answers the health check for node (nil: not known) from the pods
// the selector matched on it. It is pure.
func Decide(r Rules, node *corev1.Node, pods []*corev1.Pod) Verdict {
	if node == nil {
		return Verdict{Reason: "node not found"}
	}
	if r.DetachAnnotation != "" {
		if v, ok := node.Annotations[r.DetachAnnotation]; ok && (r.DetachValue == "" || v == r.DetachValue) {
			return Verdict{Reason: fmt.Sprintf("node %s is being detached (annotation %s=%s)", node.Name, r.DetachAnnotation, v)}
		}
	}
	if r.UpdatePendingAnnotation != "" {
		if v := node.Annotations[r.UpdatePendingAnnotation]; v != "" && v != "false" {
			return Verdict{Reason: fmt.Sprintf("update pending on node %s (annotation %s=%s)", node.Name, r.UpdatePendingAnnotation, v)}
		}
	}
	var ready, total int
	var notReady []string
	for _, p := range pods {
		if p == nil || p.Spec.NodeName != node.Name || !live(p) {
			continue
		}
		total++
		if containersReady(p) {
			ready++
		} else {
			notReady = append(notReady, p.Name)
		}
	}
	slices.Sort(notReady)
	switch {
	case total == 0:
		return Verdict{Reason: fmt.Sprintf("no replica runs on node %s", node.Name)}
	case r.MinReady > 0 && ready < r.MinReady:
		return Verdict{Reason: fmt.Sprintf("%d of %d replicas ready on node %s, want at least %d (not ready: %s)", ready, total, node.Name, r.MinReady, strings.Join(notReady, ", "))}
	case r.MinReady <= 0 && ready < total:
		return Verdict{Reason: fmt.Sprintf("%d of %d replicas ready on node %s (not ready: %s)", ready, total, node.Name, strings.Join(notReady, ", "))}
	}
	return Verdict{Healthy: true, Reason: fmt.Sprintf("ok: %d of %d replicas ready on node %s", ready, total, node.Name)}
}

func live(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func containersReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.ContainersReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
