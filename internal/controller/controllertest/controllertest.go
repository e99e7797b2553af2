// Package controllertest builds the fixtures the reconciler unit tests
// share: a fake API client with the sluice scheme and status subresources,
// object constructors, a recording event sink, a settable clock and a
// provider source over internal/lb/fake. It is test support only; nothing
// in the running controller imports it.
package controllertest

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/lbcache"
	"sluice.dev/sluice/internal/controller/notices"
	"sluice.dev/sluice/internal/lb"
	lbfake "sluice.dev/sluice/internal/lb/fake"
)

// Namespace is where the fixtures live.
const Namespace = "ingress"

// Backend is the HAProxy backend of Binding fixtures and the fake provider's group.
const Backend = "be"

// Scheme has the client-go types and the sluice API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// NewClient returns a fake client holding objs, with the status
// subresource of pods, bindings and ingresses.
func NewClient(funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().
		WithScheme(Scheme()).
		WithStatusSubresource(&corev1.Pod{}, &v1alpha1.LoadBalancerBinding{}, &networkingv1.Ingress{}).
		WithObjects(objs...).
		WithInterceptorFuncs(funcs).
		Build()
}

// Providers serves the fake provider for every spec: an HAProxy spec's
// backend is its group, an AWS spec's target group ARNs are its groups (so
// that the fake provider needs groups of those names). A spec with neither
// or both is lb.ErrInvalid, an AWS spec without ARNs
// lbcache.ErrNotSupported.
type Providers struct{ P *lbfake.Provider }

// For implements the reconciler's provider source.
func (p Providers) For(_ context.Context, b *v1alpha1.LoadBalancerBinding) (lb.Provider, []string, error) {
	spec := b.Spec.Provider
	switch {
	case spec.HAProxy != nil && spec.AWS == nil:
		return p.P, []string{spec.HAProxy.Backend}, nil
	case spec.AWS != nil && spec.HAProxy == nil:
		if len(spec.AWS.TargetGroupARNs) == 0 {
			return nil, nil, fmt.Errorf("discovering target groups: %w", lbcache.ErrNotSupported)
		}
		return p.P, spec.AWS.TargetGroupARNs, nil
	default:
		return nil, nil, fmt.Errorf("choosing a provider: %w", lb.ErrInvalid)
	}
}

// NewProvider returns a fake provider with the Backend group.
func NewProvider() *lbfake.Provider {
	return lbfake.New(lbfake.Options{Groups: []string{Backend, "be2"}})
}

// Event is one recorded Event.
type Event struct {
	Object string // "Kind namespace/name"
	Type   string
	Reason string
	Note   string
}

// Recorder records Events.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Eventf implements the reconcilers' Recorder.
func (r *Recorder) Eventf(regarding, _ runtime.Object, typ, reason, _, note string, args ...any) {
	obj := "?"
	if o, ok := regarding.(client.Object); ok {
		kind := fmt.Sprintf("%T", o)
		switch o.(type) {
		case *corev1.Pod:
			kind = "Pod"
		case *v1alpha1.LoadBalancerBinding:
			kind = "LoadBalancerBinding"
		}
		obj = kind + " " + o.GetNamespace() + "/" + o.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, Event{Object: obj, Type: typ, Reason: reason, Note: fmt.Sprintf(note, args...)})
}

// Reasons returns the reasons of the Events on object ("Pod ns/name"), in order.
func (r *Recorder) Reasons(object string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Object == object {
			out = append(out, e.Reason)
		}
	}
	return out
}

// Events returns every recorded Event, in order.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Count counts Events with reason on object.
func (r *Recorder) Count(object, reason string) int {
	n := 0
	for _, x := range r.Reasons(object) {
		if x == reason {
			n++
		}
	}
	return n
}

// Clock is a settable clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts at a fixed instant.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// PodOpt modifies a Pod fixture.
type PodOpt func(*corev1.Pod)

// Pod is an ingress pod (label app=sluice, port http 8080) on node-1 with
// the readiness gate; ip "" means none yet.
func Pod(name, ip string, opts ...PodOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "sluice"}},
		Spec: corev1.PodSpec{
			NodeName:       "node-1",
			Containers:     []corev1.Container{{Name: "proxy", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1alpha1.ReadinessGateHealthy}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
	if ip != "" {
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// OnNode puts the pod on node.
func OnNode(node string) PodOpt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

// Deleting gives the pod a deletionTimestamp at t (and a finalizer, which
// the fake client needs for it).
func Deleting(t time.Time) PodOpt {
	return func(p *corev1.Pod) {
		ts := metav1.NewTime(t)
		p.DeletionTimestamp = &ts
		p.Finalizers = append(p.Finalizers, "test/hold")
	}
}

// NoGate removes the readiness gate.
func NoGate() PodOpt { return func(p *corev1.Pod) { p.Spec.ReadinessGates = nil } }

// WithCondition adds a pod condition (e.g. the kubelet's Ready).
func WithCondition(typ corev1.PodConditionType, status corev1.ConditionStatus) PodOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: status, Reason: "Kubelet"})
	}
}

// Labels replaces the pod's labels.
func Labels(l map[string]string) PodOpt { return func(p *corev1.Pod) { p.Labels = l } }

// Node is a node in zone with an InternalIP; opts modify it.
func Node(name, zone string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": zone}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// Excluded labels the node out of external load balancers.
func Excluded(n *corev1.Node) {
	n.Labels["node.kubernetes.io/exclude-from-external-load-balancers"] = "true"
}

// BindingOpt modifies a Binding fixture.
type BindingOpt func(*v1alpha1.LoadBalancerBinding)

// Binding selects app=sluice on port http through HAProxy backend Backend.
func Binding(name string, opts ...BindingOpt) *v1alpha1.LoadBalancerBinding {
	b := &v1alpha1.LoadBalancerBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, Generation: 1},
		Spec: v1alpha1.LoadBalancerBindingSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "sluice"}},
			Port:     intstr.FromString("http"),
			Provider: v1alpha1.ProviderSpec{HAProxy: &v1alpha1.HAProxyProvider{RuntimeAPI: "unix:///run/haproxy.sock", Backend: Backend}},
		},
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Group sets the binding's backend.
func Group(g string) BindingOpt {
	return func(b *v1alpha1.LoadBalancerBinding) { b.Spec.Provider.HAProxy.Backend = g }
}

// Publish sets spec.publish.
func Publish(addrs ...v1alpha1.PublishAddress) BindingOpt {
	return func(b *v1alpha1.LoadBalancerBinding) { b.Spec.Publish = addrs }
}

// Off turns the readiness gate and drain handshake off.
func Off(b *v1alpha1.LoadBalancerBinding) {
	f := false
	b.Spec.ReadinessGate, b.Spec.Drain.Handshake = &f, &f
}

// Target is the IP target ip:8080.
func Target(ip string) lb.Target {
	return lb.Target{Address: netip.AddrPortFrom(netip.MustParseAddr(ip), 8080)}
}

// States lists the provider's targets of group as "addr=state", sorted.
func States(p *lbfake.Provider, group string) []string {
	ts, err := p.Targets(context.Background(), group)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Target.String() + "=" + string(t.State)
	}
	slices.Sort(out)
	return out
}

// Notices stands in for notices.Writer: Sync records, on Recorder, a
// notice new in its scope as an Event, and a notice of the scope's last
// Sync that is gone as a Normal Resolved Event; standing notices record
// nothing (the real writer's refreshes are its own package's tests).
type Notices struct {
	Recorder *Recorder

	mu   sync.Mutex
	last map[string]map[notices.Notice]client.Object // notices without their Object
}

// Sync implements the reconcilers' Notifier.
func (n *Notices) Sync(_ context.Context, scope string, current []notices.Notice) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.last == nil {
		n.last = map[string]map[notices.Notice]client.Object{}
	}
	now := map[notices.Notice]client.Object{}
	for _, c := range current {
		k := c
		k.Object = nil
		if now[k] != nil {
			continue
		}
		now[k] = c.Object
		if n.last[scope][k] == nil {
			n.Recorder.Eventf(c.Object, nil, c.Type, c.Reason, "", "%s", c.Message)
		}
	}
	for k, o := range n.last[scope] {
		if now[k] == nil && k.Type == corev1.EventTypeWarning {
			n.Recorder.Eventf(o, nil, corev1.EventTypeNormal, notices.ReasonResolved, "", "resolved: %s: %s", k.Reason, k.Message)
		}
	}
	n.last[scope] = now
	return nil
}

// Refresh implements the reconcilers' Notifier: never.
func (n *Notices) Refresh() time.Duration { return 0 }
