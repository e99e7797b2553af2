package translate

import (
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/route"
)

// Tenancy: who owns a host, and who may set the catch-all.
//
// A host (exact or "*." wildcard) belongs to the namespace of its oldest
// Ingress of ours, by rule host or spec.tls host, whether or not that
// Ingress is otherwise valid (as the oldest TLS entry keeps its host while
// its Secret is broken). Other namespaces' rules for the host are not
// served, all of them, unless an Ingress of the owner that names the host
// lists them in AnnotationShareHostWith. Only the owner's spec.tls entries
// choose the host's certificate and turn on its redirect; sharing does not
// hand those over.
//
// The catch-all (spec.defaultBackend for every host, and rules without a
// host) is the platform's: only namespaces in
// Options.DefaultBackendNamespaces set it. Elsewhere spec.defaultBackend
// serves the unmatched paths of its Ingress's own hosts only.

// AnnotationShareHostWith, on an Ingress of the namespace that owns its
// hosts, lets the listed namespaces (comma-separated) serve rules under
// those hosts.
const AnnotationShareHostWith = "sluice.dev/share-host-with"

// Host ownership modes (Options.HostOwnership).
const (
	// HostOwnershipNamespace: a host belongs to the namespace of its oldest
	// Ingress (default).
	HostOwnershipNamespace = "namespace"
	// HostOwnershipNone: any namespace may add paths under any host; only
	// identical host+path+pathType claims conflict (single-tenant clusters).
	HostOwnershipNone = "none"
)

// Reasons of the tenancy Problems (Events on the refused Ingress). Their
// messages never name the other namespace.
const (
	ReasonHostOwnedElsewhere    = "HostOwnedElsewhere"
	ReasonDefaultBackendRefused = "DefaultBackendRefused"
)

// maxShareNamespaces bounds AnnotationShareHostWith.
const maxShareNamespaces = 64

// Ownership decides which namespace owns each host. The zero value and nil
// own nothing: every namespace may serve every host.
type Ownership struct {
	on     bool
	owner  map[string]string          // host → namespace
	shared map[string]map[string]bool // host → namespaces the owner shares it with
}

// NewOwnership computes host ownership from the Ingresses of our classes
// (the caller filters them with ClassFilter) under mode (Options
// .HostOwnership; "" is HostOwnershipNamespace). ings is not modified.
func NewOwnership(ings []*networkingv1.Ingress, mode string) *Ownership {
	if mode == HostOwnershipNone {
		return &Ownership{}
	}
	sorted := make([]*networkingv1.Ingress, 0, len(ings))
	for _, ing := range ings {
		if ing != nil {
			sorted = append(sorted, ing)
		}
	}
	slices.SortFunc(sorted, olderFirst)
	o := &Ownership{on: true, owner: make(map[string]string, len(sorted)), shared: map[string]map[string]bool{}}
	for _, ing := range sorted {
		c := claimer{o: o, ing: ing}
		for i := range ing.Spec.Rules {
			c.claim(ing.Spec.Rules[i].Host)
		}
		for i := range ing.Spec.TLS {
			for _, h := range ing.Spec.TLS[i].Hosts {
				c.claim(h)
			}
		}
	}
	return o
}

// claimer claims the hosts of one Ingress, oldest first.
type claimer struct {
	o         *Ownership
	ing       *networkingv1.Ingress
	share     []string // its AnnotationShareHostWith, read once it owns a host
	shareRead bool
}

// claim gives a valid, non-empty host to the Ingress's namespace unless an
// older Ingress took it, and records whom the owner shares it with.
func (c *claimer) claim(raw string) {
	h, msg := checkHost(raw)
	if msg != "" || h == "" {
		return
	}
	ns, taken := c.o.owner[h]
	if !taken {
		c.o.owner[h], ns = c.ing.Namespace, c.ing.Namespace
	}
	if ns != c.ing.Namespace {
		return
	}
	if !c.shareRead {
		c.share, _ = parseShareHostWith(c.ing.Annotations)
		c.shareRead = true
	}
	for _, s := range c.share {
		if c.o.shared[h] == nil {
			c.o.shared[h] = map[string]bool{}
		}
		c.o.shared[h][s] = true
	}
}

// Owner returns the namespace owning host, "" when ownership is off or no
// Ingress names the host.
func (o *Ownership) Owner(host string) string {
	if o == nil || !o.on {
		return ""
	}
	return o.owner[host]
}

// Owns reports whether namespace ns owns host: its spec.tls entries choose
// the certificate and the redirect. True when ownership is off or no
// Ingress names the host.
func (o *Ownership) Owns(ns, host string) bool {
	if o == nil || !o.on {
		return true
	}
	owner, ok := o.owner[host]
	return !ok || owner == ns
}

// Serves reports whether rules of namespace ns for host are served: ns owns
// host, or its owner shares it with ns.
func (o *Ownership) Serves(ns, host string) bool {
	if o.Owns(ns, host) {
		return true
	}
	return o.shared[host][ns]
}

// owners is the route.Config form: every owned host, sorted.
func (o *Ownership) owners() []route.HostOwner {
	if o == nil || !o.on {
		return nil
	}
	out := make([]route.HostOwner, 0, len(o.owner))
	for h, ns := range o.owner {
		out = append(out, route.HostOwner{Host: h, Namespace: ns})
	}
	slices.SortFunc(out, func(a, b route.HostOwner) int { return strings.Compare(a.Host, b.Host) })
	return out
}

// parseShareHostWith reads AnnotationShareHostWith: namespace names
// (DNS-1123 labels) separated by commas, spaces around them ignored, at most
// maxShareNamespaces. Invalid names are left out and reported.
func parseShareHostWith(ann map[string]string) ([]string, []annotationError) {
	v, ok := ann[AnnotationShareHostWith]
	if !ok {
		return nil, nil
	}
	var out []string
	bad := false
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
			continue
		case len(out) == maxShareNamespaces:
			return out, []annotationError{{AnnotationShareHostWith, "lists more than 64 namespaces; the rest are ignored"}}
		case len(validation.IsDNS1123Label(f)) > 0:
			bad = true
			continue
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	if bad {
		return out, []annotationError{{AnnotationShareHostWith, "must be namespace names separated by commas; invalid names are ignored"}}
	}
	return out, nil
}

// defaultBackendFrom reports whether Ingresses of namespace ns may set the
// catch-all.
func (o Options) defaultBackendFrom(ns string) bool {
	if o.DefaultBackendNamespaces == nil {
		return true
	}
	return slices.Contains(o.DefaultBackendNamespaces, ns) || slices.Contains(o.DefaultBackendNamespaces, "*")
}
