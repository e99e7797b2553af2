package nodes

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/targets"
)

// Taints that mark a node as leaving (as package targets reads them): its
// replicas are detached and removed before the node goes.
const (
	TaintToBeDeleted         = targets.TaintToBeDeleted
	TaintKarpenterDisruption = targets.TaintKarpenterDisruption
)

// NodeLB is what the load balancer says about one node's instance target,
// from the Instance bindings that select the IngressDaemonSet's pods.
type NodeLB struct {
	// Served: at least one Instance binding selects the pods. When false
	// the rest is meaningless and the grace and timestamp modes apply.
	Served bool
	// Synced: every serving binding has listed its groups since the
	// controller started; until then nothing is known.
	Synced bool
	// Listed: the node's target is still in some group (not yet drained).
	Listed bool
	// Healthy: the node's target is healthy in every group.
	Healthy bool
	// DrainTimeout is the longest the binding waits for a drain (the
	// largest of the serving bindings'); the detachment goes on after it.
	DrainTimeout time.Duration
}

// Input is everything Plan looks at.
type Input struct {
	// IDS is the IngressDaemonSet (not being deleted).
	IDS *v1alpha1.IngressDaemonSet
	// Nodes are all the cluster's nodes.
	Nodes []*corev1.Node
	// Deployments are the Deployments IDS controls.
	Deployments []*appsv1.Deployment
	// LB maps a node name to its load balancer view; a missing node is not
	// served by any Instance binding.
	LB map[string]NodeLB
	// Now is the instant the grace periods and the drain timeout are
	// measured against.
	Now time.Time
}

// Detach asks the reconciler to annotate Node to detach it, with the
// start instant and the IngressDaemonSet that detached it.
type Detach struct {
	Node string
}

// Plan is the next step: apply every part, then plan again on the next
// event or after RequeueAfter.
type Plan struct {
	// Create and Update are desired Deployments (Update: write their
	// labels, the object-hash annotation and spec over the live one).
	Create, Update []*appsv1.Deployment
	// Delete names Deployments to delete (their node left).
	Delete []string
	// Detach lists nodes to annotate; Reattach nodes (by name) whose
	// detach annotations to remove.
	Detach   []Detach
	Reattach []string
	// Failed names the nodes whose Deployment exceeded its progress
	// deadline: the rollout stops until the template changes again.
	Failed []string
	// Waiting says, per node, what the rollout waits for.
	Waiting map[string]string
	// Problems are nodes that cannot get a Deployment, as text.
	Problems []string
	// Counts is the status's node counts.
	Counts v1alpha1.NodeCounts
	// Rolling: some node is outdated or in progress.
	Rolling bool
	// RequeueAfter, when not 0, is when a grace period or timeout ends.
	RequeueAfter time.Duration
}

// nodeState is one matching node's rollout state.
type nodeState struct {
	node     *corev1.Node
	deploy   *appsv1.Deployment
	lb       NodeLB
	leaving  bool
	detached bool
	ours     bool // detached by this IngressDaemonSet
	outdated bool
	ready    bool // every replica updated, ready and available, no old pod left
	failed   bool
}

// busy: the node counts against the rollout budget (it is detached, not
// ready, failed, or its target is not healthy).
func (s *nodeState) busy() bool {
	if s.detached || s.failed || s.deploy == nil || !s.ready {
		return true
	}
	return s.lb.Served && !s.lb.Healthy
}

// Compute returns the next step for in. It is deterministic: nodes are
// taken in name order.
func Compute(in Input) Plan {
	ids := in.IDS
	p := Plan{Waiting: map[string]string{}}
	for _, g := range ids.Spec.Template.Spec.ReadinessGates {
		if g.ConditionType == v1alpha1.ReadinessGateHealthy {
			p.Problems = append(p.Problems, "the template lists the readiness gate "+v1alpha1.ReadinessGateHealthy+
				": pods on a detached node have no target to turn it True, so a rollout with detachment stalls; remove it")
		}
	}
	sel := labels.SelectorFromSet(ids.Spec.NodeSelector)
	byNode := map[string]*appsv1.Deployment{}
	for _, d := range in.Deployments {
		byNode[d.Spec.Template.Spec.NodeName] = d
	}
	nodes := slices.Clone(in.Nodes)
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
	kept := map[string]bool{}
	var states []*nodeState
	owner := ids.Namespace + "/" + ids.Name
	for _, n := range nodes {
		if n.DeletionTimestamp != nil {
			continue
		}
		if !sel.Matches(labels.Set(n.Labels)) {
			// A node that left the selector keeps nothing of ours.
			if n.Annotations[v1alpha1.AnnotationDetachedBy] == owner {
				p.Reattach = append(p.Reattach, n.Name)
			}
			continue
		}
		if why := checkNodeName(ids, n.Name); why != "" {
			p.Problems = append(p.Problems, why)
			continue
		}
		d := byNode[n.Name]
		if d != nil && d.Name != DeploymentName(ids, n.Name) {
			d = nil // not ours by name: leave it to the deletion below
		}
		s := &nodeState{node: n, deploy: d, lb: in.LB[n.Name], leaving: leaving(n), detached: Detached(ids, n),
			ours: n.Annotations[v1alpha1.AnnotationDetachedBy] == owner}
		if d != nil {
			kept[d.Name] = true
			s.outdated = d.Annotations[v1alpha1.AnnotationObjectHash] != Deployment(ids, n.Name).Annotations[v1alpha1.AnnotationObjectHash]
			s.ready = rolledOut(d)
			s.failed = !s.outdated && deadlineExceeded(d)
		}
		states = append(states, s)
	}
	for _, d := range in.Deployments {
		if !kept[d.Name] {
			p.Delete = append(p.Delete, d.Name)
		}
	}
	slices.Sort(p.Delete)

	_, budget := DetachMode(ids)
	busy, stopped := 0, false
	for _, s := range states {
		if s.leaving {
			continue
		}
		if s.busy() {
			busy++
		}
		if s.failed {
			stopped = true
			p.Failed = append(p.Failed, s.node.Name)
		}
	}
	var candidates []*nodeState
	for _, s := range states {
		name := s.node.Name
		desired := Deployment(ids, name)
		switch {
		case s.leaving:
			p.leave(in, s)
		case s.deploy == nil:
			// A joining node starts detached: the load balancer gets it
			// once every replica is ready (reattach below), not as soon as
			// the first one is.
			p.Create = append(p.Create, desired)
			if !s.detached || !s.ours {
				p.Detach = append(p.Detach, Detach{Node: name})
			}
			p.Counts.Desired++
			p.Counts.Updated++
		default:
			p.Counts.Desired++
			if !s.outdated {
				p.Counts.Updated++
			}
			if s.ready && !s.detached {
				p.Counts.Ready++
			}
			switch {
			case s.failed:
				p.Waiting[name] = "failed: " + progressMessage(s.deploy)
			case !s.outdated && s.detached:
				if !s.ours {
					p.Waiting[name] = "detached by someone else"
				} else if s.ready {
					p.Reattach = append(p.Reattach, name)
				} else {
					p.Waiting[name] = "pods to become ready"
				}
			case !s.outdated:
				if *s.deploy.Spec.Replicas != PodsPerNode(ids) {
					p.Update = append(p.Update, desired)
				}
				if s.busy() && s.ready {
					p.Waiting[name] = "the load balancer to report the node healthy"
				}
			case s.detached:
				if ok, why, after := p.drained(in, s); ok {
					p.Update = append(p.Update, desired)
				} else {
					p.Waiting[name] = why
					p.requeue(after)
				}
			default:
				candidates = append(candidates, s)
			}
		}
		if s.detached {
			p.Counts.Detached++
		}
		if !s.leaving && (s.outdated || s.busy()) {
			p.Rolling = true
		}
	}
	// Detach outdated nodes within the budget, the unavailable ones first
	// (they hold a slot already).
	slices.SortStableFunc(candidates, func(a, b *nodeState) int {
		return cmp.Compare(boolInt(!a.busy()), boolInt(!b.busy()))
	})
	for _, s := range candidates {
		name := s.node.Name
		switch {
		case stopped:
			p.Waiting[name] = "the rollout is stopped: a node failed"
		case s.busy() && busy <= budget:
			p.Detach = append(p.Detach, Detach{Node: name})
		case !s.busy() && busy < budget:
			busy++
			p.Detach = append(p.Detach, Detach{Node: name})
		default:
			p.Waiting[name] = fmt.Sprintf("its turn (%d of %d nodes rolling)", busy, budget)
		}
	}
	return p
}

// leave detaches a leaving node and removes its Deployment once the load
// balancer let go.
func (p *Plan) leave(in Input, s *nodeState) {
	if s.deploy == nil {
		return
	}
	if !s.detached {
		p.Detach = append(p.Detach, Detach{Node: s.node.Name})
		return
	}
	if ok, why, after := p.drained(in, s); ok {
		p.Delete = append(p.Delete, s.deploy.Name)
	} else {
		p.Waiting[s.node.Name] = "leaving: " + why
		p.requeue(after)
	}
}

// drained reports whether a detached node's traffic is gone: the serving
// bindings' groups no longer list its target (or their drain timeout
// passed since the detachment started); without a binding, the grace
// period after the detachment and the annotated timestamp's grace period
// have passed. When not, it says why and, for timers, how long is left.
func (p *Plan) drained(in Input, s *nodeState) (bool, string, time.Duration) {
	start, ok := parseTime(s.node.Annotations[v1alpha1.AnnotationDetachStarted])
	if !ok || !s.ours {
		// Detached by someone else (node-detacher), or the mark is lost:
		// take the detachment over and mark it now.
		p.Detach = append(p.Detach, Detach{Node: s.node.Name})
		return false, "the detachment to be recorded", 0
	}
	ru := in.IDS.Spec.UpdateStrategy.RollingUpdate
	if s.lb.Served {
		if s.lb.Synced && !s.lb.Listed {
			return true, "", 0
		}
		if left := start.Add(s.lb.DrainTimeout).Sub(in.Now); left > 0 {
			return false, "the load balancer to drain the node", left
		}
		return true, "", 0
	}
	if a := ru.AnnotateNodeToDetach; a != nil && a.GracePeriodSeconds > 0 {
		if left := start.Add(seconds(a.GracePeriodSeconds)).Sub(in.Now); left > 0 {
			return false, "the detachment grace period", left
		}
	}
	if w := ru.WaitForDetachmentByAnnotatedTimestamp; w != nil {
		raw, ok := s.node.Annotations[w.Key]
		if !ok || raw == "" {
			return false, "the node's detachment timestamp " + w.Key, 0
		}
		at, ok := parseTime(raw)
		if !ok {
			return false, fmt.Sprintf("a valid RFC 3339 timestamp in %s, not %q", w.Key, raw), 0
		}
		if left := at.Add(seconds(w.GracePeriodSeconds)).Sub(in.Now); left > 0 {
			return false, "the grace period after the node's detachment timestamp", left
		}
	}
	return true, "", 0
}

func (p *Plan) requeue(after time.Duration) {
	if after > 0 && (p.RequeueAfter == 0 || after < p.RequeueAfter) {
		p.RequeueAfter = after
	}
}

// leaving: the node is cordoned (kubectl drain) or marked for removal
// (cluster autoscaler, Karpenter). The exclude-from-external-load-balancers
// label is not leaving: the controller sets it itself to detach a node.
func leaving(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return true
	}
	for _, t := range n.Spec.Taints {
		if t.Key == TaintToBeDeleted || t.Key == TaintKarpenterDisruption {
			return true
		}
	}
	return false
}

// rolledOut: the Deployment controller has seen the current spec and every
// replica is updated, ready and available, with no old pod left. (The
// seed asked for more updated replicas than desired, which never held.)
func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	return st.ObservedGeneration >= d.Generation &&
		st.UpdatedReplicas == want && st.ReadyReplicas == want &&
		st.AvailableReplicas == want && st.Replicas == want
}

func deadlineExceeded(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded"
		}
	}
	return false
}

func progressMessage(d *appsv1.Deployment) string {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return c.Message
		}
	}
	return "progress deadline exceeded"
}

func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

func seconds(n int32) time.Duration { return time.Duration(n) * time.Second }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
