package gatewaystatus

// SetWatchGRPC replaces the GRPCRoute watch Setup prepares.
func (r *Reconciler) SetWatchGRPC(watch func() error) { r.grpcLater.watch = watch }

// SetWatchBackendTLS replaces the BackendTLSPolicy watch Setup prepares.
func (r *Reconciler) SetWatchBackendTLS(watch func() error) { r.tlsLater.watch = watch }
