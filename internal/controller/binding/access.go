package binding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
)

// ReasonForbidden is the condition reason and Event of a binding the
// controller may not act on: its namespace, HAProxy runtime API or AWS
// target groups are outside what the controller was told to allow.
//
// Whoever may create a LoadBalancerBinding could otherwise make the
// controller dial any address it reaches (a runtime API is a TCP address
// or a unix socket on the controller's host) or change any target group
// its credentials reach. A forbidden binding is never acted on: no
// finalizer, no provider, no listing, no registration.
const ReasonForbidden = "Forbidden"

// Any, as the only or one entry of an Access list, allows everything.
const Any = "*"

// Access says which bindings (and IngressDaemonSets) the controller may
// act on. An empty list allows everything, so the zero Access allows
// every binding; `sluice controller` never leaves a list empty (its flags
// default to the controller's own namespace and to no load balancer).
type Access struct {
	// Namespaces whose bindings may be acted on.
	Namespaces []string
	// IngressDaemonSets are the namespaces whose IngressDaemonSets may be
	// acted on. An IngressDaemonSet pins pods to nodes (nodeName, past
	// taints) and runs a health checker on the host network, so this is
	// its own list, not Namespaces.
	IngressDaemonSets []string
	// HAProxyRuntimeAPIs are the runtime API addresses bindings may name,
	// compared exactly ("tcp://10.0.0.5:9999", "unix:///run/haproxy.sock").
	HAProxyRuntimeAPIs []string
	// AWSTargetGroups are the target groups bindings may name: an ARN, an
	// ARN prefix ending in "*", or "tag:sluice.dev/frontend=NAMESPACE/NAME"
	// (NAME may be "*"), which allows the binding NAMESPACE/NAME, if it
	// lists no ARNs, to discover its groups by the tags sluice.dev/cluster
	// (the controller's --aws-cluster) and sluice.dev/frontend=NAME. The
	// tag holds the name only, so the namespace is what tells a tenant's
	// binding "internet" from the platform's (ParseTagEntry).
	AWSTargetGroups []string
}

// FrontendTagPrefix prefixes the AWSTargetGroups entries that allow
// discovery by tags.
const FrontendTagPrefix = "tag:sluice.dev/frontend="

// ErrBareTagEntry: a tag entry without a namespace. Before issue 24 a bare
// NAME allowed a binding of that name in every namespace; it is refused
// rather than read as another namespace's, so that an upgrade fails loudly
// instead of changing which bindings may act.
var ErrBareTagEntry = errors.New("a tag entry names the binding as NAMESPACE/NAME")

// ParseTagEntry parses "tag:sluice.dev/frontend=NAMESPACE/NAME": NAMESPACE
// a namespace name, NAME a binding name or "*" (every binding of the
// namespace). A bare NAME or "*" wraps ErrBareTagEntry. Pure; the input is
// the operator's flag.
func ParseTagEntry(e string) (namespace, name string, err error) {
	v, ok := strings.CutPrefix(e, FrontendTagPrefix)
	if !ok {
		return "", "", fmt.Errorf("tag entry %q: want %sNAMESPACE/NAME", e, FrontendTagPrefix)
	}
	namespace, name, ok = strings.Cut(v, "/")
	if !ok {
		return "", "", fmt.Errorf("tag entry %q: %w: write %sNAMESPACE/%s (e.g. the controller's namespace); a bare name once matched every namespace", e, ErrBareTagEntry, FrontendTagPrefix, v)
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return "", "", fmt.Errorf("tag entry %q: namespace %q: %s", e, namespace, strings.Join(errs, "; "))
	}
	if name != Any {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return "", "", fmt.Errorf("tag entry %q: binding name %q: %s", e, name, strings.Join(errs, "; "))
		}
	}
	return namespace, name, nil
}

// Check returns nil if b may be acted on, else an error saying what is
// not allowed. Pure.
func (a Access) Check(b *v1alpha1.LoadBalancerBinding) error {
	if !allowed(a.Namespaces, b.Namespace, exact) {
		return fmt.Errorf("namespace %q is not among the controller's binding namespaces (--binding-namespaces)", b.Namespace)
	}
	if h := b.Spec.Provider.HAProxy; h != nil && !allowed(a.HAProxyRuntimeAPIs, h.RuntimeAPI, exact) {
		return fmt.Errorf("HAProxy runtime API %q is not allowed (--allowed-haproxy-runtime-apis)", h.RuntimeAPI)
	}
	if aws := b.Spec.Provider.AWS; aws != nil {
		if len(aws.TargetGroupARNs) == 0 && !allowed(a.AWSTargetGroups, b.Namespace+"/"+b.Name, tagPattern) {
			return fmt.Errorf("binding %s/%s may not discover target groups tagged sluice.dev/frontend=%s (--allowed-aws-target-groups has no %s%s/%s)",
				b.Namespace, b.Name, b.Name, FrontendTagPrefix, b.Namespace, b.Name)
		}
		for _, arn := range aws.TargetGroupARNs {
			if !allowed(a.AWSTargetGroups, arn, arnPattern) {
				return fmt.Errorf("target group %q is not allowed (--allowed-aws-target-groups)", arn)
			}
		}
	}
	return nil
}

// CheckIngressDaemonSet returns nil if IngressDaemonSets in namespace may
// be acted on. Pure.
func (a Access) CheckIngressDaemonSet(namespace string) error {
	if !allowed(a.IngressDaemonSets, namespace, exact) {
		return fmt.Errorf("namespace %q is not among the controller's IngressDaemonSet namespaces (--ingressdaemonset-namespaces)", namespace)
	}
	return nil
}

// allowed reports whether v matches an entry of list; an empty list or
// an entry "*" allows everything.
func allowed(list []string, v string, match func(pattern, v string) bool) bool {
	if len(list) == 0 || slices.Contains(list, Any) {
		return true
	}
	return slices.ContainsFunc(list, func(p string) bool { return match(p, v) })
}

func exact(p, v string) bool { return p == v }

// arnPattern matches an ARN exactly or, ending in "*", by prefix. Tag
// entries never match an ARN.
func arnPattern(p, v string) bool {
	if strings.HasPrefix(p, "tag:") {
		return false
	}
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return strings.HasPrefix(v, prefix)
	}
	return p == v
}

// tagPattern matches a tag entry against a binding's "namespace/name";
// NAME "*" matches every binding of the namespace. An entry that does not
// parse (a bare name) matches nothing.
func tagPattern(p, v string) bool {
	ns, name, err := ParseTagEntry(p)
	if err != nil {
		return false
	}
	return v == ns+"/"+name || (name == Any && strings.HasPrefix(v, ns+"/"))
}

// forbid reports a binding outside the controller's Access and leaves its
// load balancer alone. A deleted one loses only its finalizer (from a time
// it was allowed): deregistering its targets would be acting on it.
//
// The chart lets the controller write bindings only in the binding
// namespaces, so the Forbidden condition and the finalizer's removal may
// be refused (403): the Warning Event, once per binding and cause, is then
// all the binding's owner sees, and a finalizer left from a time the
// namespace was allowed stays for the operator to remove.
func (r *Reconciler) forbid(ctx context.Context, b *v1alpha1.LoadBalancerBinding, cause error) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	r.forget(ctx, key)
	if b.DeletionTimestamp != nil {
		if !controllerutil.ContainsFinalizer(b, Finalizer) {
			return reconcile.Result{}, nil
		}
		res, err := r.removeFinalizer(ctx, b, key)
		if apierrors.IsForbidden(err) {
			r.announceForbidden(b, key, fmt.Errorf("%w; its finalizer %s stays until removed by hand (the controller may not write bindings here)", cause, Finalizer))
			return reconcile.Result{}, nil
		}
		return res, err
	}
	c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Reason != ReasonForbidden {
		r.announceForbidden(b, key, cause)
	}
	if err := r.writeStatus(ctx, b, nil, ReasonForbidden, cause); err != nil && !apierrors.IsForbidden(err) {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// announceForbidden logs and Events a forbidden binding once per cause.
func (r *Reconciler) announceForbidden(b *v1alpha1.LoadBalancerBinding, key types.NamespacedName, cause error) {
	if !r.forbidden.Changed(key, cause.Error()) {
		return
	}
	r.log.Warn("binding forbidden", "binding", key, "err", cause)
	r.event(b, nil, corev1.EventTypeWarning, ReasonForbidden, "Configure", cause.Error())
}
