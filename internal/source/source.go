// Package source defines what the proxy's wiring loop needs from a place that
// holds Kubernetes objects: the API server (package kube) or a directory of
// manifest files (package manifests).
//
// Data flow: source → translate.Build → route.New → proxy. A Source only
// watches and keeps objects; it never interprets them. The caller calls
// Snapshot after notify, translates, and swaps the routing table.
package source

import (
	"context"

	"sluice.dev/sluice/internal/translate"
)

// Source is a watched set of Ingress, IngressClass, Service, EndpointSlice
// and Secret objects.
type Source interface {
	// Run watches until ctx ends. It calls notify after the first complete
	// load and after every change afterwards. notify must not block long;
	// the caller coalesces. Run returns nil when ctx ends and an error only
	// when it cannot watch at all.
	Run(ctx context.Context, notify func()) error
	// Snapshot returns a consistent view of the current objects; safe for
	// concurrent use. The objects are shared with the source and must not
	// be modified.
	Snapshot() translate.Input
	// Synced reports whether the first complete load has finished.
	Synced() bool
}
