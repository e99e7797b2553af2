package gatewaystatus

// SetWatchGRPC replaces the GRPCRoute watch Setup prepares.
func (r *Reconciler) SetWatchGRPC(watch func() error) { r.watchGRPC = watch }
