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

// NewClaimFilter returns the filter of the Ingresses whose hosts count for
// host ownership (NewOwnership): those of every class of ours, not only of
// a fleet's own classes (Options.IngressClasses). A host then has the same
// owner on every fleet, and for the controller's Events, status and DNS
// records: a namespace cannot take another's host on a fleet that does not
// serve the owner's class (team B's Ingress of the internal class for team
// A's internet-facing host).
func NewClaimFilter(classes []*networkingv1.IngressClass, opts Options) ClassFilter {
	all := opts
	all.IngressClasses = nil
	f := NewClassFilter(classes, all)
	if len(opts.IngressClasses) == 0 {
		return f
	}
	fleet := NewClassFilter(classes, opts)
	for n := range fleet.ours {
		f.ours[n] = true
	}
	f.serveNoClass = f.serveNoClass || fleet.serveNoClass
	return f
}
