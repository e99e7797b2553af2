// Package translate turns Kubernetes objects (Ingress, IngressClass, Service,
// EndpointSlice, Secret) into a route.Config. It is pure: objects in, value
// out, no I/O, clock or logger. Problems with individual objects travel out
// as data (Problem) and never stop the other objects from being served.
//
// Data flow: source (API server or manifest files) → Build → route.New →
// proxy.
package translate

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
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
}

// Options configure Build. The zero value is usable.
type Options struct {
	// IngressClass is the name of the class sluice serves; default "sluice".
	IngressClass string
	// ControllerName is matched against IngressClass spec.controller;
	// default ControllerName.
	ControllerName string
	// DefaultCertificate is the "namespace/name" of a kubernetes.io/tls Secret
	// served when no certificate matches the SNI name; "" for none.
	DefaultCertificate string
}

// Problem is something wrong with one object. The object's other parts, and
// every other object, are still served where possible.
type Problem struct {
	Kind      string // "Ingress", "Secret", ...
	Namespace string
	Name      string
	// Reason is a short CamelCase word for Events and metrics labels, e.g.
	// "InvalidAnnotation", "ServiceNotFound", "Conflict".
	Reason string
	// Message says what is wrong and what was done about it.
	Message string
}
