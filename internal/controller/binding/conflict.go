package binding

import (
	"context"
	"fmt"
	"slices"

	"sluice.dev/sluice/api/v1alpha1"
	provider "sluice.dev/sluice/internal/controller/lbcache"
)

// ReasonGroupConflict is the condition reason and Event of a binding refused
// because an older binding drives the same load-balancer group.
//
// Two bindings must never drive one group: each lists every sluice-owned
// target in it and would deregister the other's. The oldest binding
// (creationTimestamp, then namespace/name) owns a shared group; a newer one
// touches nothing, not even when it is deleted, until the owner is gone or
// its spec names another group.
const ReasonGroupConflict = "GroupConflict"

// groupOwner returns the oldest other binding in all that drives a group b
// names and is older than b, or nil if b may drive its groups. Pure.
func groupOwner(b *v1alpha1.LoadBalancerBinding, all []v1alpha1.LoadBalancerBinding) *v1alpha1.LoadBalancerBinding {
	mine := map[string]bool{}
	for _, k := range provider.GroupKeys(b.Spec.Provider) {
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
		for _, k := range provider.GroupKeys(o.Spec.Provider) {
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
func (r *Reconciler) conflict(ctx context.Context, b *v1alpha1.LoadBalancerBinding) (*v1alpha1.LoadBalancerBinding, error) {
	var list v1alpha1.LoadBalancerBindingList
	if err := r.opts.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing bindings to check for shared groups: %w", err)
	}
	// A forbidden binding drives nothing, so it owns no group.
	allowed := slices.DeleteFunc(list.Items, func(o v1alpha1.LoadBalancerBinding) bool { return r.opts.Access.Check(&o) != nil })
	return groupOwner(b, allowed), nil
}
