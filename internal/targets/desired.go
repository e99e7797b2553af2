// Package targets turns ingress pods into load-balancer targets and plans
// the changes that bring a target group there. It is the pure middle of the
// controller's target flow:
//
//	pods, nodes ─► Desired ─► Diff(desired, provider.Targets) ─► Plan ─► provider.Register/Deregister
//
// Nothing here does I/O, reads a clock or logs; problems with single objects
// come back as data for the caller to turn into Events.
package targets

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/problem"
)

// TargetType says what is registered. The values match the
// LoadBalancerBinding API (api/v1alpha1).
type TargetType string

const (
	// IP registers every selected pod's IP and container port.
	IP TargetType = "IP"
	// Instance registers every node running a ready selected pod, at the
	// node's InternalIP and a host or node port.
	Instance TargetType = "Instance"
)

// Spec says how pods become targets.
type Spec struct {
	// Type is IP (the default when empty) or Instance.
	Type TargetType
	// Port is the container port, by number or name, for IP targets; the
	// host or node port number for Instance targets.
	Port intstr.IntOrString
	// CheckPort is the node port health-checked instead of Port for
	// Instance targets (lb.Target.CheckPort); 0: Port.
	CheckPort uint16
}

// Labels and taints that take a node's targets out of load balancers.
const (
	// LabelExcludeFromLB is the Kubernetes well-known label; its presence
	// (any value) excludes the node, as for the service controller.
	LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"
	// TaintToBeDeleted is set by the cluster autoscaler on nodes it is
	// about to remove.
	TaintToBeDeleted = "ToBeDeletedByClusterAutoscaler"
	// TaintKarpenterDisruption with the value TaintKarpenterDisrupting is
	// set by Karpenter on a node it is about to disrupt (consolidation,
	// drift, expiry, interruption) before it drains the node.
	TaintKarpenterDisruption = "karpenter.sh/disruption"
	TaintKarpenterDisrupting = "disrupting"
	// LabelZone gives a target its zone.
	LabelZone = "topology.kubernetes.io/zone"
)

// Problem is something wrong with one object (or the spec) that kept it from
// becoming a target: Kind "Pod", "Node" or "Spec". It is the Problem of
// translation too (internal/problem).
type Problem = problem.Problem

// Desired returns the targets for the selected pods, sorted and without
// duplicates. nodes maps node name to Node.
//
// A pod counts while it exists: it has an IP (IP targets) and is not being
// deleted (deletionTimestamp set: deregistering starts at once), not
// Succeeded or Failed, and its node is not being removed (the
// exclude-from-external-load-balancers label, the cluster autoscaler's
// ToBeDeleted taint, or a deletionTimestamp). A cordoned (unschedulable) node
// keeps its targets: cordoning comes before draining, and pulling targets
// then would shed traffic the pods can still serve.
//
// IP targets are registered whether or not the pod is Ready: the load
// balancer's health checks should start early, and its verdict feeds the
// pod's readiness gate. A pod whose node is not (yet) known still counts.
//
// Instance targets are nodes with at least one selected pod whose containers
// are ready. ContainersReady, not Ready, because Ready waits for the
// readiness gate, which waits for the load balancer, which would wait for
// Ready. The node needs an InternalIP; its ID is the last segment of
// spec.providerID (the EC2 instance ID for "aws:///zone/i-…").
func Desired(spec Spec, pods []*corev1.Pod, nodes map[string]*corev1.Node) ([]lb.Target, []Problem) {
	switch cmp.Or(spec.Type, IP) {
	case IP:
		return desiredIP(spec, pods, nodes)
	case Instance:
		return desiredInstance(spec, pods, nodes)
	default:
		return nil, []Problem{{Kind: "Spec", Message: fmt.Sprintf("unknown target type %q", spec.Type)}}
	}
}

func desiredIP(spec Spec, pods []*corev1.Pod, nodes map[string]*corev1.Node) ([]lb.Target, []Problem) {
	var out []lb.Target
	var problems []Problem
	if spec.Port.Type == intstr.Int && !validPort(spec.Port.IntVal) {
		return nil, []Problem{{Kind: "Spec", Message: fmt.Sprintf("port %d out of range", spec.Port.IntVal)}}
	}
	for _, pod := range pods {
		if pod == nil || !live(pod) || pod.Status.PodIP == "" {
			continue
		}
		node := nodes[pod.Spec.NodeName]
		if node != nil && excluded(node) {
			continue
		}
		ip, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil || ip.Zone() != "" {
			problems = append(problems, podProblem(pod, fmt.Sprintf("pod IP %q is not an IP address", pod.Status.PodIP)))
			continue
		}
		port, ok := containerPort(pod, spec.Port)
		if !ok {
			problems = append(problems, podProblem(pod, fmt.Sprintf("no container port named %q", spec.Port.StrVal)))
			continue
		}
		out = append(out, lb.Target{Address: netip.AddrPortFrom(ip.Unmap(), port), Zone: zone(node)})
	}
	return dedupe(out), problems
}

func desiredInstance(spec Spec, pods []*corev1.Pod, nodes map[string]*corev1.Node) ([]lb.Target, []Problem) {
	if spec.Port.Type != intstr.Int || !validPort(spec.Port.IntVal) {
		return nil, []Problem{{Kind: "Spec", Message: fmt.Sprintf("instance targets need a port number 1..65535, not %q", spec.Port.String())}}
	}
	port := uint16(spec.Port.IntVal)
	seen := map[string]bool{}
	var out []lb.Target
	var problems []Problem
	for _, pod := range pods {
		if pod == nil || !live(pod) || pod.Spec.NodeName == "" || seen[pod.Spec.NodeName] || !containersReady(pod) {
			continue
		}
		node := nodes[pod.Spec.NodeName]
		if node == nil {
			continue // not known yet; the next event brings it
		}
		seen[node.Name] = true
		if excluded(node) {
			continue
		}
		ip, ok := internalIP(node)
		if !ok {
			problems = append(problems, Problem{Kind: "Node", Name: node.Name, Message: "no InternalIP address"})
			continue
		}
		out = append(out, lb.Target{Address: netip.AddrPortFrom(ip, port), Zone: zone(node), ID: instanceID(node), CheckPort: spec.CheckPort})
	}
	return dedupe(out), problems
}

// NodeTarget is the Instance target of node: its InternalIP at the spec's
// port, with the node's zone and instance ID, whether or not the node has
// a pod or is leaving. Instance bindings map each selected pod to its
// node's target with it, so that a pod can follow its node target's
// health (readiness gate) and drain. False when the spec is not Instance
// with a port number, or the node is unknown or has no InternalIP.
func NodeTarget(spec Spec, node *corev1.Node) (lb.Target, bool) {
	if spec.Type != Instance || spec.Port.Type != intstr.Int || !validPort(spec.Port.IntVal) || node == nil {
		return lb.Target{}, false
	}
	ip, ok := internalIP(node)
	if !ok {
		return lb.Target{}, false
	}
	return lb.Target{Address: netip.AddrPortFrom(ip, uint16(spec.Port.IntVal)), Zone: zone(node), ID: instanceID(node), CheckPort: spec.CheckPort}, true
}

func validPort(p int32) bool { return p >= 1 && p <= 65535 }

// live: not being deleted and not finished.
func live(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

func containersReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.ContainersReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// excluded: the node is on its way out of the load balancer.
func excluded(node *corev1.Node) bool {
	if node.DeletionTimestamp != nil {
		return true
	}
	if _, ok := node.Labels[LabelExcludeFromLB]; ok {
		return true
	}
	for _, t := range node.Spec.Taints {
		if t.Key == TaintToBeDeleted || t.Key == TaintKarpenterDisruption && t.Value == TaintKarpenterDisrupting {
			return true
		}
	}
	return false
}

func zone(node *corev1.Node) string {
	if node == nil {
		return ""
	}
	return node.Labels[LabelZone]
}

func internalIP(node *corev1.Node) (netip.Addr, bool) {
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Zone() == "" {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// instanceID is the last "/"-separated segment of spec.providerID.
func instanceID(node *corev1.Node) string {
	id := node.Spec.ProviderID
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	return id
}

// containerPort resolves the spec port for one pod: a number as is, a name
// through the pod's container ports.
func containerPort(pod *corev1.Pod, p intstr.IntOrString) (uint16, bool) {
	if p.Type == intstr.Int {
		return uint16(p.IntVal), true
	}
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal && validPort(cp.ContainerPort) {
				return uint16(cp.ContainerPort), true
			}
		}
	}
	return 0, false
}

func podProblem(pod *corev1.Pod, msg string) Problem {
	return Problem{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, Message: msg}
}

// dedupe sorts targets and drops later duplicates (same identity).
func dedupe(ts []lb.Target) []lb.Target {
	slices.SortStableFunc(ts, func(a, b lb.Target) int { return a.Compare(b) })
	return slices.CompactFunc(ts, func(a, b lb.Target) bool { return a.Same(b) })
}
