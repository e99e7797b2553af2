package ingressstatus

import (
	"cmp"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	"sluice.dev/sluice/internal/translate"
)

// Parameters of an IngressClass that name its binding.
const (
	ParametersAPIGroup = "sluice.dev"
	ParametersKind     = "LoadBalancerBinding"
)

const (
	annotationIngressClass = "kubernetes.io/ingress.class"
	annotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
)

// ServingOptions configures NewServing.
type ServingOptions struct {
	// IngressClass and ControllerName select our classes, as for the
	// proxy. Defaults "sluice" and translate.ControllerName.
	IngressClass, ControllerName string
	// IngressNginx also serves ingress-nginx classes; nil: off.
	IngressNginx *translate.IngressNginx
	// Namespace is the controller's own namespace: the bindings there
	// serve the Ingresses of our classes that name no binding in
	// spec.parameters. Empty: such Ingresses get no addresses.
	Namespace string
	// Allowed says which bindings the controller may act on (its
	// --binding-namespaces and allow-lists); the others lend no address
	// to any Ingress. Nil: every binding.
	Allowed func(*v1alpha1.LoadBalancerBinding) bool
	// HostOwnership is the proxies' --host-ownership (translate.Options):
	// hosts owned by another namespace than an Ingress's are not its
	// (Hosts). "": namespace ownership.
	HostOwnership string
}

// Serving answers which load balancer serves an Ingress: its class's
// binding(s). An IngressClass names its binding in spec.parameters
// (apiGroup sluice.dev, kind LoadBalancerBinding, scope Namespace, a
// namespace and a name); a class of ours without such parameters is
// served by every binding in the controller's namespace. No other binding
// ever puts its addresses on an Ingress. It is pure over the listings it
// was built from.
type Serving struct {
	filter       translate.ClassFilter
	classes      map[string]*networkingv1.IngressClass
	defaultClass string
	bindings     []v1alpha1.LoadBalancerBinding
	namespace    string
	ownership    string // ServingOptions.HostOwnership
}

// NewServing indexes the listings.
func NewServing(classes []networkingv1.IngressClass, bindings []v1alpha1.LoadBalancerBinding, o ServingOptions) *Serving {
	o.IngressClass = cmp.Or(o.IngressClass, "sluice")
	o.ControllerName = cmp.Or(o.ControllerName, translate.ControllerName)
	ptrs := make([]*networkingv1.IngressClass, len(classes))
	if o.Allowed != nil {
		bindings = slices.DeleteFunc(slices.Clone(bindings), func(b v1alpha1.LoadBalancerBinding) bool { return !o.Allowed(&b) })
	}
	s := &Serving{classes: map[string]*networkingv1.IngressClass{}, bindings: bindings, namespace: o.Namespace, ownership: o.HostOwnership}
	for i := range classes {
		c := &classes[i]
		ptrs[i] = c
		s.classes[c.Name] = c
	}
	s.filter = translate.NewClassFilter(ptrs, translate.Options{IngressClass: o.IngressClass, ControllerName: o.ControllerName, IngressNginx: o.IngressNginx})
	defaults := []string{}
	for _, c := range classes {
		if (c.Name == o.IngressClass || c.Spec.Controller == o.ControllerName) && c.Annotations[annotationDefaultClass] == "true" {
			defaults = append(defaults, c.Name)
		}
	}
	slices.Sort(defaults)
	if len(defaults) > 0 {
		s.defaultClass = defaults[0]
	}
	return s
}

// Serves reports whether ing is ours.
func (s *Serving) Serves(ing *networkingv1.Ingress) bool { return s.filter.Serves(ing) }

// Addresses returns the addresses of the binding(s) that serve ing, sorted
// and without duplicates, and whether they are known: false when ing is
// not ours, its class names a binding that does not exist (or is being
// deleted), or the bindings have no address yet. Callers keep what they
// published before while the addresses are not known.
func (s *Serving) Addresses(ing *networkingv1.Ingress) ([]v1alpha1.LoadBalancerAddress, bool) {
	if !s.Serves(ing) {
		return nil, false
	}
	var out []v1alpha1.LoadBalancerAddress
	for _, b := range s.bindingsOf(s.className(ing)) {
		out = append(out, bindingAddresses(b)...)
	}
	slices.SortFunc(out, compareAddress)
	out = slices.Compact(out)
	return out, len(out) > 0
}

// className is the class an Ingress of ours is in: spec.ingressClassName,
// else the legacy annotation, else the default class.
func (s *Serving) className(ing *networkingv1.Ingress) string {
	if ing.Spec.IngressClassName != nil {
		return *ing.Spec.IngressClassName
	}
	if v, ok := ing.Annotations[annotationIngressClass]; ok {
		return v
	}
	return s.defaultClass
}

// bindingsOf returns the live bindings that serve class name.
func (s *Serving) bindingsOf(name string) []*v1alpha1.LoadBalancerBinding {
	var ns, bname string
	if c := s.classes[name]; c != nil && c.Spec.Parameters != nil &&
		c.Spec.Parameters.APIGroup != nil && *c.Spec.Parameters.APIGroup == ParametersAPIGroup && c.Spec.Parameters.Kind == ParametersKind {
		p := c.Spec.Parameters
		if p.Scope == nil || *p.Scope != networkingv1.IngressClassParametersReferenceScopeNamespace || p.Namespace == nil || *p.Namespace == "" {
			return nil // a binding is namespaced: an invalid reference serves nothing
		}
		ns, bname = *p.Namespace, p.Name
	} else if s.namespace == "" {
		return nil
	} else {
		ns = s.namespace
	}
	var out []*v1alpha1.LoadBalancerBinding
	for i := range s.bindings {
		b := &s.bindings[i]
		if b.DeletionTimestamp == nil && b.Namespace == ns && (bname == "" || b.Name == bname) {
			out = append(out, b)
		}
	}
	return out
}

// AllAddresses is every address of every binding: what sluice may have
// published on any Ingress.
func (s *Serving) AllAddresses() []v1alpha1.LoadBalancerAddress {
	var out []v1alpha1.LoadBalancerAddress
	for i := range s.bindings {
		out = append(out, bindingAddresses(&s.bindings[i])...)
	}
	return out
}

// bindingAddresses: status.addresses, or spec.publish while the status
// has none yet (a binding the controller has not reconciled).
func bindingAddresses(b *v1alpha1.LoadBalancerBinding) []v1alpha1.LoadBalancerAddress {
	if len(b.Status.Addresses) > 0 {
		return b.Status.Addresses
	}
	return binding.PublishedAddresses(b.Spec.Publish)
}

func compareAddress(a, b v1alpha1.LoadBalancerAddress) int {
	return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.Hostname, b.Hostname),
		cmp.Compare(a.CanonicalHostedZoneID, b.CanonicalHostedZoneID), cmp.Compare(a.LoadBalancerARN, b.LoadBalancerARN))
}

// ClassName is the class ing is in and where that came from:
// "spec.ingressClassName", "annotation kubernetes.io/ingress.class" or
// "default class" ("" when there is none).
func (s *Serving) ClassName(ing *networkingv1.Ingress) (name, from string) {
	switch {
	case ing.Spec.IngressClassName != nil:
		from = "spec.ingressClassName"
	case hasKey(ing.Annotations, annotationIngressClass):
		from = "annotation " + annotationIngressClass
	default:
		from = "default class"
	}
	return s.className(ing), from
}

// BindingsOf returns the live bindings that serve class name (see
// Serving).
func (s *Serving) BindingsOf(name string) []*v1alpha1.LoadBalancerBinding { return s.bindingsOf(name) }

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
