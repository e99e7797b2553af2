// Package translate turns Kubernetes objects (Ingress, IngressClass, Service,
// EndpointSlice, Secret) into a route.Config. It is pure: objects in, value
// out, no I/O, clock or logger. Problems with individual objects travel out
// as data (Problem) and never stop the other objects from being served.
//
// Data flow: source (API server or manifest files) → Build → route.New →
// proxy. The proxy's rebuild loop calls Update instead (incremental.go): the
// same result, re-translating only the Ingresses a change can affect.
//
// Build follows the Ingress v1 rules of the Kubernetes documentation and the
// API server's validation, so manifests served with --manifests behave as
// they would in a cluster. Choices where the API leaves room:
//
//   - Class: an Ingress is served when spec.ingressClassName (or, if unset,
//     the legacy kubernetes.io/ingress.class annotation) names one of
//     Options.IngressClasses, or, when that list is empty,
//     Options.IngressClass or an IngressClass whose spec.controller is
//     Options.ControllerName. An Ingress with neither is served only when
//     one of those classes is annotated
//     ingressclass.kubernetes.io/is-default-class: "true". Other Ingresses
//     are ignored without a Problem: they get no route (404).
//   - Tenancy (owner.go): a host belongs to the namespace of its oldest
//     Ingress; other namespaces' rules for it are refused
//     (HostOwnedElsewhere) unless the owner shares it. Only the owner's
//     spec.tls entries choose its certificate and redirect. The catch-all
//     (a default backend for every host, rules without a host) comes only
//     from Options.DefaultBackendNamespaces (DefaultBackendRefused).
//   - Precedence: Ingresses are taken oldest creationTimestamp first, then
//     by namespace/name. The first to claim a host and path, the default
//     backend or a TLS host name keeps it; later claims get a "Conflict"
//     Problem. Prefix paths that differ only in trailing slashes ("/foo",
//     "/foo/") are the same claim, because they match the same requests;
//     so are ImplementationSpecific and Prefix with the same path. Exact
//     and Prefix never conflict.
//   - Hosts are lower-cased; invalid hosts (not a DNS-1123 subdomain or
//     "*." wildcard, or an IP address) skip their rule.
//   - Paths: ImplementationSpecific is treated as Prefix, and its empty path
//     (which the API allows) as "/". A path without pathType is reported and
//     skipped, as the API server would reject it; so are paths the API
//     rejects for Exact and Prefix (not absolute, "//", "/../", ...).
//   - Backends: only Services in the Ingress's namespace (the API has no
//     field for another). A missing Service or port, or an ExternalName
//     Service, is a Problem, but the route stays, without endpoints, so
//     clients get 503 rather than 404. Resource backends are skipped.
//   - Endpoints come from the EndpointSlices labelled
//     kubernetes.io/service-name, port matched by the Service port's name:
//     the ready ones (nil counts as ready), or, if none is ready, the
//     serving and terminating ones. FQDN slices are ignored. An endpoint is
//     used only if its targetRef is a Pod of the Service's namespace and
//     its address is not special (loopback, link-local, multicast,
//     unspecified, a cloud metadata address, ...): endpoints.go. Refused
//     endpoints are an "EndpointsRefused" Problem of every Ingress using
//     the Service, and counted in route.Backend.RefusedEndpoints.
//   - Backends are shared by routes naming the same Service port with the
//     same policy. When one Service port is used with several policies,
//     each variant's name gets a "#hash" suffix derived from its policy.
//   - TLS: a spec.tls entry without hosts covers the Ingress's own rule
//     hosts (reported and ignored if it has none); an entry without
//     secretName only asks for TLS, served with the default certificate.
//     The oldest entry naming a host owns it even if its Secret is missing
//     or broken: those hosts then get the default certificate (never a newer
//     Ingress's), and their routes stay.
//   - Annotations are parsed by one typed parser each (annotations.go); an
//     invalid value is reported as "InvalidAnnotation" and the default used.
//     There are no configuration snippets.
package translate

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/problem"
)

// ControllerName is the IngressClass spec.controller value sluice serves.
const ControllerName = "sluice.dev/ingress-controller"

// Input is one consistent view of the objects sluice reads.
type Input struct {
	Ingresses      []*networkingv1.Ingress
	IngressClasses []*networkingv1.IngressClass
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Secrets        []*corev1.Secret
	// Pods are the addresses of the Pods that endpoints' targetRefs may
	// name: an endpoint is used only when its address is one of the named
	// Pod's status.podIPs (endpoints.go). Nil: Pods are not watched
	// (--manifests mode), and a targetRef is taken at its word.
	Pods PodAddresses
	// Ownership, when non-nil, decides host ownership instead of the
	// Ingresses above: the controller translates one Ingress alone against
	// the ownership of all (NewOwnership).
	Ownership *Ownership
	// Gateway holds the Gateway API objects, read when Options.Gateway is
	// set (gateway.go).
	Gateway GatewayInput
}

// Options configure Build. The zero value is usable.
type Options struct {
	// IngressClass is the name of the class sluice serves; default "sluice".
	// Unused when IngressClasses is set.
	IngressClass string
	// ControllerName is matched against IngressClass spec.controller;
	// default ControllerName. Unused when IngressClasses is set.
	ControllerName string
	// IngressClasses, when not empty, are the only classes served: one
	// proxy fleet serves its own classes, never every class of the
	// controller. Nil: IngressClass and every class of ControllerName.
	IngressClasses []string
	// AllowEndpointsWithoutPod uses endpoints without a targetRef (those of
	// selector-less Services, whose EndpointSlices someone writes by hand).
	// False: only endpoints whose targetRef is a Pod of the Service's
	// namespace are used; the others are refused (endpoints.go).
	AllowEndpointsWithoutPod bool
	// AllowLoopbackEndpoints uses loopback endpoint addresses (127.0.0.0/8,
	// ::1), for backends on the proxy's own host in --manifests mode.
	// False: refused, as the API server refuses them.
	AllowLoopbackEndpoints bool
	// DefaultCertificate is the "namespace/name" of a kubernetes.io/tls Secret
	// served when no certificate matches the SNI name; "" for none (sluice
	// proxy then serves a self-signed certificate it generated at start).
	DefaultCertificate string
	// HostOwnership is HostOwnershipNamespace (default, "") or
	// HostOwnershipNone (owner.go).
	HostOwnership string
	// DefaultBackendNamespaces are the namespaces whose Ingresses may set
	// the catch-all: spec.defaultBackend for every host, and rules without
	// a host. "*" among them allows every namespace. nil allows every
	// namespace too (callers without a namespace of their own); the proxy
	// and the controller pass their own namespace by default.
	DefaultBackendNamespaces []string
	// SSLRedirect is the default of the sluice.dev/ssl-redirect annotation
	// (false: plain HTTP to a TLS host is served, as the Ingress
	// conformance suite expects).
	SSLRedirect bool
	// SecretsUnread: the caller does not read Secrets (the controller
	// without access to them), so in.Secrets is empty by design. Every
	// Secret an Ingress names then counts as present and valid: its hosts
	// are claimed (an Ingress serving only certificates is served), no
	// Secret problem is reported (the proxies, which read them, report
	// those), and the routing table carries no certificate for them.
	SecretsUnread bool
	// Gateway, when non-nil, serves the Gateway API objects of Input.Gateway
	// (internal/gateway) beside the Ingresses, in one table; nil ignores
	// them.
	Gateway *gateway.Options
	// IngressNginx, when non-nil, also serves the Ingresses of
	// ingress-nginx classes and reads their nginx.ingress.kubernetes.io
	// annotations with ingress-nginx's semantics (nginx.go); nil: off.
	IngressNginx *IngressNginx
	// ForwardAuthAnyURL lets sluice.dev/auth-url name any http(s) URL;
	// false: only a Service of the Ingress's namespace (forwardauth.go).
	ForwardAuthAnyURL bool
}

// Problem is something wrong with one object: Kind "Ingress" or "Secret",
// with a Reason. Target planning shares the type (internal/problem).
type Problem = problem.Problem

// withDefaults fills in the defaults of IngressClass and ControllerName.
func (o Options) withDefaults() Options {
	if o.IngressClass == "" {
		o.IngressClass = DefaultIngressClass
	}
	if o.ControllerName == "" {
		o.ControllerName = ControllerName
	}
	return o
}
