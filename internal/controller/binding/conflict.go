package binding

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"sluice.dev/sluice/api/v1alpha1"
	provider "sluice.dev/sluice/internal/controller/lbcache"
	"sluice.dev/sluice/internal/lb"
)

// ReasonGroupConflict is the condition reason and Event of a binding refused
// because an older binding drives the same load-balancer group.
//
// Two bindings must never drive one group: each lists every sluice-owned
// target in it and would deregister the other's. That holds for groups
// found by tag as for listed ARNs: a binding in another namespace with
// the same name discovers the same groups. The oldest binding
// (creationTimestamp, then namespace/name) owns a shared group; a newer one
// touches nothing, not even when it is deleted, until the owner is gone or
// its spec names another group.
const ReasonGroupConflict = "GroupConflict"

// groupOwner returns the oldest other binding in all that drives a group b
// drives and is older than b, or nil if b may drive its groups. keys names
// a binding's groups (lbcache.GroupKeys, plus the groups discovered by tag
// at run time); it is asked only about b and the bindings older than b.
// Pure, given a pure keys.
func groupOwner(b *v1alpha1.LoadBalancerBinding, all []v1alpha1.LoadBalancerBinding, keys func(*v1alpha1.LoadBalancerBinding) []string) *v1alpha1.LoadBalancerBinding {
	mine := map[string]bool{}
	for _, k := range keys(b) {
		mine[k] = true
	}
	if len(mine) == 0 {
		return nil
	}
	var owner *v1alpha1.LoadBalancerBinding
	for i := range all {
		o := &all[i]
		if (o.Namespace == b.Namespace && o.Name == b.Name) || !older(o, b) {
			continue
		}
		for _, k := range keys(o) {
			if mine[k] {
				if owner == nil || older(o, owner) {
					owner = o
				}
				break
			}
		}
	}
	return owner
}

func older(a, b *v1alpha1.LoadBalancerBinding) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// conflict returns the binding that owns one of b's groups, nil if none.
// Groups discovered by tag count like listed ARNs: they are resolved
// (through the providers' discovery cache) for b and for every older
// allowed binding that discovers its groups. If b's own groups cannot be
// resolved, only its listed ones are compared (Providers.For then reports
// why); if an older binding's cannot, for a reason a retry may fix, the
// error is returned: b waits rather than risk driving that binding's group.
func (r *Reconciler) conflict(ctx context.Context, b *v1alpha1.LoadBalancerBinding) (*v1alpha1.LoadBalancerBinding, error) {
	var list v1alpha1.LoadBalancerBindingList
	if err := r.opts.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing bindings to check for shared groups: %w", err)
	}
	// A forbidden binding drives nothing, so it owns no group.
	allowed := slices.DeleteFunc(list.Items, func(o v1alpha1.LoadBalancerBinding) bool { return r.opts.Access.Check(&o) != nil })
	var errs []error
	keys := func(o *v1alpha1.LoadBalancerBinding) []string {
		k := provider.GroupKeys(o.Spec.Provider)
		if a := o.Spec.Provider.AWS; a == nil || len(a.TargetGroupARNs) > 0 || o.Spec.Provider.HAProxy != nil {
			return k
		}
		_, groups, err := r.opts.Providers.For(ctx, o)
		switch {
		case err == nil:
			return append(k, provider.AWSGroupKeys(groups)...)
		case o.Namespace == b.Namespace && o.Name == b.Name, configError(err), errors.Is(err, lb.ErrGroupNotFound):
		default:
			errs = append(errs, fmt.Errorf("discovering the target groups of binding %s/%s to check for shared groups: %w", o.Namespace, o.Name, err))
		}
		return k
	}
	owner := groupOwner(b, allowed, keys)
	if owner == nil && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return owner, nil
}
