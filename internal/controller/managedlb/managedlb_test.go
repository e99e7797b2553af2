package managedlb_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	"sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/managedlb"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
	"sluice.dev/sluice/internal/lb/aws/managed"
)

const ns = controllertest.Namespace

func managedBinding() *v1alpha1.LoadBalancerBinding {
	return &v1alpha1.LoadBalancerBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "uid-web", Generation: 1},
		Spec: v1alpha1.LoadBalancerBindingSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "sluice"}},
			Port:     intstr.FromInt(8443),
			Provider: v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{Region: "us-east-1", Managed: &v1alpha1.ManagedLoadBalancer{
				Type: "network", Scheme: "internet-facing", Subnets: []string{"subnet-a", "subnet-b"},
				Listeners:             []v1alpha1.ManagedListener{{Port: 443, Protocol: "TLS"}},
				HealthCheck:           v1alpha1.ManagedHealthCheck{Path: "/healthz", IntervalSeconds: 5},
				TargetGroupAttributes: &v1alpha1.TargetGroupAttributes{DeregistrationDelaySeconds: ptr.To[int32](30)},
			}}},
		},
	}
}

func class() *networkingv1.IngressClass {
	return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}, Spec: networkingv1.IngressClassSpec{
		Controller: "sluice.dev/ingress-controller",
		Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr.To("sluice.dev"), Kind: "LoadBalancerBinding", Name: "web",
			Scope: ptr.To(networkingv1.IngressClassParametersReferenceScopeNamespace), Namespace: ptr.To(ns)}}}
}

func ingress(name string, hosts ...string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("sluice")}}
	for _, h := range hosts {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: h})
	}
	return ing
}

type env struct {
	t    *testing.T
	fake *awsfake.Fake
	c    client.Client
	rec  *controllertest.Recorder
	now  time.Time
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	controllertest.IsolateAWS(t)
	e := &env{t: t, fake: controllertest.AWSFake(t, 100), rec: &controllertest.Recorder{}, now: time.Now()}
	e.c = controllertest.NewClient(interceptor.Funcs{}, objs...)
	return e
}

// reconciler is a fresh reconciler (a controller restart).
func (e *env) reconciler() *managedlb.Reconciler {
	r, err := managedlb.New(managedlb.Options{Client: e.c, Clouds: managedlb.Clouds(controllertest.AWSOptions(e.fake.URL())),
		Cluster: "prod", Recorder: e.rec, Now: func() time.Time { return e.now }})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) reconcile(r *managedlb.Reconciler) reconcile.Result {
	e.t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "web"}})
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (e *env) binding() *v1alpha1.LoadBalancerBinding {
	e.t.Helper()
	var b v1alpha1.LoadBalancerBinding
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "web"}, &b); err != nil {
		e.t.Fatal(err)
	}
	return &b
}

func (e *env) update(mut func(*v1alpha1.LoadBalancerBinding)) {
	e.t.Helper()
	b := e.binding()
	mut(b)
	b.Generation++
	if err := e.c.Update(context.Background(), b); err != nil {
		e.t.Fatal(err)
	}
}

func condition(b *v1alpha1.LoadBalancerBinding) metav1.Condition {
	for _, c := range b.Status.Conditions {
		if c.Type == v1alpha1.ConditionLoadBalancerManaged {
			return c
		}
	}
	return metav1.Condition{}
}

// creates counts the create calls the fake received.
func creates(f *awsfake.Fake) int {
	c := f.Calls()
	return c["CreateLoadBalancer"] + c["CreateTargetGroup"] + c["CreateListener"]
}

func TestLifecycle(t *testing.T) {
	e := newEnv(t, managedBinding(), class(), ingress("a", "a.example.com"), ingress("b", "x.b.example.com"))
	certA, _ := e.fake.AddCertificate(awsfake.Certificate{Domain: "a.example.com"})
	certB, _ := e.fake.AddCertificate(awsfake.Certificate{Domain: "b.example.com", SANs: []string{"*.b.example.com"}})
	_, _ = e.fake.AddCertificate(awsfake.Certificate{Domain: "a.example.com", NotAfter: time.Now().Add(3 * 24 * time.Hour)}) // expiring
	foreignTG, _ := e.fake.AddTargetGroup(awsfake.TargetGroup{Name: "foreign", Tags: map[string]string{"sluice.dev/cluster": "prod"}})
	foreignLB, _ := e.fake.AddLoadBalancer(awsfake.LoadBalancer{Name: "foreign", TargetGroups: []string{foreignTG}})

	// Create: target group and load balancer, then the listener with both
	// certificates, in one reconcile.
	r := e.reconciler()
	e.reconcile(r)
	b := e.binding()
	st := b.Status.Managed
	if st == nil || st.LoadBalancerARN == "" || st.TargetGroupARN == "" || len(st.ListenerARNs) != 1 {
		t.Fatalf("status.managed = %+v", st)
	}
	if c := condition(b); c.Status != metav1.ConditionTrue {
		t.Fatalf("condition %+v", c)
	}
	if !slices.Contains(b.Finalizers, managedlb.Finalizer) {
		t.Fatal("no finalizer")
	}
	def, others, _ := e.fake.ListenerCertificates(st.ListenerARNs[0])
	got := append([]string{def}, others...)
	slices.Sort(got)
	want := []string{certA, certB}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("listener certificates %v, want %v (the expiring one left out)", got, want)
	}
	if _, ok := e.fake.ListenerAddress(st.LoadBalancerARN, 443); !ok {
		t.Fatal("the listener carries no traffic")
	}
	made := creates(e.fake)
	if made != 3 {
		t.Fatalf("%d creates, want 3", made)
	}

	// Restart: a new reconciler adopts by tags, creates nothing.
	r = e.reconciler()
	e.reconcile(r)
	if n := creates(e.fake); n != made {
		t.Fatalf("restart created %d more", n-made)
	}
	if again := e.binding().Status.Managed; again.LoadBalancerARN != st.LoadBalancerARN || again.TargetGroupARN != st.TargetGroupARN ||
		!slices.Equal(again.ListenerARNs, st.ListenerARNs) {
		t.Fatalf("ARNs changed on restart: %+v vs %+v", again, st)
	}

	// A third host with its certificate: attached to the same listener.
	certC, _ := e.fake.AddCertificate(awsfake.Certificate{Domain: "c.example.com"})
	if err := e.c.Create(context.Background(), ingress("c", "c.example.com")); err != nil {
		t.Fatal(err)
	}
	e.reconcile(r)
	before := def
	def, others, _ = e.fake.ListenerCertificates(st.ListenerARNs[0])
	if !slices.Contains(append(others, def), certC) || def != before {
		t.Fatalf("third certificate not attached, or the default moved: %s %v (default before %s)", def, others, before)
	}

	// Deregistration delay: modified in place.
	e.update(func(b *v1alpha1.LoadBalancerBinding) {
		b.Spec.Provider.AWS.Managed.TargetGroupAttributes.DeregistrationDelaySeconds = ptr.To[int32](7)
	})
	e.reconcile(r)
	if e.fake.Calls()["ModifyTargetGroupAttributes"] < 2 || creates(e.fake) != made {
		t.Fatalf("calls %v", e.fake.Calls())
	}

	// A scheme change waits for confirmation, changing nothing.
	e.update(func(b *v1alpha1.LoadBalancerBinding) { b.Spec.Provider.AWS.Managed.Scheme = "internal" })
	e.reconcile(r)
	if c := condition(e.binding()); c.Reason != "ReplaceNotConfirmed" || creates(e.fake) != made {
		t.Fatalf("unconfirmed replace: condition %+v, %d creates", c, creates(e.fake)-made)
	}
	if e.rec.Count("LoadBalancerBinding "+ns+"/web", "ReplaceNotConfirmed") != 1 {
		t.Fatalf("events %v", e.rec.Events())
	}
	e.update(func(b *v1alpha1.LoadBalancerBinding) { b.Spec.Provider.AWS.Managed.Scheme = "internet-facing" })
	e.reconcile(r)

	// Deletion: after the binding reconciler's finalizer, everything
	// sluice created goes, nothing else.
	e.update(func(b *v1alpha1.LoadBalancerBinding) { b.Finalizers = append(b.Finalizers, binding.Finalizer) })
	if err := e.c.Delete(context.Background(), e.binding()); err != nil {
		t.Fatal(err)
	}
	e.reconcile(r)
	if _, ok := e.fake.ListenerAddress(st.LoadBalancerARN, 443); !ok {
		t.Fatal("deleted before the targets were deregistered")
	}
	e.update(func(b *v1alpha1.LoadBalancerBinding) {
		b.Finalizers = slices.DeleteFunc(b.Finalizers, func(f string) bool { return f == binding.Finalizer })
	})
	e.reconcile(r)
	if _, ok := e.fake.ListenerAddress(st.LoadBalancerARN, 443); ok {
		t.Fatal("listener still there")
	}
	if e.fake.Calls()["DeleteLoadBalancer"] != 1 || e.fake.Calls()["DeleteTargetGroup"] != 1 {
		t.Fatalf("calls %v", e.fake.Calls())
	}
	if !slices.Contains(e.fake.TargetGroupARNs(), foreignTG) || !slices.Contains(e.fake.LoadBalancerARNs(), foreignLB.ARN) ||
		len(e.fake.TargetGroupARNs()) != 1 || len(e.fake.LoadBalancerARNs()) != 1 {
		t.Fatalf("after deletion: groups %v, load balancers %v; want only the foreign ones", e.fake.TargetGroupARNs(), e.fake.LoadBalancerARNs())
	}
}

// TestUpgradeAdoptsEarlierGroup: a binding of an earlier release used a
// target group it discovered by tags (sluice.dev/cluster and
// sluice.dev/frontend). Turning on managed mode uses that group: no new
// group, no recreation, and deleting the binding leaves it.
func TestUpgradeAdoptsEarlierGroup(t *testing.T) {
	e := newEnv(t, managedBinding(), class(), ingress("a", "a.example.com"))
	_, _ = e.fake.AddCertificate(awsfake.Certificate{Domain: "a.example.com"})
	old, err := e.fake.AddTargetGroup(awsfake.TargetGroup{Name: "earlier", Port: 8443,
		Tags: map[string]string{managed.ClusterTag: "prod", managed.FrontendTag: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	r := e.reconciler()
	e.reconcile(r)
	st := e.binding().Status.Managed
	if st.TargetGroupARN != old || e.fake.Calls()["CreateTargetGroup"] != 0 {
		t.Fatalf("status %+v, calls %v: want the earlier group adopted", st, e.fake.Calls())
	}
	e.reconcile(e.reconciler())
	if e.fake.Calls()["CreateTargetGroup"] != 0 || e.fake.Calls()["CreateLoadBalancer"] != 1 {
		t.Fatalf("calls %v", e.fake.Calls())
	}
	if err := e.c.Delete(context.Background(), e.binding()); err != nil {
		t.Fatal(err)
	}
	e.reconcile(r)
	if !slices.Contains(e.fake.TargetGroupARNs(), old) || e.fake.Calls()["DeleteLoadBalancer"] != 1 {
		t.Fatalf("adopted group deleted or load balancer kept: calls %v", e.fake.Calls())
	}
}

// TestReplaceConfirmed: a confirmed scheme change creates the new set
// first and deletes the old one only once the new group has a healthy
// target.
func TestReplaceConfirmed(t *testing.T) {
	b := managedBinding()
	b.Spec.Provider.AWS.Managed.Listeners = []v1alpha1.ManagedListener{{Port: 80, Protocol: "TCP"}}
	e := newEnv(t, b)
	r := e.reconciler()
	e.reconcile(r)
	first := e.binding().Status.Managed
	// The binding reconciler registers the targets in every group tagged
	// for the binding; here one healthy target stands in for that.
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	c := elbv2.New(elbv2.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.fake.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
	register := func(tg string) {
		t.Helper()
		if _, err := c.RegisterTargets(context.Background(), &elbv2.RegisterTargetsInput{TargetGroupArn: aws.String(tg),
			Targets: []elbtypes.TargetDescription{{Id: aws.String(ap.Addr().String()), Port: aws.Int32(int32(ap.Port()))}}}); err != nil {
			t.Fatal(err)
		}
		for range 1000 {
			if ts := e.fake.Targets(tg); len(ts) == 1 && ts[0].State == "healthy" {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("target never healthy in %s", tg)
	}
	register(first.TargetGroupARN)

	e.update(func(b *v1alpha1.LoadBalancerBinding) {
		b.Spec.Provider.AWS.Managed.Scheme = "internal"
		b.Annotations = map[string]string{v1alpha1.AnnotationConfirmReplace: strconv.FormatInt(b.Generation+1, 10)}
	})
	e.reconcile(r)
	if c := condition(e.binding()); c.Reason != "Progressing" || e.fake.Calls()["DeleteLoadBalancer"] != 0 || len(e.fake.LoadBalancerARNs()) != 2 {
		t.Fatalf("condition %+v calls %v", c, e.fake.Calls())
	}
	second := e.binding().Status.Managed
	if second.TargetGroupARN == first.TargetGroupARN || second.LoadBalancerARN == first.LoadBalancerARN {
		t.Fatal("no new set")
	}
	e.reconcile(r)
	if e.fake.Calls()["DeleteLoadBalancer"] != 0 {
		t.Fatal("old set deleted before the new group had a healthy target")
	}
	register(second.TargetGroupARN)
	e.reconcile(r)
	if e.fake.Calls()["DeleteLoadBalancer"] != 1 || slices.Contains(e.fake.TargetGroupARNs(), first.TargetGroupARN) ||
		!slices.Contains(e.fake.TargetGroupARNs(), second.TargetGroupARN) || condition(e.binding()).Status != metav1.ConditionTrue {
		t.Fatalf("old set not replaced: calls %v groups %v condition %+v", e.fake.Calls(), e.fake.TargetGroupARNs(), condition(e.binding()))
	}
}

// TestErrorsRetried: an AWS error is reported (condition, Event) and
// returned for backoff; the next reconcile goes on from what exists.
func TestErrorsRetried(t *testing.T) {
	b := managedBinding()
	b.Spec.Provider.AWS.Managed.Listeners = []v1alpha1.ManagedListener{{Port: 80, Protocol: "TCP"}}
	e := newEnv(t, b)
	r := e.reconciler()
	e.fake.SetFaults(awsfake.Faults{ServerError: 1, Actions: []string{"CreateLoadBalancer"}})
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "web"}}); err == nil {
		t.Fatal("no error returned for backoff")
	}
	if c := condition(e.binding()); c.Status != metav1.ConditionFalse || c.Reason != "ProviderError" {
		t.Fatalf("condition %+v", c)
	}
	if e.rec.Count("LoadBalancerBinding "+ns+"/web", "ProviderError") != 1 {
		t.Fatalf("events %v", e.rec.Events())
	}
	e.fake.SetFaults(awsfake.Faults{})
	e.reconcile(r)
	if c := condition(e.binding()); c.Status != metav1.ConditionTrue || e.fake.Calls()["CreateTargetGroup"] != 1 {
		t.Fatalf("after the fault: condition %+v, calls %v", c, e.fake.Calls())
	}
}

// TestNoCertificateYet: a TLS listener waits for a certificate, and the
// condition says so; the group and load balancer exist meanwhile.
func TestNoCertificateYet(t *testing.T) {
	e := newEnv(t, managedBinding(), class(), ingress("a", "a.example.com"))
	r := e.reconciler()
	e.reconcile(r)
	b := e.binding()
	if c := condition(b); c.Reason != "CertificatesMissing" || len(b.Status.Managed.ListenerARNs) != 0 ||
		!slices.Equal(b.Status.Managed.HostsWithoutCertificate, []string{"a.example.com"}) || e.fake.Calls()["CreateLoadBalancer"] != 1 {
		t.Fatalf("condition %+v, status %+v, calls %v", c, b.Status.Managed, e.fake.Calls())
	}
	_, _ = e.fake.AddCertificate(awsfake.Certificate{Domain: "a.example.com"})
	e.reconcile(r)
	if b := e.binding(); condition(b).Status != metav1.ConditionTrue || len(b.Status.Managed.ListenerARNs) != 1 {
		t.Fatalf("with the certificate: %+v %+v", condition(b), b.Status.Managed)
	}
}

// TestNameTaken: a load balancer of someone else under the name sluice
// would use is never adopted (no tags of ours): the create fails with
// DuplicateLoadBalancerName, reported and counted, and the foreign one is
// left alone.
func TestNameTaken(t *testing.T) {
	b := managedBinding()
	b.Spec.Provider.AWS.Managed.Listeners = []v1alpha1.ManagedListener{{Port: 80, Protocol: "TCP"}}
	e := newEnv(t, b)
	foreign, err := e.fake.AddLoadBalancer(awsfake.LoadBalancer{Name: managed.SetName(managed.Base("prod", ns, "web", "uid-web"), 1)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := managedlb.New(managedlb.Options{Client: e.c, Clouds: managedlb.Clouds(controllertest.AWSOptions(e.fake.URL())),
		Cluster: "prod", Recorder: e.rec, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "web"}})
	if err == nil || !strings.Contains(err.Error(), "DuplicateLoadBalancerName") {
		t.Fatalf("reconcile: %v", err)
	}
	if c := condition(e.binding()); c.Reason != "ProviderError" || !strings.Contains(c.Message, "DuplicateLoadBalancerName") {
		t.Fatalf("condition %+v", c)
	}
	if n := testutil.ToFloat64(r.Actions().WithLabelValues("CreateLoadBalancer", "error")); n != 1 {
		t.Fatalf("metric CreateLoadBalancer/error = %v", n)
	}
	if !slices.Equal(e.fake.LoadBalancerARNs(), []string{foreign.ARN}) {
		t.Fatalf("load balancers %v", e.fake.LoadBalancerARNs())
	}
}

// TestSubnetTags: subnets found by tag, one per zone, and their VPC.
func TestSubnetTags(t *testing.T) {
	b := managedBinding()
	m := b.Spec.Provider.AWS.Managed
	m.Subnets, m.SubnetTags = nil, map[string]string{"kubernetes.io/role/elb": "1"}
	m.Listeners = []v1alpha1.ManagedListener{{Port: 80, Protocol: "TCP"}}
	e := newEnv(t, b)
	r := e.reconciler()
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "web"}}); err == nil {
		t.Fatal("no subnet: no error")
	}
	if c := condition(e.binding()); c.Reason != "SubnetsNotFound" || e.fake.Calls()["CreateLoadBalancer"] != 0 {
		t.Fatalf("condition %+v calls %v", c, e.fake.Calls())
	}
	for _, s := range []awsfake.Subnet{
		{ID: "subnet-b1", Zone: "us-east-1b", VPC: "vpc-9", Tags: m.SubnetTags},
		{ID: "subnet-a1", Zone: "us-east-1a", VPC: "vpc-9", Tags: m.SubnetTags},
		{ID: "subnet-a2", Zone: "us-east-1a", VPC: "vpc-9", Tags: m.SubnetTags},
		{ID: "subnet-other", Zone: "us-east-1c", VPC: "vpc-9"},
	} {
		if err := e.fake.AddSubnet(s); err != nil {
			t.Fatal(err)
		}
	}
	e.reconcile(r)
	if c := condition(e.binding()); c.Status != metav1.ConditionTrue {
		t.Fatalf("condition %+v", c)
	}
	c := elbv2.New(elbv2.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.fake.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
	out, err := c.DescribeLoadBalancers(context.Background(), &elbv2.DescribeLoadBalancersInput{})
	if err != nil || len(out.LoadBalancers) != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	var got []string
	for _, z := range out.LoadBalancers[0].AvailabilityZones {
		got = append(got, aws.ToString(z.SubnetId))
	}
	if !slices.Equal(got, []string{"subnet-a1", "subnet-b1"}) {
		t.Fatalf("subnets %v", got)
	}
}
