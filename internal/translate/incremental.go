package translate

// Incremental translation: Update translates again only the Ingresses whose
// output a change can alter, and splices their hosts into the previous
// table. The result is the same as Build's for the same Input (the property
// test in incremental_test.go checks it after every step of random change
// sequences).
//
// Why this is exact: every decision of Build that involves more than one
// Ingress is made per host (who owns it, which Ingress routes a path, which
// spec.tls entry gives its certificate, where a canary attaches, a tenant's
// default backend), per Secret (the hosts of one certificate), or per
// Service (backends are shared, and their names depend on every policy the
// Service port is used with). So Ingresses form groups linked by the hosts,
// Services and Secrets they touch; a wildcard host links every host one
// label below it (its certificate and TLS coverage apply to them). A change
// re-translates the group of every changed object, whole, and nothing
// outside it can see the difference. What is not per host or group falls
// back to a full translation: the catch-all default backend and rules
// without a host, wildcard hosts that come or go, IngressClasses, Options,
// the default certificate's Secret, Input.Ownership, and groups larger than
// half of the Ingresses. Input.Pods is a live index that changes under the
// Result: every Update compares the addresses of the Pods that endpoints
// name with what the last translation saw, and a change re-translates the
// Services whose endpoints name that Pod. Gateway API objects are translated again on every
// Update (there are few); if their translation changed, or the group
// touches a host, Service or Secret of theirs (where Ingresses and routes
// decide together: ownership, precedence, shared backends, certificates),
// the translation is full; otherwise their part of the table stays.
//
// The index (object → the keys it touches, key → the Ingresses touching it)
// is built by every full translation, so the first change after a full
// translation pays for nothing lazily.

import (
	"crypto/tls"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/route"
)

// Result is one translation and the index that lets Update translate the
// next Input incrementally.
type Result struct {
	Config   route.Config
	Problems []Problem
	// Full is true when every Ingress was translated.
	Full bool
	// Retranslated counts the Ingresses translated: all of them for a
	// full translation, the changed groups for an incremental one (0 when
	// nothing changed).
	Retranslated int

	idx *index // nil after Update consumed it, or without an index
}

// nsName names a namespaced object without allocating.
type nsName struct{ ns, name string }

func (n nsName) String() string { return n.ns + "/" + n.name }

// index is what Update needs of the previous translation. Update changes it
// in place: a Result passed to Update is consumed.
type index struct {
	opts Options

	ings    map[nsName]*networkingv1.Ingress
	svcs    map[nsName]*corev1.Service
	eps     map[nsName]*discoveryv1.EndpointSlice
	secs    map[nsName]*corev1.Secret
	classes []*networkingv1.IngressClass

	// The builder's lookup maps, kept in step with the objects above.
	services map[string]*corev1.Service
	slices   map[string][]*discoveryv1.EndpointSlice
	secrets  map[string]*corev1.Secret

	keysOf map[string][]string // Ingress namespace/name → keys it touches
	byKey  map[string][]string // key → Ingresses touching it
	wild   map[string]int      // wildcard hosts → Ingresses (and Gateway API rules) naming them

	gw     *gateway.Result // the Gateway API translation; nil without Options.Gateway
	gwKeys map[string]bool // the hosts, Services and Secrets gw touches

	// pods is Input.Pods (a live index: it changes under the Result),
	// nil when Pods are not watched; podSeen holds, for every Pod an
	// endpoint's targetRef names, its addresses as the last translation
	// saw them (podState), so Update finds the Services whose endpoint
	// checks a Pod change can alter.
	pods    PodAddresses
	podSeen map[string]string
}

// Translate is a full translation that also returns the index for Update.
func Translate(in Input, opts Options, cache *KeyPairCache) *Result {
	opts = opts.withDefaults()
	b := newBuilder(in, opts)
	if !canIndex(in) {
		cfg := b.build(in, cache)
		return &Result{Config: cfg, Problems: sortProblems(b.problems), Full: true, Retranslated: len(in.Ingresses)}
	}
	b.deps = make(map[string][]string, len(in.Ingresses))
	cfg := b.build(in, cache)
	r := &Result{Config: cfg, Problems: sortProblems(b.problems), Full: true, Retranslated: len(in.Ingresses)}
	r.idx = newIndex(in, opts, b)
	return r
}

// canIndex reports whether results for in can be updated incrementally.
func canIndex(in Input) bool {
	return in.Ownership == nil
}

// Update translates in, which is the Input of prev after some change,
// re-translating only what the change can alter (see the comment at the top
// of this file), and falls back to Translate where it cannot tell. prev is
// consumed: it must not be passed to Update again. A nil prev translates
// fully. The result equals Build(in, opts).
func Update(prev *Result, in Input, opts Options, cache *KeyPairCache) *Result {
	opts = opts.withDefaults()
	if prev == nil || prev.idx == nil || !canIndex(in) || !reflect.DeepEqual(prev.idx.opts, opts) {
		return Translate(in, opts, cache)
	}
	x := prev.idx
	prev.idx = nil
	if (in.Pods == nil) != (x.pods == nil) {
		return Translate(in, opts, cache)
	}
	ch, ok := x.diff(in, cache)
	if !ok || !x.sameGateway(in, opts) {
		return Translate(in, opts, cache)
	}
	if in.Pods != nil {
		x.pods = in.Pods
		ch.keys = append(ch.keys, x.podChanges()...)
	}
	if ch.empty() {
		return &Result{Config: prev.Config, Problems: prev.Problems, idx: x}
	}
	g, ok := x.group(ch)
	ok = ok && !x.touchesGateway(g)
	if ok && len(g.ings) == 0 {
		// Objects no Ingress uses.
		return &Result{Config: prev.Config, Problems: prev.Problems, idx: x}
	}
	for round := 0; ok && round < 4; round++ {
		b := x.builder(opts)
		b.pods = x.pods
		ings := make([]*networkingv1.Ingress, 0, len(g.ings))
		for id := range g.ings {
			if ing := x.ings[id]; ing != nil {
				ings = append(ings, ing)
			}
		}
		cfg := b.build(Input{Ingresses: ings, IngressClasses: in.IngressClasses}, cache)
		// An Ingress may look up objects its spec does not name
		// (annotations): if they link it to Ingresses outside the group,
		// grow the group and translate again.
		var more []string
		for _, ing := range ings {
			id := nsName{ing.Namespace, ing.Name}
			for _, k := range b.deps[id.String()] {
				if !g.keys[k] {
					more = append(more, k)
				}
			}
		}
		if len(more) > 0 {
			ok = x.grow(&g, more) && !x.touchesGateway(g)
			continue
		}
		if !g.owns(cfg, b.problems) {
			break
		}
		out := &Result{Retranslated: len(ings), idx: x}
		out.Config, out.Problems = x.splice(prev, g, cfg, b.problems)
		x.reindex(g, b.deps)
		return out
	}
	return Translate(in, opts, cache)
}

// builder returns a partial builder over the index's lookup maps.
func (x *index) builder(opts Options) *builder {
	b := &builder{
		opts:     opts,
		services: x.services,
		slices:   x.slices,
		secrets:  x.secrets,
		resolved: map[serviceKey]resolved{},
		backends: map[backendKey]*route.Backend{},
		variants: map[serviceKey]int{},
		keyPairs: map[string]keyPair{},
		sni:      map[string]sniOwner{},
		certs:    map[string][]string{},
		certOf:   map[string]*tls.Certificate{},
		vhosts:   map[string]*vhostRoutes{},
		tlsHosts: map[string]string{},
		partial:  true,
		deps:     map[string][]string{},
	}
	b.opts.Gateway = nil // its part of the table stays (sameGateway, touchesGateway)
	return b
}

// sameGateway reports whether the Gateway API objects of in translate as
// they did for the index (trivially without Options.Gateway).
func (x *index) sameGateway(in Input, opts Options) bool {
	if opts.Gateway == nil {
		return x.gw == nil
	}
	b := &builder{opts: opts}
	g := b.gatewayRules(in)
	return x.gw != nil && g != nil && reflect.DeepEqual(g.res, *x.gw)
}

// touchesGateway reports whether g shares a host, Service or Secret with
// the Gateway API rules and certificates.
func (x *index) touchesGateway(g group) bool {
	if len(x.gwKeys) == 0 {
		return false
	}
	for k := range g.keys {
		if x.gwKeys[k] {
			return true
		}
	}
	return false
}

// gatewayKeys are the keys of what a Gateway API translation touches.
func gatewayKeys(res *gateway.Result, wild map[string]int) map[string]bool {
	keys := map[string]bool{}
	host := func(h string) {
		keys["h:"+h] = true
		if strings.HasPrefix(h, "*.") {
			wild[h]++
		}
	}
	for _, r := range res.Rules {
		host(r.Host)
		if r.Backend != nil {
			keys["s:"+r.Backend.Namespace+"/"+r.Backend.Service] = true
		}
	}
	for _, c := range res.Certificates {
		keys["k:"+c.Secret] = true
		for _, h := range c.Hosts {
			host(h)
		}
	}
	return keys
}

// use records that the Ingress being added looked up key.
func (b *builder) use(key string) {
	if b.deps == nil || b.cur == "" {
		return
	}
	b.deps[b.cur] = append(b.deps[b.cur], key)
}

// specKeys are the keys of what ing names in its spec: "h:" and its hosts
// (and the wildcard one label up, when some Ingress names it), "s:" and its
// backend Services, "k:" and its TLS Secrets. global is true when it names
// the catch-all (spec.defaultBackend, a rule without a host), which Update
// does not translate incrementally; wildcard when it names a wildcard host.
func specKeys(ing *networkingv1.Ingress, wild map[string]int) (keys []string, global, wildcard bool) {
	host := func(raw string) {
		h, msg := checkHost(raw)
		if msg != "" {
			return
		}
		if h == "" {
			global = true
			return
		}
		keys = append(keys, "h:"+h)
		if strings.HasPrefix(h, "*.") {
			wildcard = true
		} else if i := strings.IndexByte(h, '.'); i > 0 && wild["*"+h[i:]] > 0 {
			keys = append(keys, "h:*"+h[i:])
		}
	}
	svc := func(be *networkingv1.IngressBackend) {
		if be != nil && be.Service != nil {
			keys = append(keys, "s:"+ing.Namespace+"/"+be.Service.Name)
		}
	}
	if ing.Spec.DefaultBackend != nil {
		global = true
		svc(ing.Spec.DefaultBackend)
	}
	for i := range ing.Spec.Rules {
		r := &ing.Spec.Rules[i]
		host(r.Host)
		if r.HTTP != nil {
			for j := range r.HTTP.Paths {
				svc(&r.HTTP.Paths[j].Backend)
			}
		}
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			host(h)
		}
		if t.SecretName != "" {
			keys = append(keys, "k:"+ing.Namespace+"/"+t.SecretName)
		}
	}
	return keys, global, wildcard
}

// wildcards counts the wildcard hosts the Ingresses name.
func wildcards(ings map[nsName]*networkingv1.Ingress) map[string]int {
	w := map[string]int{}
	for _, ing := range ings {
		for _, h := range wildHosts(ing) {
			w[h]++
		}
	}
	return w
}

func wildHosts(ing *networkingv1.Ingress) []string {
	var out []string
	add := func(raw string) {
		if h, msg := checkHost(raw); msg == "" && strings.HasPrefix(h, "*.") {
			out = append(out, h)
		}
	}
	for i := range ing.Spec.Rules {
		add(ing.Spec.Rules[i].Host)
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			add(h)
		}
	}
	return out
}

func newIndex(in Input, opts Options, b *builder) *index {
	x := &index{
		opts:     opts,
		ings:     make(map[nsName]*networkingv1.Ingress, len(in.Ingresses)),
		svcs:     make(map[nsName]*corev1.Service, len(in.Services)),
		eps:      make(map[nsName]*discoveryv1.EndpointSlice, len(in.EndpointSlices)),
		secs:     make(map[nsName]*corev1.Secret, len(in.Secrets)),
		classes:  in.IngressClasses,
		services: b.services,
		slices:   b.slices,
		secrets:  b.secrets,
		keysOf:   make(map[string][]string, len(in.Ingresses)),
		byKey:    make(map[string][]string, 2*len(in.Ingresses)),
	}
	for _, o := range in.Ingresses {
		if o != nil {
			x.ings[nsName{o.Namespace, o.Name}] = o
		}
	}
	for _, o := range in.Services {
		if o != nil {
			x.svcs[nsName{o.Namespace, o.Name}] = o
		}
	}
	for _, o := range in.EndpointSlices {
		if o != nil {
			x.eps[nsName{o.Namespace, o.Name}] = o
		}
	}
	for _, o := range in.Secrets {
		if o != nil {
			x.secs[nsName{o.Namespace, o.Name}] = o
		}
	}
	// The first definition wins in Build's maps too; duplicates in an
	// Input (which sources never produce) make the index unusable.
	if len(x.ings) != countNonNil(in.Ingresses) || len(x.svcs) != countNonNil(in.Services) ||
		len(x.eps) != countNonNil(in.EndpointSlices) || len(x.secs) != countNonNil(in.Secrets) {
		return nil
	}
	x.wild = wildcards(x.ings)
	if b.gw != nil {
		x.gw = &b.gw.res
		x.gwKeys = gatewayKeys(x.gw, x.wild)
	}
	for id, ing := range x.ings {
		x.setKeys(id.String(), ing, b.deps[id.String()])
	}
	if in.Pods != nil {
		x.pods = in.Pods
		x.podChanges()
	}
	return x
}

// podChanges compares the addresses of every Pod an endpoint's targetRef
// names with what the last translation saw, records them, and returns the
// keys ("s:namespace/service") of the Services whose endpoints name a Pod
// that changed (came, went, or changed its addresses).
func (x *index) podChanges() []string {
	seen := make(map[string]string, len(x.podSeen))
	var keys []string
	for svc, ss := range x.slices {
		changed := false
		for _, sl := range ss {
			for i := range sl.Endpoints {
				ref := sl.Endpoints[i].TargetRef
				if ref == nil {
					continue
				}
				k := ref.Namespace + "/" + ref.Name
				now, ok := seen[k]
				if !ok {
					now = podState(x.pods, ref.Namespace, ref.Name)
					seen[k] = now
				}
				if before, ok := x.podSeen[k]; !ok || before != now {
					changed = true
				}
			}
		}
		if changed {
			keys = append(keys, "s:"+svc)
		}
	}
	x.podSeen = seen
	return keys
}

// podState is a Pod's addresses as one string, "-" when it is absent.
func podState(pods PodAddresses, namespace, name string) string {
	ips, ok := pods.PodIPs(namespace, name)
	if !ok {
		return "-"
	}
	return strings.Join(ips, ",")
}

func countNonNil[T any](s []*T) int {
	n := 0
	for _, o := range s {
		if o != nil {
			n++
		}
	}
	return n
}

// setKeys records the keys of Ingress id (whose object is ing, nil when
// gone): those of its spec and deps, the keys it looked up.
func (x *index) setKeys(id string, ing *networkingv1.Ingress, deps []string) {
	for _, k := range x.keysOf[id] {
		ids := x.byKey[k]
		for i, o := range ids {
			if o == id {
				ids[i] = ids[len(ids)-1]
				ids = ids[:len(ids)-1]
				break
			}
		}
		if len(ids) == 0 {
			delete(x.byKey, k)
		} else {
			x.byKey[k] = ids
		}
	}
	if ing == nil {
		delete(x.keysOf, id)
		return
	}
	keys, _, _ := specKeys(ing, x.wild)
	keys = append(keys, deps...)
	keys = dedupe(keys)
	x.keysOf[id] = keys
	for _, k := range keys {
		x.byKey[k] = append(x.byKey[k], id)
	}
}

func dedupe(keys []string) []string {
	out := keys[:0]
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// equalObjects reports whether two versions of an object are the same for
// translation: the same pointer, or equal content. reflect.DeepEqual, not
// the API's semantic equality (which takes nil and empty as equal): a
// difference it sees that translation ignores costs a re-translation,
// never a missed change.
func equalObjects[T any](a, b *T) bool {
	return a == b || (a != nil && b != nil && reflect.DeepEqual(a, b))
}
