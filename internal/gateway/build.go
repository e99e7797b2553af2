package gateway

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/problem"
)

// builder holds the state of one Build call.
type builder struct {
	opts       Options
	res        Result
	services   map[string]*corev1.Service   // namespace/name
	secrets    map[string]*corev1.Secret    // namespace/name
	keyPairs   map[string]error             // namespace/name → keyPairOK's verdict, once per Build
	namespaces map[string]*corev1.Namespace // name
	grants     []*gatewayv1.ReferenceGrant
	gateways   map[string][]*listener // namespace/name of served Gateways → listeners
	gwStatus   map[string]int         // namespace/name → index in res.Gateways
}

// Build translates the Gateway API objects of our classes. It never fails
// as a whole: whatever cannot be served is left out and said in the
// statuses and Problems. The result does not depend on the order of the
// objects in in, and Build does not modify in.
func Build(in Input, opts Options) Result {
	b := &builder{
		opts:       opts.withDefaults(),
		services:   map[string]*corev1.Service{},
		secrets:    map[string]*corev1.Secret{},
		namespaces: map[string]*corev1.Namespace{},
		gateways:   map[string][]*listener{},
		gwStatus:   map[string]int{},
	}
	for _, s := range in.Services {
		if s != nil {
			b.services[s.Namespace+"/"+s.Name] = s
		}
	}
	for _, s := range in.Secrets {
		if s != nil {
			b.secrets[s.Namespace+"/"+s.Name] = s
		}
	}
	for _, n := range in.Namespaces {
		if n != nil {
			b.namespaces[n.Name] = n
		}
	}
	for _, g := range in.ReferenceGrants {
		if g != nil {
			b.grants = append(b.grants, g)
		}
	}

	classes := slices.DeleteFunc(slices.Clone(in.GatewayClasses), func(c *gatewayv1.GatewayClass) bool { return c == nil })
	slices.SortFunc(classes, func(x, y *gatewayv1.GatewayClass) int { return strings.Compare(x.Name, y.Name) })
	served := b.classes(Input{GatewayClasses: classes})

	gws := slices.DeleteFunc(slices.Clone(in.Gateways), func(g *gatewayv1.Gateway) bool {
		return g == nil || !served[string(g.Spec.GatewayClassName)] ||
			b.opts.Gateway != "" && g.Namespace+"/"+g.Name != b.opts.Gateway
	})
	slices.SortFunc(gws, func(x, y *gatewayv1.Gateway) int {
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name))
	})
	for _, gw := range gws {
		b.gateways[gw.Namespace+"/"+gw.Name] = b.gateway(gw)
	}

	routes := slices.DeleteFunc(slices.Clone(in.HTTPRoutes), func(r *gatewayv1.HTTPRoute) bool { return r == nil })
	slices.SortFunc(routes, olderFirst)
	for _, r := range routes {
		b.httpRoute(r)
	}
	grpcs := slices.DeleteFunc(slices.Clone(in.GRPCRoutes), func(r *gatewayv1.GRPCRoute) bool { return r == nil })
	slices.SortFunc(grpcs, olderGRPCFirst)
	for _, r := range grpcs {
		b.grpcRoute(r) // grpcroute.go
	}
	byTarget, pols := b.tlsPolicies(in.BackendTLSPolicies, in.ConfigMaps) // backendtls.go
	b.applyBackendTLS(byTarget, pols)
	slices.SortStableFunc(b.res.Rules, specificity) // matches.go
	b.certificates(gws)
	b.listenerStatuses()

	slices.SortFunc(b.res.BackendTLSPolicies, func(x, y PolicyStatus) int {
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name))
	})
	for _, sts := range [][]RouteStatus{b.res.HTTPRoutes, b.res.GRPCRoutes} {
		slices.SortFunc(sts, func(x, y RouteStatus) int {
			return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name))
		})
	}
	slices.SortFunc(b.res.Problems, problem.Compare)
	b.res.Problems = slices.Compact(b.res.Problems)
	return b.res
}

// olderFirst is the specification's route precedence: the oldest
// creationTimestamp, then namespace/name.
func olderFirst(a, b *gatewayv1.HTTPRoute) int {
	return cmp.Or(
		a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name),
	)
}

// certificates emits each programmed HTTPS listener's certificate for its
// hostname, or for the hosts of the routes attached to it.
func (b *builder) certificates(gws []*gatewayv1.Gateway) {
	for _, gw := range gws {
		for _, ln := range b.gateways[gw.Namespace+"/"+gw.Name] {
			if !ln.usable || ln.unserved || ln.cert == "" {
				continue
			}
			var hosts []string
			if ln.host != "" {
				hosts = []string{ln.host}
			} else {
				for h := range ln.attached {
					if h != "" {
						hosts = append(hosts, h)
					}
				}
				slices.Sort(hosts)
			}
			if len(hosts) == 0 && ln.host != "" {
				continue
			}
			b.res.Certificates = append(b.res.Certificates, Certificate{Secret: ln.cert, Hosts: hosts, Gateway: gw.Namespace + "/" + gw.Name, AnyHost: ln.host == "", Scope: ln.scope, Port: ln.port})
		}
	}
}

// granted reports whether a ReferenceGrant in namespace toNS allows objects
// of fromGroup/fromKind in fromNS to refer to toGroup/toKind named name.
func (b *builder) granted(fromNS, fromKind, fromGroup, toNS, toGroup, toKind, name string) bool {
	for _, g := range b.grants {
		if g.Namespace != toNS {
			continue
		}
		from := slices.ContainsFunc(g.Spec.From, func(f gatewayv1.ReferenceGrantFrom) bool {
			return string(f.Group) == fromGroup && string(f.Kind) == fromKind && string(f.Namespace) == fromNS
		})
		if !from {
			continue
		}
		to := slices.ContainsFunc(g.Spec.To, func(t gatewayv1.ReferenceGrantTo) bool {
			return string(t.Group) == toGroup && string(t.Kind) == toKind && (t.Name == nil || *t.Name == "" || string(*t.Name) == name)
		})
		if to {
			return true
		}
	}
	return false
}

func (b *builder) problem(kind, ns, name, reason, msg string) {
	b.res.Problems = append(b.res.Problems, problem.Problem{Kind: kind, Namespace: ns, Name: name, Reason: reason, Message: msg})
}

// condition is a metav1.Condition without LastTransitionTime (the status
// writer sets it; Build has no clock).
func condition(typ string, ok bool, reason, msg string, gen int64) metav1.Condition {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: truncate(msg, 32768), ObservedGeneration: gen}
}

func ptr[T any](v T) *T { return &v }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
