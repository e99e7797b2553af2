// Package gateway translates Gateway API objects (GatewayClass, Gateway,
// HTTPRoute, ReferenceGrant; gateway.networking.k8s.io/v1) into routing rules
// for the one routing table sluice serves, and computes the status of every
// object of its classes as data. It is pure: objects in, value out, no I/O,
// clock or logger.
//
// Data flow: source → Build (here) → Result.Rules → translate (merged
// beside the Ingress routes into one route.Config) → route.New → proxy; and
// Build → Result's statuses → internal/controller/gatewaystatus → API server.
//
// What is served, following the Gateway API specification:
//
//   - GatewayClasses whose spec.controllerName is ControllerName; with
//     Options.GatewayClass only that class (one proxy fleet serves its own
//     class). A parametersRef must name a sluice.dev LoadBalancerBinding.
//   - Gateway listeners of protocol HTTP on Options.HTTPPort (or one of
//     Options.ExtraHTTPPorts) and HTTPS (TLS mode Terminate) on
//     Options.HTTPSPort (or one of Options.ExtraHTTPSPorts), with
//     hostnames, certificateRefs
//     to kubernetes.io/tls Secrets of the Gateway's namespace or of another
//     namespace with a ReferenceGrant, and allowedRoutes (namespaces Same,
//     All or Selector; kind HTTPRoute). Two listeners on one port with the
//     same hostname conflict: the first keeps it.
//   - HTTPRoutes whose parentRefs (sectionName, port) reach such listeners
//     and are allowed there, for the intersection of their hostnames with
//     the listener's; path matches Exact, PathPrefix and RegularExpression
//     (RE2 against the whole path, routes.go), with header and query
//     parameter matches (Exact, RegularExpression) and method matches
//     (matches.go); backendRefs to Service ports of the route's
//     namespace, or of another namespace with a ReferenceGrant, divided
//     by weight (backends.go); the filters RequestHeaderModifier,
//     ResponseHeaderModifier, RequestRedirect, URLRewrite and
//     RequestMirror (filters.go); timeouts.
//   - BackendTLSPolicies targeting Services of their own namespace: the
//     backends of those Services are reached over TLS, verified against
//     the policy's CA ConfigMaps or the system roots, and its hostname
//     or subjectAltNames (backendtls.go, backendtls_san.go).
//
// Not served, and never served as something else: backendRef filters,
// retry, sessionPersistence and the other filter types. A rule with any of them is left out and the route says so
// (PartiallyInvalid, or Accepted=False when no rule is left, reason
// UnsupportedValue). A backendRef that cannot be resolved (wrong kind,
// missing Service, another namespace without a ReferenceGrant) keeps its
// share of the rule's requests with no endpoints, so they answer 500 and
// never fall through to another route or reach the other namespace.
//
// Scopes: a Gateway holding one of Options.Addresses in its status, and a
// listener on an extra port, are served apart (Rule.Scope, Rule.Port):
// translate builds a route.Scope table for each, chosen by the address
// and port a request reached.
//
// Precedence follows the specification: routes are taken oldest first, then
// by namespace/name, then rules in order; rules with a method, more header
// matches, more query matches come first (route.Conditions groups the
// rules of one path in that order); translate keeps the first claim of a
// host, path and conditions.
package gateway

import (
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/problem"
	"sluice.dev/sluice/internal/route"
)

// ControllerName is the GatewayClass spec.controllerName sluice serves.
const ControllerName gatewayv1.GatewayController = "sluice.dev/gateway-controller"

// Group is the Gateway API group.
const Group = gatewayv1.GroupName

// Input is one consistent view of the objects Build reads. Services and
// Secrets are those translate reads too (Secrets: kubernetes.io/tls only).
type Input struct {
	GatewayClasses []*gatewayv1.GatewayClass
	Gateways       []*gatewayv1.Gateway
	HTTPRoutes     []*gatewayv1.HTTPRoute
	// GRPCRoutes (grpcroute.go); nil when the CRD is not served.
	GRPCRoutes      []*gatewayv1.GRPCRoute
	ReferenceGrants []*gatewayv1.ReferenceGrant
	// Namespaces, for allowedRoutes namespace selectors (their labels).
	Namespaces []*corev1.Namespace
	Services   []*corev1.Service
	Secrets    []*corev1.Secret
	// BackendTLSPolicies (backendtls.go); nil when the CRD is not served.
	BackendTLSPolicies []*gatewayv1.BackendTLSPolicy
	// ConfigMaps the policies' caCertificateRefs may name (only their
	// "ca.crt" is read).
	ConfigMaps []*corev1.ConfigMap
}

// Options configure Build. The zero value serves every class of
// ControllerName on ports 80 and 443.
type Options struct {
	// GatewayClass, when set, is the only class served; "" serves every
	// GatewayClass of ControllerName (the controller writing statuses).
	GatewayClass string
	// Gateway, when set ("namespace/name"), is the only Gateway served: a
	// proxy fleet of its own for one Gateway (the proxies' --gateway).
	// Routes attached to other Gateways are left out; so are the other
	// Gateways' statuses (the controller never sets it).
	Gateway string
	// HTTPPort and HTTPSPort are the listener ports the proxy serves HTTP
	// and HTTPS on, as the load balancer in front exposes them; 0 means 80
	// and 443. Listeners on other ports are refused (PortUnavailable).
	HTTPPort, HTTPSPort int32
	// ExtraHTTPPorts and ExtraHTTPSPorts are more ports the load balancer
	// exposes for Gateway listeners, forwarding to the proxies' plain or
	// TLS port with a PROXY protocol header whose destination port says
	// which one a connection reached. A listener on one is served apart
	// from the main ports (Rule.Port).
	ExtraHTTPPorts, ExtraHTTPSPorts []int32
	// SecretsUnread: the caller does not read Secrets (the controller
	// without access to them); every certificateRef's Secret then counts
	// as present.
	SecretsUnread bool
	// Addresses are the load-balancer addresses Gateways hold one each
	// (LoadBalancerBinding spec.gatewayAddresses; the proxies'
	// --gateway-addresses). A Gateway whose status.addresses holds one of
	// them is served apart, in that address's scope (Rule.Scope,
	// Certificate.Scope). With Addresses set, a Gateway holding none is not
	// served: it has no address yet. Statuses do not depend on it.
	Addresses []netip.Addr
}

func (o Options) withDefaults() Options {
	if o.HTTPPort == 0 {
		o.HTTPPort = 80
	}
	if o.HTTPSPort == 0 {
		o.HTTPSPort = 443
	}
	return o
}

// Result is what Build produces.
type Result struct {
	// Rules in precedence order: translate keeps the first claim of a host
	// and path.
	Rules []Rule
	// Certificates of the HTTPS listeners, in Gateway and listener order.
	Certificates []Certificate
	// Statuses of the objects of our classes, sorted by namespace/name.
	GatewayClasses []ClassStatus
	Gateways       []GatewayStatus
	HTTPRoutes     []RouteStatus
	GRPCRoutes     []RouteStatus
	// BackendTLSPolicies: the status.ancestors entries of each policy
	// that applies to a backend of a served route (backendtls.go).
	BackendTLSPolicies []PolicyStatus
	// Problems are the same findings as the statuses, for logs, metrics and
	// Events; sorted.
	Problems []problem.Problem
}

// Rule sends requests for Host matching PathType and Path to Backend.
type Rule struct {
	// Host is lower case; "" matches every host, "*.example.com" one label.
	Host     string
	PathType route.PathType
	Path     string
	// Conditions: the match's method, header and query parameter matches
	// (matches.go); nil for none.
	Conditions *route.Conditions
	// Backend is nil when the rule's backendRef cannot be used (or every
	// weight is 0): the path stays claimed and answers 500.
	Backend *BackendRef
	// Backends, when the rule divides its requests among several
	// backendRefs: each with a weight above 0, in order; an entry with a
	// nil Ref cannot be used and its share answers 500 (backends.go).
	// Backend is then the first usable one.
	Backends []WeightedRef
	// Filters are the rule's header modifiers, redirect and rewrite
	// (filters.go); nil for none.
	Filters *route.Filters
	// Mirrors get a copy of every request (RequestMirror).
	Mirrors []BackendRef
	// Timeout bounds the wait for the backend's response (the smaller of
	// timeouts.request and timeouts.backendRequest); 0 for the proxy's
	// default.
	Timeout time.Duration
	// Route is the HTTPRoute (or with GRPC the GRPCRoute),
	// "namespace/name".
	Route string
	// GRPC: the rule is a GRPCRoute's; its backends speak gRPC.
	GRPC bool
	// HTTPSOnly: attached only through HTTPS listeners, so plain HTTP
	// requests are redirected to HTTPS rather than served.
	HTTPSOnly bool
	// Scope is the address of the Gateway the rule is served through when
	// that Gateway holds an address of its own (Options.Addresses); "" for
	// the table every Gateway of the class shares.
	Scope string
	// Port is the listener port of one of Options.Extra*Ports the rule is
	// served through, 0 for the main ports (HTTPPort and HTTPSPort).
	Port int32
}

// BackendRef is a resolved Service port.
type BackendRef struct {
	Namespace, Service string
	Port               int32
	// TLS is set when a BackendTLSPolicy applies to the Service port: the
	// proxy then speaks TLS to its endpoints (backendtls.go).
	TLS *BackendTLS
}

// Certificate is a listener's certificate Secret and the host names it
// serves.
type Certificate struct {
	// Secret is "namespace/name".
	Secret string
	// Hosts: the listener's hostname, or the hostnames of the routes
	// attached to it when it has none. Sorted.
	Hosts []string
	// Gateway is "namespace/name" of the Gateway.
	Gateway string
	// Scope is the Gateway's own address, as Rule.Scope; Port the
	// listener's port when it is one of Options.ExtraHTTPSPorts, else 0.
	Scope string
	Port  int32
	// AnyHost: the listener has no hostname, so its certificate also
	// answers server names no other certificate covers (translate makes
	// the first such one the default certificate when the proxy has none
	// configured). Hosts may then be empty.
	AnyHost bool
}

// ClassStatus is the status of one GatewayClass of ControllerName.
type ClassStatus struct {
	Name   string
	Status gatewayv1.GatewayClassStatus
}

// GatewayStatus is the status of one Gateway of our classes, without
// addresses (the controller adds those from the load balancer binding).
// Conditions carry no LastTransitionTime: the writer sets it.
type GatewayStatus struct {
	Namespace, Name string
	Status          gatewayv1.GatewayStatus
}

// RouteStatus is one HTTPRoute's status.parents entries written by
// ControllerName (other controllers' entries are theirs).
type RouteStatus struct {
	Namespace, Name string
	Parents         []gatewayv1.RouteParentStatus
}
