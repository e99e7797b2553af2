package binding

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
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

// Access says which bindings the controller may act on. An empty list
// allows everything, so the zero Access allows every binding.
type Access struct {
	// Namespaces whose bindings may be acted on.
	Namespaces []string
	// HAProxyRuntimeAPIs are the runtime API addresses bindings may name,
	// compared exactly ("tcp://10.0.0.5:9999", "unix:///run/haproxy.sock").
	HAProxyRuntimeAPIs []string
	// AWSTargetGroups are the target groups bindings may name: an ARN, an
	// ARN prefix ending in "*", or "tag:sluice.dev/frontend=NAME" (NAME
	// may be "*"), which allows a binding named NAME that lists no ARNs
	// and so discovers its groups by the tags sluice.dev/cluster (the
	// controller's --aws-cluster) and sluice.dev/frontend.
	AWSTargetGroups []string
}

// frontendTag prefixes the AWSTargetGroups entries that allow discovery.
const frontendTag = "tag:sluice.dev/frontend="

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
		if len(aws.TargetGroupARNs) == 0 && !allowed(a.AWSTargetGroups, frontendTag+b.Name, tagPattern) {
			return fmt.Errorf("discovering target groups tagged sluice.dev/frontend=%s is not allowed (--allowed-aws-target-groups)", b.Name)
		}
		for _, arn := range aws.TargetGroupARNs {
			if !allowed(a.AWSTargetGroups, arn, arnPattern) {
				return fmt.Errorf("target group %q is not allowed (--allowed-aws-target-groups)", arn)
			}
		}
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

// tagPattern matches "tag:sluice.dev/frontend=NAME" entries, NAME "*"
// matching every name.
func tagPattern(p, v string) bool {
	return p == v || p == frontendTag+Any
}

// forbid reports a binding outside the controller's Access and leaves its
// load balancer alone. A deleted one loses only its finalizer (from a time
// it was allowed): deregistering its targets would be acting on it.
func (r *Reconciler) forbid(ctx context.Context, b *v1alpha1.LoadBalancerBinding, cause error) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	r.forget(ctx, key)
	if b.DeletionTimestamp != nil {
		if controllerutil.ContainsFinalizer(b, Finalizer) {
			return r.removeFinalizer(ctx, b, key)
		}
		return reconcile.Result{}, nil
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != ReasonForbidden {
		r.log.Warn("binding forbidden", "binding", key, "err", cause)
		r.event(b, nil, corev1.EventTypeWarning, ReasonForbidden, "Configure", cause.Error())
	}
	return reconcile.Result{}, r.writeStatus(ctx, b, nil, ReasonForbidden, cause)
}
