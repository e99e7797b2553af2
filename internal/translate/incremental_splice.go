package translate

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/route"
)

// change is what differs between the index's objects and a new Input.
type change struct {
	ings map[nsName]*networkingv1.Ingress // changed Ingresses → their old version (nil: added)
	keys []string                         // keys of changed Services, EndpointSlices and Secrets
}

func (c *change) empty() bool { return len(c.ings) == 0 && len(c.keys) == 0 }

// named is an object pointer with a namespace and name.
type named interface {
	comparable
	GetNamespace() string
	GetName() string
}

// diffObjects brings cur (the index's objects of one kind) to list, calling
// changed for every object added, removed or changed in content (after nil
// for a removed one). It reports false when list names an object twice.
func diffObjects[P named](cur map[nsName]P, list []P, equal func(a, b P) bool, changed func(id nsName, before, after P)) bool {
	var zero P
	n, kept := 0, 0
	had := len(cur)
	for _, o := range list {
		if o == zero {
			continue
		}
		n++
		id := nsName{o.GetNamespace(), o.GetName()}
		before, ok := cur[id]
		if ok {
			kept++
		}
		if ok && before == o {
			continue
		}
		cur[id] = o
		if !ok || !equal(before, o) {
			changed(id, before, o)
		}
	}
	if kept < had {
		present := make(map[nsName]struct{}, n)
		for _, o := range list {
			if o != zero {
				present[nsName{o.GetNamespace(), o.GetName()}] = struct{}{}
			}
		}
		for id, o := range cur {
			if _, ok := present[id]; !ok {
				delete(cur, id)
				changed(id, o, zero)
			}
		}
	}
	return len(cur) == n
}

// diff brings the index's objects to in and returns what changed; false
// when the change needs a full translation.
func (x *index) diff(in Input, cache *KeyPairCache) (change, bool) {
	ch := change{ings: map[nsName]*networkingv1.Ingress{}}
	if !sameClasses(x.classes, in.IngressClasses) {
		return ch, false
	}
	ok := diffObjects(x.ings, in.Ingresses, equalObjects, func(id nsName, before, _ *networkingv1.Ingress) {
		if _, seen := ch.ings[id]; !seen {
			ch.ings[id] = before
		}
	})
	ok = diffObjects(x.svcs, in.Services, equalObjects, func(id nsName, _, after *corev1.Service) {
		if after == nil {
			delete(x.services, id.String())
		} else {
			x.services[id.String()] = after
		}
		ch.keys = append(ch.keys, "s:"+id.String())
	}) && ok
	ok = diffObjects(x.eps, in.EndpointSlices, equalObjects, func(id nsName, before, after *discoveryv1.EndpointSlice) {
		if before != nil {
			if svc := before.Labels[discoveryv1.LabelServiceName]; svc != "" {
				k := id.ns + "/" + svc
				x.slices[k] = slices.DeleteFunc(slices.Clone(x.slices[k]), func(s *discoveryv1.EndpointSlice) bool {
					return s.Namespace == id.ns && s.Name == id.name
				})
				if len(x.slices[k]) == 0 {
					delete(x.slices, k)
				}
				ch.keys = append(ch.keys, "s:"+k)
			}
		}
		if after != nil {
			if svc := after.Labels[discoveryv1.LabelServiceName]; svc != "" {
				k := id.ns + "/" + svc
				x.slices[k] = append(slices.Clip(x.slices[k]), after)
				ch.keys = append(ch.keys, "s:"+k)
			}
		}
	}) && ok
	defaultCert := false
	ok = diffObjects(x.secs, in.Secrets, equalObjects, func(id nsName, _, after *corev1.Secret) {
		nn := id.String()
		if after == nil {
			delete(x.secrets, nn)
			cache.forget(nn)
		} else {
			x.secrets[nn] = after
		}
		defaultCert = defaultCert || nn == x.opts.DefaultCertificate
		ch.keys = append(ch.keys, "k:"+nn)
	}) && ok
	return ch, ok && !defaultCert
}

// sameClasses reports whether two lists hold the same IngressClasses.
func sameClasses(a, b []*networkingv1.IngressClass) bool {
	if len(a) != len(b) {
		return false
	}
	byName := make(map[string]*networkingv1.IngressClass, len(a))
	for _, c := range a {
		if c != nil {
			byName[c.Name] = c
		}
	}
	for _, c := range b {
		if c == nil {
			continue
		}
		o, ok := byName[c.Name]
		if !ok || !equalObjects(o, c) {
			return false
		}
	}
	return true
}

// group is the Ingresses a change re-translates and the keys they touch.
type group struct {
	ings map[nsName]bool
	keys map[string]bool
	x    *index
	work []nsName
}

// maxGroup is the size from which a group above half of the Ingresses is
// translated in full instead (splicing costs more than it saves).
const maxGroup = 64

// group returns the group of ch: its changed Ingresses, the Ingresses
// using its changed objects, and everything linked to them.
func (x *index) group(ch change) (group, bool) {
	g := group{ings: map[nsName]bool{}, keys: map[string]bool{}, x: x}
	for id, before := range ch.ings {
		if before != nil {
			if _, global, wild := specKeys(before, x.wild); global || wild {
				return g, false
			}
		}
		g.add(id)
	}
	return g, x.grow(&g, ch.keys)
}

func (g *group) add(id nsName) {
	if !g.ings[id] {
		g.ings[id] = true
		g.work = append(g.work, id)
	}
}

func (g *group) addKey(k string) {
	if g.keys[k] {
		return
	}
	g.keys[k] = true
	for _, id := range g.x.byKey[k] {
		ns, name, _ := strings.Cut(id, "/")
		g.add(nsName{ns, name})
	}
}

// grow adds keys to g and closes it: every Ingress touching one of its
// keys is in it. False: a full translation is needed.
func (x *index) grow(g *group, keys []string) bool {
	for _, k := range keys {
		g.addKey(k)
	}
	for len(g.work) > 0 {
		id := g.work[len(g.work)-1]
		g.work = g.work[:len(g.work)-1]
		for _, k := range x.keysOf[id.String()] {
			g.addKey(k)
		}
		if ing := x.ings[id]; ing != nil {
			keys, global, wild := specKeys(ing, x.wild)
			if global || wild && !g.unchanged(id) {
				return false
			}
			for _, k := range keys {
				g.addKey(k)
			}
		}
		if len(g.ings) > maxGroup && 2*len(g.ings) > len(x.ings) {
			return false
		}
	}
	return true
}

// unchanged reports whether id keeps the wildcard hosts it had: it is in
// the index under each of them.
func (g *group) unchanged(id nsName) bool {
	ing := g.x.ings[id]
	for _, h := range wildHosts(ing) {
		if !slices.Contains(g.x.keysOf[id.String()], "h:"+h) {
			return false
		}
	}
	return true
}

// owns reports whether a partial translation of g produced only what g's
// keys cover, so that splicing it replaces exactly its part.
func (g *group) owns(cfg route.Config, problems []Problem) bool {
	host := func(h string) bool { return g.keys["h:"+h] }
	for _, vh := range cfg.VirtualHosts {
		if !host(vh.Host) {
			return false
		}
	}
	for _, c := range cfg.Certificates {
		if !g.keys["k:"+c.Source] {
			return false
		}
	}
	for _, o := range cfg.Owners {
		if !host(o.Host) {
			return false
		}
	}
	for _, h := range cfg.NoWildcardCertificate {
		if !host(h) {
			return false
		}
	}
	for _, p := range problems {
		if p.Kind != "Ingress" || !g.ings[nsName{p.Namespace, p.Name}] {
			return false
		}
	}
	return cfg.DefaultBackend == nil
}

// splice replaces g's part of prev's table and problems with cfg and
// problems, a partial translation of g.
func (x *index) splice(prev *Result, g group, cfg route.Config, problems []Problem) (route.Config, []Problem) {
	host := func(h string) bool { return g.keys["h:"+h] }
	p := prev.Config
	// Scopes: only Gateway API rules, which a splice never touches
	// (touchesGateway sends such changes to a full translation).
	out := route.Config{DefaultBackend: p.DefaultBackend, DefaultCertificate: p.DefaultCertificate, Scopes: p.Scopes, ScopedPorts: p.ScopedPorts}
	out.VirtualHosts = merge(p.VirtualHosts, cfg.VirtualHosts, func(v route.VirtualHost) bool { return host(v.Host) },
		func(a, b route.VirtualHost) int { return strings.Compare(a.Host, b.Host) })
	out.Certificates = merge(p.Certificates, cfg.Certificates, func(c route.Certificate) bool { return g.keys["k:"+c.Source] },
		func(a, b route.Certificate) int { return strings.Compare(a.Source, b.Source) })
	out.Owners = merge(p.Owners, cfg.Owners, func(o route.HostOwner) bool { return host(o.Host) },
		func(a, b route.HostOwner) int { return strings.Compare(a.Host, b.Host) })
	out.NoWildcardCertificate = merge(p.NoWildcardCertificate, cfg.NoWildcardCertificate, host, strings.Compare)
	// As Build: no owners with ownership off, nil for no hosts.
	if x.opts.HostOwnership == HostOwnershipNone {
		out.Owners = nil
	}
	if len(out.NoWildcardCertificate) == 0 {
		out.NoWildcardCertificate = nil
	}
	if len(out.Scopes) > 0 && !slices.Equal(out.Owners, p.Owners) {
		// Scopes carry the build's host owners (scope.go): an Ingress
		// change may move the owner of a host no Gateway serves.
		out.Scopes = slices.Clone(out.Scopes)
		for i := range out.Scopes {
			out.Scopes[i].Config.Owners = out.Owners
		}
	}
	ps := make([]Problem, 0, len(prev.Problems)+len(problems))
	for _, q := range prev.Problems {
		if q.Kind != "Ingress" || !g.ings[nsName{q.Namespace, q.Name}] {
			ps = append(ps, q)
		}
	}
	ps = append(ps, problems...)
	if len(ps) == 0 {
		return out, nil // as Build
	}
	return out, sortProblems(ps)
}

// merge returns the elements of old that drop does not match, with those
// of add, in the order cmp gives; old and add are sorted by it. The result
// is a new slice.
func merge[T any](old, add []T, drop func(T) bool, order func(a, b T) int) []T {
	out := make([]T, 0, len(old)+len(add))
	i := 0
	for _, o := range old {
		if drop(o) {
			continue
		}
		for i < len(add) && order(add[i], o) < 0 {
			out = append(out, add[i])
			i++
		}
		out = append(out, o)
	}
	return append(out, add[i:]...)
}

// reindex records the keys of g's Ingresses after their translation.
func (x *index) reindex(g group, deps map[string][]string) {
	for id := range g.ings {
		s := id.String()
		x.setKeys(s, x.ings[id], deps[s])
	}
}
