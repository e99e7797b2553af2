package v1alpha1

// Safety floors: the conditions, annotation and status the zone floor, the
// emptying guard and the timers check use.
const (
	// ConditionHeld is True while a reconcile that would deregister more
	// than spec.maxDeregisterFraction of a group's healthy targets (or all
	// of them) waits for confirmation.
	ConditionHeld = "Held"
	// ConditionTimersConsistent is False when the drain-related timers do
	// not fit together (provider drain vs drain.timeout vs the pods'
	// termination grace period); its message gives the worst case.
	ConditionTimersConsistent = "TimersConsistent"

	// AnnotationConfirmDeregister, set on a binding to its current
	// metadata.generation, lets a held deregistration (or the deletion of
	// a binding whose pods still exist) go ahead.
	AnnotationConfirmDeregister = "sluice.dev/confirm-deregister"
	// DefaultMaxDeregisterFraction is spec.maxDeregisterFraction's default.
	DefaultMaxDeregisterFraction = "50%"
	// DefaultZoneFloor is spec.zoneFloor's default.
	DefaultZoneFloor = 1
)

// ZoneTargetCounts counts the targets of one zone by state.
type ZoneTargetCounts struct {
	// Zone is the node's topology.kubernetes.io/zone or the provider's
	// availability zone; "" when unknown.
	Zone         string `json:"zone"`
	TargetCounts `json:",inline"`
}
