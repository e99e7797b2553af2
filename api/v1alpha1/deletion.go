package v1alpha1

// The way out of a binding stuck on its finalizer (docs/security.md).
const (
	// ConditionDeletionBlocked is True while a deleted binding's targets
	// cannot be deregistered (its provider fails) and its deletion has
	// taken longer than spec.drain.timeout; its reason names the provider
	// error and its message says how to let the binding go.
	ConditionDeletionBlocked = "DeletionBlocked"
	// AnnotationAbandonTargets, set on a deleted binding to its current
	// metadata.generation, makes the controller remove the finalizer
	// without touching the provider: the targets stay in the load
	// balancer, for the operator to remove. Deleting a binding raises its
	// generation, so the annotation takes effect only when set after the
	// deletion, and a value copied from another object (or an earlier
	// generation) is ignored with an AbandonIgnored Event.
	AnnotationAbandonTargets = "sluice.dev/abandon-targets"
)
