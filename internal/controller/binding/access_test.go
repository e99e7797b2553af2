package binding_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	ct "sluice.dev/sluice/internal/controller/controllertest"
)

func TestAccessCheck(t *testing.T) {
	haproxy := func(ns, api string) *v1alpha1.LoadBalancerBinding {
		b := ct.Binding("web")
		b.Namespace = ns
		b.Spec.Provider.HAProxy.RuntimeAPI = api
		return b
	}
	aws := func(name string, arns ...string) *v1alpha1.LoadBalancerBinding {
		b := ct.Binding(name)
		b.Spec.Provider = v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{TargetGroupARNs: arns}}
		return b
	}
	inNS := func(ns string, b *v1alpha1.LoadBalancerBinding) *v1alpha1.LoadBalancerBinding {
		b.Namespace = ns
		return b
	}
	const tg1 = "arn:aws:elasticloadbalancing:eu-west-1:111:targetgroup/web/1"
	const tg2 = "arn:aws:elasticloadbalancing:eu-west-1:222:targetgroup/web/2"
	for _, tc := range []struct {
		name   string
		access binding.Access
		b      *v1alpha1.LoadBalancerBinding
		want   string // substring of the error; empty: allowed
	}{
		{"zero allows all", binding.Access{}, haproxy("any", "tcp://10.0.0.1:1"), ""},
		{"own namespace", binding.Access{Namespaces: []string{"ingress"}}, haproxy("ingress", "tcp://a:1"), ""},
		{"other namespace", binding.Access{Namespaces: []string{"ingress"}}, haproxy("team-a", "tcp://a:1"), `namespace "team-a"`},
		{"all namespaces", binding.Access{Namespaces: []string{"*"}}, haproxy("team-a", "tcp://a:1"), ""},
		{"runtime API listed", binding.Access{HAProxyRuntimeAPIs: []string{"tcp://lb:9999"}}, haproxy("ingress", "tcp://lb:9999"), ""},
		{"runtime API not listed", binding.Access{HAProxyRuntimeAPIs: []string{"tcp://lb:9999"}}, haproxy("ingress", "unix:///run/other.sock"), "runtime API"},
		{"none allows no runtime API", binding.Access{HAProxyRuntimeAPIs: []string{"none"}}, haproxy("ingress", "tcp://lb:9999"), "runtime API"},
		{"none allows no ARN", binding.Access{AWSTargetGroups: []string{"none"}}, aws("web", tg1), "not allowed"},
		{"none allows no discovery", binding.Access{AWSTargetGroups: []string{"none"}}, aws("web"), "may not discover"},
		{"runtime API any", binding.Access{HAProxyRuntimeAPIs: []string{"*"}}, haproxy("ingress", "tcp://x:1"), ""},
		{"ARN listed", binding.Access{AWSTargetGroups: []string{tg1}}, aws("web", tg1), ""},
		{"one ARN not listed", binding.Access{AWSTargetGroups: []string{tg1}}, aws("web", tg1, tg2), "targetgroup/web/2"},
		{"ARN prefix", binding.Access{AWSTargetGroups: []string{"arn:aws:elasticloadbalancing:eu-west-1:111:*"}}, aws("web", tg1), ""},
		{"ARN prefix other account", binding.Access{AWSTargetGroups: []string{"arn:aws:elasticloadbalancing:eu-west-1:111:*"}}, aws("web", tg2), "not allowed"},
		{"tag entry allows no ARN", binding.Access{AWSTargetGroups: []string{"tag:sluice.dev/frontend=ingress/*"}}, aws("web", tg1), "not allowed"},
		{"discovery by frontend tag", binding.Access{AWSTargetGroups: []string{"tag:sluice.dev/frontend=ingress/web"}}, aws("web"), ""},
		{"discovery of another frontend", binding.Access{AWSTargetGroups: []string{"tag:sluice.dev/frontend=ingress/web"}}, aws("shop"), "frontend=shop"},
		{"discovery of any frontend of the namespace", binding.Access{AWSTargetGroups: []string{"tag:sluice.dev/frontend=ingress/*"}}, aws("shop"), ""},
		// The tag holds only the name: the namespace tells the platform's
		// binding from a tenant's of the same name.
		{"same name, tenant namespace", binding.Access{AWSTargetGroups: []string{"tag:sluice.dev/frontend=ingress/web"}}, inNS("team-a", aws("web")), "team-a/web"},
		{"namespace wildcard of another", binding.Access{AWSTargetGroups: []string{"tag:sluice.dev/frontend=ingress/*"}}, inNS("team-a", aws("web")), "may not discover"},
		{"namespace prefix is not a match", binding.Access{AWSTargetGroups: []string{"tag:sluice.dev/frontend=ingress/*"}}, inNS("ingress-2", aws("web")), "may not discover"},
		{"bare name matches nothing", binding.Access{AWSTargetGroups: []string{"tag:sluice.dev/frontend=web"}}, aws("web"), "may not discover"},
		{"bare * matches nothing", binding.Access{AWSTargetGroups: []string{"tag:sluice.dev/frontend=*"}}, aws("web"), "may not discover"},
		{"ARN list does not allow discovery", binding.Access{AWSTargetGroups: []string{tg1}}, aws("web"), "may not discover"},
		{"HAProxy list leaves AWS open", binding.Access{HAProxyRuntimeAPIs: []string{"tcp://lb:1"}}, aws("web", tg2), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.access.Check(tc.b)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check = %v, want allowed", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Check = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A binding outside the controller's Access is never acted on: no
// finalizer, no provider call; it says why, once.
func TestForbiddenBindingUntouched(t *testing.T) {
	e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Binding("a"))
	e.access = binding.Access{HAProxyRuntimeAPIs: []string{"tcp://lb:9999"}}
	e.restart()
	for range 3 {
		e.mustReconcile("a")
	}
	if calls := e.p.Calls(); len(calls) != 0 {
		t.Errorf("forbidden binding called the provider: %v", calls)
	}
	b := e.binding("a")
	if controllerutil.ContainsFinalizer(b, binding.Finalizer) {
		t.Error("forbidden binding got the finalizer")
	}
	if c := condition(b, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != binding.ReasonForbidden || !strings.Contains(c.Message, "runtime API") {
		t.Errorf("Ready = %+v, want False/%s naming the runtime API", c, binding.ReasonForbidden)
	}
	if c := condition(b, v1alpha1.ConditionProviderReachable); c.Status == metav1.ConditionFalse {
		t.Errorf("ProviderReachable False for a forbidden binding: %+v", c)
	}
	if n := e.rec.Count("LoadBalancerBinding ingress/a", binding.ReasonForbidden); n != 1 {
		t.Errorf("%s events = %d, want 1 (reasons %v)", binding.ReasonForbidden, n, e.rec.Reasons("LoadBalancerBinding ingress/a"))
	}
}

// Where the controller may not write bindings (the chart grants it only
// in the binding namespaces), a forbidden binding gets its Event once, and
// neither its status nor its finalizer loops on the 403; a deleted one
// keeps its finalizer for the operator, said in the Event.
func TestForbiddenBindingWithoutWriteAccess(t *testing.T) {
	e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Binding("a"))
	e.mustReconcile("a") // allowed: the finalizer is set
	e.access = binding.Access{Namespaces: []string{"elsewhere"}}
	e.readOnly = true
	e.restart()
	for range 3 {
		e.mustReconcile("a")
	}
	if e.refused == 0 {
		t.Fatal("no write refused: the test cannot tell a refused write from none")
	}
	if n := e.rec.Count("LoadBalancerBinding ingress/a", binding.ReasonForbidden); n != 1 {
		t.Errorf("%s events = %d, want 1", binding.ReasonForbidden, n)
	}
	if err := e.c.Delete(context.Background(), e.binding("a")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		e.mustReconcile("a")
	}
	if !controllerutil.ContainsFinalizer(e.binding("a"), binding.Finalizer) {
		t.Error("finalizer gone although the controller may not write the binding")
	}
	if n := e.rec.Count("LoadBalancerBinding ingress/a", binding.ReasonForbidden); n != 2 {
		t.Errorf("%s events = %d, want 2 (the second naming the finalizer left)", binding.ReasonForbidden, n)
	}
}

// A binding that was allowed, registered targets and is forbidden now
// (the controller's flags changed) is deleted without its targets being
// touched: only its finalizer goes.
func TestForbiddenBindingDeletedLeavesTargets(t *testing.T) {
	e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Binding("a"))
	e.mustReconcile("a")
	want := []string{"10.244.1.5:8080=initial"}
	if got := e.states(); !slices.Equal(got, want) {
		t.Fatalf("targets = %v, want %v", got, want)
	}
	e.access = binding.Access{Namespaces: []string{"elsewhere"}}
	e.restart()
	calls := len(e.p.Calls())
	if err := e.c.Delete(context.Background(), e.binding("a")); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile("a")
	if extra := e.p.Calls()[calls:]; len(extra) != 0 {
		t.Errorf("forbidden binding called the provider: %v", extra)
	}
	if got := e.states(); !slices.Equal(got, want) {
		t.Errorf("targets after deleting = %v, want %v untouched", got, want)
	}
	var gone v1alpha1.LoadBalancerBinding
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: "a"}, &gone); err == nil {
		t.Errorf("binding still exists with finalizers %v", gone.Finalizers)
	}
}

// A forbidden binding owns no group: an allowed, newer binding on the same
// backend works.
func TestForbiddenBindingOwnsNoGroup(t *testing.T) {
	old := ct.Binding("old")
	old.Namespace = "aaa" // older by name too, should the client drop creation times
	old.CreationTimestamp = metav1.Unix(1, 0)
	newer := ct.Binding("new")
	newer.CreationTimestamp = metav1.Unix(2, 0)
	e := newEnv(t, ct.Pod("p1", "10.244.1.5"), old, newer)
	e.access = binding.Access{Namespaces: []string{ct.Namespace}}
	e.restart()
	e.mustReconcile("new")
	if got := e.states(); !slices.Equal(got, []string{"10.244.1.5:8080=initial"}) {
		t.Errorf("targets = %v: the forbidden binding blocked the allowed one", got)
	}
}

func TestParseTagEntry(t *testing.T) {
	for _, tc := range []struct {
		entry, ns, name string
		err             string // substring; empty: valid
		bare            bool
	}{
		{entry: "tag:sluice.dev/frontend=sluice-system/internet", ns: "sluice-system", name: "internet"},
		{entry: "tag:sluice.dev/frontend=team-a/*", ns: "team-a", name: "*"},
		{entry: "tag:sluice.dev/frontend=team-a/web.v2", ns: "team-a", name: "web.v2"},
		{entry: "tag:sluice.dev/frontend=internet", err: "write tag:sluice.dev/frontend=NAMESPACE/internet", bare: true},
		{entry: "tag:sluice.dev/frontend=*", err: "NAMESPACE/*", bare: true},
		{entry: "tag:sluice.dev/frontend=*/internet", err: `namespace "*"`},
		{entry: "tag:sluice.dev/frontend=/internet", err: `namespace ""`},
		{entry: "tag:sluice.dev/frontend=team-a/", err: `binding name ""`},
		{entry: "tag:sluice.dev/frontend=team-a/web/x", err: `binding name "web/x"`},
		{entry: "tag:sluice.dev/frontend=Team_A/web", err: `namespace "Team_A"`},
		{entry: "tag:team=a", err: "want tag:sluice.dev/frontend=NAMESPACE/NAME"},
	} {
		ns, name, err := binding.ParseTagEntry(tc.entry)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.entry, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: err %v, want %q", tc.entry, err, tc.err)
		case tc.err == "" && (ns != tc.ns || name != tc.name):
			t.Errorf("%s: %q/%q, want %q/%q", tc.entry, ns, name, tc.ns, tc.name)
		}
		if got := errors.Is(err, binding.ErrBareTagEntry); got != tc.bare {
			t.Errorf("%s: ErrBareTagEntry %v, want %v", tc.entry, got, tc.bare)
		}
	}
}

func TestCheckIngressDaemonSet(t *testing.T) {
	a := binding.Access{Namespaces: []string{"ingress", "team-a"}, IngressDaemonSets: []string{"ingress"}}
	if err := a.CheckIngressDaemonSet("ingress"); err != nil {
		t.Errorf("own namespace: %v", err)
	}
	// A binding namespace is not an IngressDaemonSet namespace.
	if err := a.CheckIngressDaemonSet("team-a"); err == nil || !strings.Contains(err.Error(), "--ingressdaemonset-namespaces") {
		t.Errorf("team-a: %v, want refused", err)
	}
	if err := (binding.Access{}).CheckIngressDaemonSet("x"); err != nil {
		t.Errorf("zero Access: %v", err)
	}
}

// FuzzParseTagEntry: tag entries come from the operator's flags. Nothing
// panics, and a valid entry is exactly its parts.
func FuzzParseTagEntry(f *testing.F) {
	for _, s := range []string{"tag:sluice.dev/frontend=ns/web", "tag:sluice.dev/frontend=web", "tag:sluice.dev/frontend=ns/*",
		"tag:sluice.dev/frontend=/", "tag:sluice.dev/frontend=a/b/c", "tag:x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, e string) {
		ns, name, err := binding.ParseTagEntry(e)
		if err != nil {
			return
		}
		if binding.FrontendTagPrefix+ns+"/"+name != e || ns == "" || name == "" || strings.Contains(ns, "*") {
			t.Fatalf("%q parsed as %q/%q", e, ns, name)
		}
	})
}
