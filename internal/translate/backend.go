package translate

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/route"
)

// serviceKey names a Service port as an Ingress writes it.
type serviceKey struct {
	namespace, service, port string
	byName                   bool
}

// backendKey identifies a shared route.Backend.
type backendKey struct {
	svc serviceKey
	pol policyKey
	up  upstreamKey
}

// policyKey is the comparable form of a route.Policy.
type policyKey struct {
	algorithm       route.Algorithm
	hashHeader      string
	affinity        bool
	cookie          string
	maxAge          int64
	retries         int
	connect, answer int64
	read, send      int64
}

func keyOf(p route.Policy) policyKey {
	k := policyKey{
		algorithm:  p.Algorithm,
		hashHeader: p.HashHeader,
		retries:    p.Retries,
		connect:    int64(p.ConnectTimeout),
		answer:     int64(p.ResponseTimeout),
		read:       int64(p.ReadTimeout),
		send:       int64(p.SendTimeout),
	}
	if p.Affinity != nil {
		k.affinity, k.cookie, k.maxAge = true, p.Affinity.Name, int64(p.Affinity.MaxAge)
	}
	return k
}

// resolved is the outcome of looking up a Service port and its endpoints.
// A non-empty reason is a Problem for every Ingress that uses it.
type resolved struct {
	endpoints       []route.Endpoint
	appProtocol     string
	reason, message string
	// refused is the EndpointsRefused message ("" for none) and the
	// number of refused endpoints.
	refused      string
	refusedCount int
}

// backendFor returns the shared Backend for an Ingress backend, or nil after
// reporting a Problem when the backend cannot be served at all. where names
// the field for messages, e.g. "spec.defaultBackend".
func (b *builder) backendFor(ing *networkingv1.Ingress, ib *networkingv1.IngressBackend, pol route.Policy, ua upstreamAnnotations, where string) *route.Backend {
	switch {
	case ib.Resource != nil:
		b.problem(ing, "UnsupportedBackend", where+": resource backends are not supported; skipped")
		return nil
	case ib.Service == nil:
		b.problem(ing, "InvalidBackend", where+": a service backend is required; skipped")
		return nil
	}
	svc := ib.Service
	if len(validation.IsDNS1123Label(svc.Name)) > 0 {
		b.problem(ing, "InvalidBackend", where+": service name must be a DNS-1123 label; skipped")
		return nil
	}
	key := serviceKey{namespace: ing.Namespace, service: svc.Name}
	switch {
	case svc.Port.Name != "" && svc.Port.Number != 0:
		b.problem(ing, "InvalidBackend", where+": service port must have a name or a number, not both; skipped")
		return nil
	case svc.Port.Name != "":
		if len(validation.IsValidPortName(svc.Port.Name)) > 0 {
			b.problem(ing, "InvalidBackend", where+": service port name is not a valid port name; skipped")
			return nil
		}
		key.port, key.byName = svc.Port.Name, true
	default:
		if len(validation.IsValidPortNum(int(svc.Port.Number))) > 0 {
			b.problem(ing, "InvalidBackend", where+": service port must be a name or a number from 1 to 65535; skipped")
			return nil
		}
		key.port = strconv.Itoa(int(svc.Port.Number))
	}

	b.use("s:" + key.namespace + "/" + key.service)
	res, ok := b.resolved[key]
	if !ok {
		res = b.resolve(key)
		b.resolved[key] = res
	}
	if res.reason != "" {
		b.problem(ing, res.reason, res.message)
	}
	if res.refused != "" {
		b.problem(ing, ReasonEndpointsRefused, res.refused)
	}
	proto := protocolOf(res.appProtocol)
	if ua.protocolSet {
		proto = ua.protocol
	}
	up := upstreamKey{protocol: proto}
	if proto.TLS() {
		up.caSecret, up.sni, up.skipVerify = ua.caSecret, ua.sni, ua.skipVerify
	}
	bk := backendKey{svc: key, pol: keyOf(pol), up: up}
	if be := b.backends[bk]; be != nil {
		return be
	}
	be := &route.Backend{
		Name:      key.namespace + "/" + key.service + ":" + key.port,
		Namespace: key.namespace,
		Service:   key.service,
		Port:      key.port,
		Endpoints: res.endpoints,
		Policy:    pol,
		Protocol:  proto,

		RefusedEndpoints: res.refusedCount,
	}
	if proto.TLS() {
		report := func(reason, msg string) { b.problem(ing, reason, where+": "+msg) }
		var ok bool
		if be.TLS, ok = b.upstreamTLS(report, key.namespace, key.service, ua); !ok {
			be.Endpoints = nil
		}
	}
	b.backends[bk] = be
	b.variants[key]++
	return be
}

// nameBackends makes Backend names unique: when routes use one Service port
// with different policies, each variant's name gets a suffix derived from
// its policy alone, so it is stable across builds.
func (b *builder) nameBackends() {
	for k, be := range b.backends {
		if b.variants[k.svc] > 1 {
			h := fnv.New32a()
			p := k.pol
			fmt.Fprintf(h, "%d|%s|%t|%s|%d|%d|%d|%d", p.algorithm, p.hashHeader, p.affinity, p.cookie, p.maxAge, p.retries, p.connect, p.answer)
			if u := k.up; u != (upstreamKey{}) {
				// Only backends with a protocol other than HTTP hash it, so
				// the names of the others stay as they were.
				fmt.Fprintf(h, "|%d|%s|%s|%t", u.protocol, u.caSecret, u.sni, u.skipVerify)
			}
			be.Name += fmt.Sprintf("#%08x", h.Sum32())
		}
	}
}

// resolve finds the Service port named by key and its endpoints.
func (b *builder) resolve(key serviceKey) resolved {
	nsName := key.namespace + "/" + key.service
	svc := b.services[nsName]
	switch {
	case svc == nil:
		return resolved{reason: "ServiceNotFound", message: "service " + nsName + " not found; the route answers 503 until it exists (create it, or fix the backend's service name)"}
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return resolved{reason: "UnsupportedService", message: "service " + nsName + " is of type ExternalName, which is not supported; the route answers 503"}
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if key.byName && p.Name == key.port || !key.byName && strconv.Itoa(int(p.Port)) == key.port {
			sp = p
			break
		}
	}
	if sp == nil {
		return resolved{reason: "ServicePortNotFound", message: "service " + nsName + " has no port " + key.port + "; the route answers 503 (name one of its ports, by number or name)"}
	}
	eps, refused := endpointsOf(b.slices[nsName], sp.Name, b.pods, b.opts)
	res := resolved{endpoints: eps, refusedCount: len(refused)}
	if len(refused) > 0 {
		res.refused = refusedMessage(nsName, refused)
	}
	if sp.AppProtocol != nil {
		res.appProtocol = *sp.AppProtocol
	}
	return res
}

// endpointsOf returns the addresses of the slices' port called portName:
// the ready endpoints, or, when none is ready, the serving and terminating
// ones. Sorted by address, without duplicates. Endpoints the checks refuse
// (checkEndpoint) are left out and returned as refused, ready or not.
func endpointsOf(epSlices []*discoveryv1.EndpointSlice, portName string, pods PodAddresses, opts Options) (eps []route.Endpoint, refused []refusal) {
	var ready, terminating []route.Endpoint
	for _, s := range epSlices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port := slicePort(s, portName)
		if port == 0 {
			continue
		}
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			if len(ep.Addresses) == 0 {
				continue
			}
			addr, why := checkEndpoint(s, ep, pods, opts)
			if why != "" {
				shown := strconv.Quote(truncate(ep.Addresses[0], 64))
				if addr.IsValid() {
					shown = addr.String()
				}
				refused = append(refused, refusal{address: shown, slice: strconv.Quote(truncate(s.Name, 64)), reason: why})
				continue
			}
			e := route.Endpoint{Address: net.JoinHostPort(addr.String(), strconv.Itoa(port))}
			if ep.Zone != nil {
				e.Zone = *ep.Zone
			}
			c := ep.Conditions
			isReady := c.Ready == nil || *c.Ready
			serving := c.Serving == nil || *c.Serving
			isTerminating := c.Terminating != nil && *c.Terminating
			switch {
			case isReady:
				ready = append(ready, e)
			case serving && isTerminating:
				terminating = append(terminating, e)
			}
		}
	}
	eps = ready
	if len(eps) == 0 {
		eps = terminating
	}
	slices.SortFunc(eps, func(a, b route.Endpoint) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Zone, b.Zone))
	})
	return slices.CompactFunc(eps, func(a, b route.Endpoint) bool { return a.Address == b.Address }), refused
}

// truncate cuts s to at most n bytes, for messages quoting hostile input.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// slicePort returns the number of the slice port called name (nil means ""),
// or 0.
func slicePort(s *discoveryv1.EndpointSlice, name string) int {
	for _, p := range s.Ports {
		n := ""
		if p.Name != nil {
			n = *p.Name
		}
		if n == name && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			return int(*p.Port)
		}
	}
	return 0
}
