package translate

import networkingv1 "k8s.io/api/networking/v1"

// namedClasses returns the class names opts serves by name: IngressClasses,
// or, when that is empty, IngressClass. opts has its defaults.
func namedClasses(opts Options) map[string]bool {
	if len(opts.IngressClasses) == 0 {
		return map[string]bool{opts.IngressClass: true}
	}
	ours := make(map[string]bool, len(opts.IngressClasses))
	for _, n := range opts.IngressClasses {
		ours[n] = true
	}
	return ours
}

// ownsController reports whether c is served because of its controller:
// only without an explicit IngressClasses list, where every class of
// ControllerName is ours (the behaviour before classes were split into
// fleets).
func ownsController(opts Options, c *networkingv1.IngressClass) bool {
	return len(opts.IngressClasses) == 0 && c.Spec.Controller == opts.ControllerName
}
