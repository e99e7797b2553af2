// Package explain walks the chain that serves an Ingress (or a Gateway) as sluice sees it
// (class → binding → load balancer → targets and their health → proxies
// → backends and certificates → DNS → recent problems) and says, for each
// link, whether it holds and, where it does not, the cause and the fix.
// `sluice explain` prints its reports.
//
// Data flow: the CLI reads the objects (State) → Ingress / Binding (pure)
// → Report → text. Everything here is pure over State, so every report is
// golden-tested on recorded states.
package explain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/ingressstatus"
	"sluice.dev/sluice/internal/translate"
)

// State is what the CLI read from the API server. Lists hold what the
// reader could see; an object it could not read is absent.
type State struct {
	// Namespace and Name of the object to explain.
	Namespace, Name string
	// Ingress is the Ingress explained; nil when it does not exist.
	Ingress *networkingv1.Ingress
	// Binding is the binding explained (Binding only).
	Binding *v1alpha1.LoadBalancerBinding
	// ControllerNamespace is the controller's namespace: its bindings
	// serve the classes that name none.
	ControllerNamespace string
	// IngressClass and ControllerName are the proxies' (defaults "sluice"
	// and translate.ControllerName).
	IngressClass, ControllerName string
	Classes                      []networkingv1.IngressClass
	Bindings                     []v1alpha1.LoadBalancerBinding
	// Services, EndpointSlices and Secrets of the Ingress's namespace.
	Services       []corev1.Service
	EndpointSlices []discoveryv1.EndpointSlice
	Secrets        []corev1.Secret
	// SecretsUnread: the reader may not read Secrets; certificates are
	// not checked.
	SecretsUnread bool
	// Pods of the bindings' namespaces (their proxies).
	Pods []corev1.Pod
	// Events of the explained object's namespace (and, for a Gateway, of
	// its routes' namespaces).
	Events []eventsv1.Event
	// Gateway is the Gateway explained (Gateway only), with the
	// GatewayClasses and the routes the reader could see.
	Gateway        *gatewayv1.Gateway
	GatewayClasses []gatewayv1.GatewayClass
	HTTPRoutes     []gatewayv1.HTTPRoute
	GRPCRoutes     []gatewayv1.GRPCRoute
	// Now is when the state was read.
	Now time.Time
}

// Report is the explanation: the chain, link by link, and the causes of
// what is broken.
type Report struct {
	Lines  []Line
	Causes []string
}

// Line is one link of the chain.
type Line struct {
	Depth int
	// OK is false for a broken link.
	OK   bool
	Text string
}

// Healthy reports whether nothing in the chain is broken.
func (r Report) Healthy() bool { return len(r.Causes) == 0 }

// String renders the report as indented text, broken links marked "✗".
func (r Report) String() string {
	var b strings.Builder
	for _, l := range r.Lines {
		mark := "✓"
		if !l.OK {
			mark = "✗"
		}
		fmt.Fprintf(&b, "%s%s %s\n", strings.Repeat("  ", l.Depth), mark, l.Text)
	}
	if len(r.Causes) == 0 {
		b.WriteString("\nno problem found\n")
		return b.String()
	}
	b.WriteString("\ncauses:\n")
	for _, c := range r.Causes {
		fmt.Fprintf(&b, "  - %s\n", c)
	}
	return b.String()
}

// report builds a Report.
type report struct{ Report }

func (r *report) ok(depth int, format string, args ...any) {
	r.Lines = append(r.Lines, Line{Depth: depth, OK: true, Text: fmt.Sprintf(format, args...)})
}

// bad adds a broken link and its cause.
func (r *report) bad(depth int, cause, format string, args ...any) {
	r.Lines = append(r.Lines, Line{Depth: depth, Text: fmt.Sprintf(format, args...)})
	if !slices.Contains(r.Causes, cause) {
		r.Causes = append(r.Causes, cause)
	}
}

// Ingress explains the Ingress s.Namespace/s.Name.
func Ingress(s State) Report {
	s = withDefaults(s)
	var r report
	ing := s.Ingress
	if ing == nil {
		r.bad(0, fmt.Sprintf("Ingress %s/%s does not exist (or you may not read it)", s.Namespace, s.Name),
			"Ingress %s/%s", s.Namespace, s.Name)
		return r.Report
	}
	r.ok(0, "Ingress %s/%s", ing.Namespace, ing.Name)
	serving := ingressstatus.NewServing(s.Classes, s.Bindings, ingressstatus.ServingOptions{
		IngressClass: s.IngressClass, ControllerName: s.ControllerName, Namespace: s.ControllerNamespace})
	class, from := serving.ClassName(ing)
	if !serving.Serves(ing) {
		r.bad(1, fmt.Sprintf("the Ingress is not sluice's: set spec.ingressClassName to an IngressClass whose spec.controller is %s (or named %q)", s.ControllerName, s.IngressClass),
			"class %q (%s) is not served by sluice", class, from)
		r.problems(s, ing)
		return r.Report
	}
	r.ok(1, "class %q (%s), served by sluice", class, from)
	bs := serving.BindingsOf(class)
	if len(bs) == 0 {
		r.bad(1, fmt.Sprintf("no LoadBalancerBinding serves class %q: create the binding its parameters name, or one in %s", class, s.ControllerNamespace),
			"binding: none")
	}
	for _, b := range bs {
		r.binding(s, b, 1)
	}
	r.ingressStatus(ing, len(bs) > 0)
	r.routes(s, ing)
	r.problems(s, ing)
	return r.Report
}

// Binding explains the binding s.Namespace/s.Name.
func Binding(s State) Report {
	s = withDefaults(s)
	var r report
	if s.Binding == nil {
		r.bad(0, fmt.Sprintf("LoadBalancerBinding %s/%s does not exist (or you may not read it)", s.Namespace, s.Name),
			"LoadBalancerBinding %s/%s", s.Namespace, s.Name)
		return r.Report
	}
	r.binding(s, s.Binding, 0)
	var classes []string
	serving := ingressstatus.NewServing(s.Classes, s.Bindings, ingressstatus.ServingOptions{
		IngressClass: s.IngressClass, ControllerName: s.ControllerName, Namespace: s.ControllerNamespace})
	for _, c := range s.Classes {
		for _, b := range serving.BindingsOf(c.Name) {
			if b.Namespace == s.Binding.Namespace && b.Name == s.Binding.Name {
				classes = append(classes, c.Name)
			}
		}
	}
	if len(classes) == 0 {
		r.bad(1, "no IngressClass is served by this binding: name it in an IngressClass's spec.parameters (or put it in the controller's namespace)", "classes: none")
	} else {
		r.ok(1, "serves classes %s", strings.Join(classes, ", "))
	}
	return r.Report
}

func withDefaults(s State) State {
	s.IngressClass = cmp.Or(s.IngressClass, translate.DefaultIngressClass)
	s.ControllerName = cmp.Or(s.ControllerName, translate.ControllerName)
	s.ControllerNamespace = cmp.Or(s.ControllerNamespace, "sluice-system")
	return s
}

// binding explains one binding: its conditions, targets, proxies and
// addresses.
func (r *report) binding(s State, b *v1alpha1.LoadBalancerBinding, depth int) {
	provider := "haproxy"
	if b.Spec.Provider.AWS != nil {
		provider = "aws"
	}
	r.ok(depth, "binding %s/%s (provider %s)", b.Namespace, b.Name, provider)
	d := depth + 1
	if b.DeletionTimestamp != nil {
		r.bad(d, fmt.Sprintf("binding %s/%s is being deleted", b.Namespace, b.Name), "being deleted")
	}
	conds := map[string]*metav1.Condition{}
	for _, t := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionProviderReachable, v1alpha1.ConditionHeld, v1alpha1.ConditionDeletionBlocked} {
		conds[t] = meta.FindStatusCondition(b.Status.Conditions, t)
	}
	switch c := conds[v1alpha1.ConditionProviderReachable]; {
	case c == nil:
	case c.Status == metav1.ConditionTrue:
		r.ok(d, "provider reachable")
	default:
		r.bad(d, fmt.Sprintf("the controller cannot reach the load balancer of binding %s/%s (%s: %s): check the provider's address and credentials in its spec and the controller's network path to it",
			b.Namespace, b.Name, c.Reason, c.Message), "provider unreachable: %s", c.Reason)
	}
	switch c := conds[v1alpha1.ConditionReady]; {
	case c == nil:
		r.bad(d, fmt.Sprintf("binding %s/%s has no Ready condition: the controller has not reconciled it (is the controller running, and is %s among its --binding-namespaces?)", b.Namespace, b.Name, b.Namespace),
			"not reconciled yet")
	case c.Status == metav1.ConditionTrue:
		r.ok(d, "Ready (%s)", c.Reason)
	default:
		r.bad(d, fmt.Sprintf("binding %s/%s is not Ready: %s: %s", b.Namespace, b.Name, c.Reason, c.Message), "not Ready: %s", c.Reason)
	}
	if c := conds[v1alpha1.ConditionHeld]; c != nil && c.Status == metav1.ConditionTrue {
		r.bad(d, fmt.Sprintf("binding %s/%s is held (%s: %s): the controller keeps its last targets registered rather than empty the load balancer; bring healthy proxies back, or see the emptying guard in the docs",
			b.Namespace, b.Name, c.Reason, c.Message), "held: %s", c.Reason)
	}
	if c := conds[v1alpha1.ConditionDeletionBlocked]; c != nil && c.Status == metav1.ConditionTrue {
		r.bad(d, fmt.Sprintf("binding %s/%s cannot finish its deletion: %s", b.Namespace, b.Name, c.Message), "deletion blocked: %s", c.Reason)
	}
	if b.Status.LastError != "" && !slices.ContainsFunc(b.Status.Conditions, func(c metav1.Condition) bool { return strings.Contains(c.Message, b.Status.LastError) }) {
		r.bad(d, fmt.Sprintf("binding %s/%s: last provider error: %s", b.Namespace, b.Name, b.Status.LastError), "last error: %s", b.Status.LastError)
	}
	t := b.Status.Targets
	line := fmt.Sprintf("targets: healthy %d, initial %d, unhealthy %d, draining %d, unavailable %d",
		t.Healthy, t.Initial, t.Unhealthy, t.Draining, t.Unavailable)
	if t.Healthy == 0 {
		r.bad(d, fmt.Sprintf("the load balancer of binding %s/%s has no healthy target: no proxy receives traffic through it", b.Namespace, b.Name), "%s", line)
	} else {
		r.ok(d, "%s", line)
	}
	r.proxies(s, b, d)
	var addrs []string
	for _, a := range b.Status.Addresses {
		addrs = append(addrs, cmp.Or(a.IP, a.Hostname))
	}
	if len(addrs) == 0 {
		r.bad(d, fmt.Sprintf("binding %s/%s has no load-balancer address yet: set spec.publish, or wait for discovery", b.Namespace, b.Name), "addresses: none")
	} else {
		r.ok(d, "addresses: %s", strings.Join(addrs, ", "))
	}
}

// proxies counts the pods the binding selects, and the ready ones.
func (r *report) proxies(s State, b *v1alpha1.LoadBalancerBinding, depth int) {
	sel, err := metav1.LabelSelectorAsSelector(&b.Spec.Selector)
	if err != nil || sel.Empty() {
		r.bad(depth, fmt.Sprintf("binding %s/%s has an invalid or empty pod selector", b.Namespace, b.Name), "proxies: invalid selector")
		return
	}
	var total, ready int
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Namespace != b.Namespace || !sel.Matches(labels.Set(p.Labels)) || p.DeletionTimestamp != nil {
			continue
		}
		total++
		if podReady(p) {
			ready++
		}
	}
	line := fmt.Sprintf("proxies: %d pods match %s, %d ready", total, sel, ready)
	if ready == 0 {
		r.bad(depth, fmt.Sprintf("no ready proxy pod matches binding %s/%s's selector %s in %s", b.Namespace, b.Name, sel, b.Namespace), "%s", line)
		return
	}
	r.ok(depth, "%s", line)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ingressStatus checks the Ingress's published address.
func (r *report) ingressStatus(ing *networkingv1.Ingress, bound bool) {
	var addrs []string
	for _, a := range ing.Status.LoadBalancer.Ingress {
		addrs = append(addrs, cmp.Or(a.IP, a.Hostname))
	}
	switch {
	case len(addrs) > 0:
		r.ok(1, "status.loadBalancer: %s", strings.Join(addrs, ", "))
	case bound:
		r.bad(1, "the Ingress has no status.loadBalancer address: the controller writes none while nothing of it is served or its binding has no address (see the other causes)",
			"status.loadBalancer: none")
	}
}

// routes translates the Ingress alone, as the proxies and the controller
// do, and lists its rules with their backends and certificates.
func (r *report) routes(s State, ing *networkingv1.Ingress) {
	in := translate.Input{Ingresses: []*networkingv1.Ingress{ing}}
	for i := range s.Classes {
		in.IngressClasses = append(in.IngressClasses, &s.Classes[i])
	}
	for i := range s.Services {
		in.Services = append(in.Services, &s.Services[i])
	}
	for i := range s.EndpointSlices {
		in.EndpointSlices = append(in.EndpointSlices, &s.EndpointSlices[i])
	}
	for i := range s.Secrets {
		if s.Secrets[i].Type == corev1.SecretTypeTLS {
			in.Secrets = append(in.Secrets, &s.Secrets[i])
		}
	}
	cfg, problems := translate.Build(in, translate.Options{IngressClass: s.IngressClass, ControllerName: s.ControllerName,
		SecretsUnread: s.SecretsUnread})
	for _, vh := range cfg.VirtualHosts {
		for _, rt := range vh.Routes {
			host := cmp.Or(vh.Host, "*")
			b := rt.Backend
			switch {
			case b == nil:
				r.ok(1, "route %s %s → default backend", host, rt.Path)
			case !slices.ContainsFunc(s.Services, func(svc corev1.Service) bool { return svc.Namespace == b.Namespace && svc.Name == b.Service }):
				// The cause is the ServiceNotFound problem below.
				r.Lines = append(r.Lines, Line{Depth: 1, Text: fmt.Sprintf("route %s %s → Service %s/%s:%s, not found (answers 503)", host, rt.Path, b.Namespace, b.Service, b.Port)})
			case len(b.Endpoints) == 0:
				r.bad(1, fmt.Sprintf("Service %s/%s port %s has no ready endpoint: its pods are not ready, or its selector matches none (kubectl get endpointslices -l kubernetes.io/service-name=%s)", b.Namespace, b.Service, b.Port, b.Service),
					"route %s %s → Service %s/%s:%s, no ready endpoint (answers 503)", host, rt.Path, b.Namespace, b.Service, b.Port)
			default:
				r.ok(1, "route %s %s → Service %s/%s:%s, %d ready endpoints", host, rt.Path, b.Namespace, b.Service, b.Port, len(b.Endpoints))
			}
		}
	}
	for _, c := range cfg.Certificates {
		r.ok(1, "certificate for %s from Secret %s", strings.Join(c.Hosts, ", "), c.Source)
	}
	for _, p := range problems {
		if p.Kind != "Ingress" {
			continue
		}
		r.bad(1, p.Reason+": "+p.Message, "%s: %s", p.Reason, p.Message)
	}
}

// problems lists the Warning Events on the Ingress that still stand.
func (r *report) problems(s State, ing *networkingv1.Ingress) {
	r.objectProblems(s, 1, "Ingress", ing.Namespace, ing.Name)
}

// objectProblems lists the Warning Events on an object that still stand:
// newer than an hour and not followed by their Resolved Event.
func (r *report) objectProblems(s State, depth int, kind, ns, name string) {
	var evs []eventsv1.Event
	resolved := map[string]time.Time{}
	for _, e := range s.Events {
		if e.Regarding.Kind != kind || e.Regarding.Name != name || e.Regarding.Namespace != ns {
			continue
		}
		if e.Type == corev1.EventTypeNormal && e.Reason == "Resolved" {
			if t := lastSeen(e); t.After(resolved[e.Note]) {
				resolved[e.Note] = t
			}
			continue
		}
		if e.Type == corev1.EventTypeWarning && s.Now.Sub(lastSeen(e)) < time.Hour {
			evs = append(evs, e)
		}
	}
	slices.SortFunc(evs, func(a, b eventsv1.Event) int {
		return cmp.Or(lastSeen(b).Compare(lastSeen(a)), strings.Compare(a.Reason, b.Reason), strings.Compare(a.Note, b.Note))
	})
	for _, e := range evs {
		if t, ok := resolved["resolved: "+e.Reason+": "+e.Note]; ok && !t.Before(lastSeen(e)) {
			continue
		}
		ago := s.Now.Sub(lastSeen(e)).Round(time.Second)
		r.bad(depth, e.Reason+": "+e.Note, "Event %s (%s ago, from %s): %s", e.Reason, ago, cmp.Or(e.ReportingController, "?"), e.Note)
	}
}

// lastSeen is when an Event was last observed.
func lastSeen(e eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	default:
		return e.CreationTimestamp.Time
	}
}
