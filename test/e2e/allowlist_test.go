//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
)

// Issue 24, item 3: allow-lists that name namespaces. A platform that
// widened --binding-namespaces to tenants must not let a tenant's binding
// drive the platform's target group by naming itself like the platform's
// binding (tag discovery matches the name only), nor let a tenant run an
// IngressDaemonSet (nodeName pinning, a health checker on the host
// network). Results are read from the load balancer (the AWS fake's
// targets and API calls, HAProxy's servers) and the API server (objects
// created), never from sluice's own status; the refusals from the
// objects' conditions and Events.

const (
	// tenantNoTag may create bindings, but no tag entry names it.
	tenantNoTag = "tenant-a"
	// tenantTagged may discover groups by tag for any binding name
	// (tag:sluice.dev/frontend=tenant-b/*): the run-time conflict check
	// is what stops it from taking the platform's group.
	tenantTagged = "tenant-b"
	// tenantIDS is a binding namespace but not an IngressDaemonSet one.
	tenantIDS = "tenant-ids"
)

// awsTagCluster is TestAWS's --aws-cluster: the platform's target group
// carries it, so a binding named like the platform's ("aws") discovers it.
const awsTagCluster = "e2e-sla"

// awsAllowListArgs are TestAWS's controller flags for the case (its chart
// values make the tenants' namespaces binding namespaces): the platform's
// group is allowed by ARN, and tenant-b may discover groups by tag.
func awsAllowListArgs(arn string) []string {
	return []string{"--aws-cluster=" + awsTagCluster,
		"--allowed-aws-target-groups=" + arn + ",tag:sluice.dev/frontend=" + tenantTagged + "/*"}
}

// tagBindingCase is e2e privilege-tag-binding: in each tenant namespace a
// binding named "aws", like the platform's, that lists no ARN and selects
// no pod, so that acting it would deregister every proxy from the
// platform's group (found by the tags sluice.dev/cluster and
// sluice.dev/frontend=aws). tenant-a's is Forbidden (no tag entry names
// tenant-a), tenant-b's is a GroupConflict (its tag entry allows it, the
// group found at run time is the platform's). Returns the action and the
// summary fields, read from the fake after the case's load tail.
func (e *env) tagBindingCase(f *awsfake.Fake, arn string) (action func(), extra func() string) {
	var before []string
	var calls map[string]int
	action = func() {
		e.createNamespaces(tenantNoTag, tenantTagged)
		before, calls = awsTargetList(f, arn), f.Calls()
		if len(before) == 0 {
			e.t.Fatal("privilege-tag-binding: the platform's target group is empty before the case: nothing to compare")
		}
		for _, ns := range []string{tenantNoTag, tenantTagged} {
			e.create(tenantAWSBinding(ns))
		}
		e.refusedBinding(tenantNoTag, "Forbidden")
		e.refusedBinding(tenantTagged, "GroupConflict")
	}
	extra = func() string {
		after, now := awsTargetList(f, arn), f.Calls()
		changed := changedEntries(before, after)
		reg, dereg := now["RegisterTargets"]-calls["RegisterTargets"], now["DeregisterTargets"]-calls["DeregisterTargets"]
		if changed+reg+dereg != 0 {
			e.t.Errorf("privilege-tag-binding: the platform's target group changed while only tenants' bindings were created: "+
				"targets %v → %v, RegisterTargets +%d, DeregisterTargets +%d", before, after, reg, dereg)
		}
		// The refusals, counted from the bindings' conditions as the API
		// server holds them now.
		refused := map[string]int{}
		for _, ns := range []string{tenantNoTag, tenantTagged} {
			b := v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws"}}
			if err := e.cl.Get(context.Background(), client.ObjectKeyFromObject(&b), &b); err == nil {
				if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
					refused[c.Reason]++
				}
			}
			if err := e.cl.Delete(context.Background(), &b); client.IgnoreNotFound(err) != nil {
				e.t.Errorf("deleting %s/aws: %v", ns, err)
			}
		}
		return fmt.Sprintf("forbidden=%d group_conflict=%d targets_changed=%d register_calls=%d deregister_calls=%d",
			refused["Forbidden"], refused["GroupConflict"], changed, reg, dereg)
	}
	return action, extra
}

// tenantAWSBinding is a tenant's binding named like the platform's, with
// no ARN (discovery by tag) and a selector no pod matches.
func tenantAWSBinding(ns string) *v1alpha1.LoadBalancerBinding {
	return &v1alpha1.LoadBalancerBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws"},
		Spec: v1alpha1.LoadBalancerBindingSpec{
			Selector:   metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "tenant-proxy"}},
			Port:       intstr.FromInt32(8080),
			TargetType: v1alpha1.TargetIP,
			Provider:   v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{Region: "us-east-1"}},
		},
	}
}

// tenantIDSCase is e2e privilege-tenant-ids: an IngressDaemonSet like the
// platform's, in a namespace that is a binding namespace but not an
// IngressDaemonSet one (--ingressdaemonset-namespaces defaults to the
// controller's own). It is refused (a Forbidden Event), and the API server holds
// no Deployment, DaemonSet, budget or pod in its namespace and no node
// detached by it; HAProxy's servers stay as they were.
func (e *env) tenantIDSCase() (action func(), extra func() string) {
	var before []string
	action = func() {
		e.createNamespaces(tenantIDS)
		before = e.haproxyServerList()
		if len(before) == 0 {
			e.t.Fatal("privilege-tenant-ids: HAProxy lists no sluice server before the case: nothing to compare")
		}
		ids := e.ingressDaemonSet()
		ids.Namespace = tenantIDS
		e.create(ids)
		// The Warning Event is what its owner sees: the chart lets the
		// controller write IngressDaemonSets only in the allowed
		// namespaces, so no condition is written here.
		e.eventually(time.Minute, "the tenant's IngressDaemonSet refused (Forbidden)", func(ctx context.Context) (bool, error) {
			return e.hasWarningEvent(ctx, tenantIDS, "IngressDaemonSet", idsName, "Forbidden")
		})
	}
	extra = func() string {
		ctx := context.Background()
		var deploys appsv1.DeploymentList
		var daemonsets appsv1.DaemonSetList
		var budgets policyv1.PodDisruptionBudgetList
		var pods corev1.PodList
		created := 0
		for _, l := range []client.ObjectList{&deploys, &daemonsets, &budgets, &pods} {
			if err := e.cl.List(ctx, l, client.InNamespace(tenantIDS)); err != nil {
				e.t.Fatalf("listing %T: %v", l, err)
			}
			created += meta.LenList(l)
		}
		var nl corev1.NodeList
		if err := e.cl.List(ctx, &nl); err != nil {
			e.t.Fatal(err)
		}
		detached := 0
		for _, n := range nl.Items {
			if n.Annotations[v1alpha1.AnnotationDetachedBy] == tenantIDS+"/"+idsName {
				detached++
			}
		}
		var x v1alpha1.IngressDaemonSet
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: tenantIDS, Name: idsName}, &x); err != nil {
			e.t.Fatal(err)
		}
		finalizers := len(x.Finalizers)
		changed := changedEntries(before, e.haproxyServerList())
		if created+detached+finalizers+changed != 0 {
			e.t.Errorf("privilege-tenant-ids: the refused IngressDaemonSet got %d objects in %s, %d nodes detached, finalizers %v; %d HAProxy servers changed",
				created, tenantIDS, detached, x.Finalizers, changed)
		}
		if err := e.cl.Delete(ctx, &x); client.IgnoreNotFound(err) != nil {
			e.t.Errorf("deleting the tenant's IngressDaemonSet: %v", err)
		}
		forbidden := 0
		if ok, _ := e.hasWarningEvent(ctx, tenantIDS, "IngressDaemonSet", idsName, "Forbidden"); ok {
			forbidden = 1
		}
		return fmt.Sprintf("forbidden=%d objects_created=%d nodes_detached=%d targets_changed=%d", forbidden, created, detached, changed)
	}
	return action, extra
}

// createNamespaces creates the namespaces that do not exist yet.
func (e *env) createNamespaces(names ...string) {
	e.t.Helper()
	for _, ns := range names {
		err := e.cl.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if client.IgnoreAlreadyExists(err) != nil {
			e.t.Fatalf("creating namespace %s: %v", ns, err)
		}
	}
}

// refusedBinding waits for ns/aws's Ready condition to be False with
// reason and for a Warning Event of that reason on it.
func (e *env) refusedBinding(ns, reason string) {
	e.t.Helper()
	e.eventually(time.Minute, fmt.Sprintf("%s/aws refused (%s)", ns, reason), func(ctx context.Context) (bool, error) {
		var b v1alpha1.LoadBalancerBinding
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "aws"}, &b); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
			return false, fmt.Errorf("ready %+v", c)
		}
		return e.hasWarningEvent(ctx, ns, "LoadBalancerBinding", "aws", reason)
	})
}

// hasWarningEvent reports whether a Warning Event with reason regards kind ns/name.
func (e *env) hasWarningEvent(ctx context.Context, ns, kind, name, reason string) (bool, error) {
	var list eventsv1.EventList
	if err := e.cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return false, err
	}
	for _, ev := range list.Items {
		if ev.Regarding.Kind == kind && ev.Regarding.Name == name && ev.Type == corev1.EventTypeWarning && ev.Reason == reason {
			return true, nil
		}
	}
	return false, fmt.Errorf("no %s Event on %s %s/%s", reason, kind, ns, name)
}

// awsTargetList lists a target group's targets as the fake holds them
// ("id:port"), sorted.
func awsTargetList(f *awsfake.Fake, arn string) []string {
	var out []string
	for _, t := range f.Targets(arn) {
		out = append(out, fmt.Sprintf("%s:%d", t.ID, t.Port))
	}
	slices.Sort(out)
	return out
}

// haproxyServerList lists sluice's servers in HAProxy's backend ("name
// address"), sorted, from show servers state.
func (e *env) haproxyServerList() []string {
	var out []string
	for _, l := range strings.Split(e.runtime(e.t, e.lbSock, "show servers state "+backend), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[1] == backend && strings.HasPrefix(f[3], "sluice-") {
			out = append(out, f[3]+" "+f[4])
		}
	}
	slices.Sort(out)
	return out
}

// changedEntries counts the entries in only one of a and b (both sorted,
// without duplicates).
func changedEntries(a, b []string) int {
	n := 0
	for _, x := range a {
		if !slices.Contains(b, x) {
			n++
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			n++
		}
	}
	return n
}
