// Package lb is the boundary between the sluice controller and an external
// load balancer: the controller computes desired targets (package targets),
// diffs them against what a Provider lists, and applies the plan through the
// same Provider. Implementations live in subpackages (haproxy, fake, aws).
//
// The shape follows external-dns's provider: a small interface that only
// touches what sluice owns, is idempotent, and reports state as data so the
// controller can stay a thin read → plan → apply loop.
package lb

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// Target is one load-balancer target: a pod (IP target) or a node (instance
// target).
type Target struct {
	// Address is the IP and port the load balancer sends traffic to. For
	// instance targets listed by a provider that only knows instance IDs,
	// the address may be invalid (zero) while the port is still set.
	Address netip.AddrPort
	// Zone is the availability zone of the pod's node ("" if unknown).
	// Providers may use it (AWS needs it for IPs outside the VPC); it does
	// not take part in identity.
	Zone string
	// ID is the provider-side identity of an instance target (e.g. an EC2
	// instance ID); "" for IP targets and for providers that identify
	// targets by address only (HAProxy).
	ID string
	// CheckPort is the port the load balancer health-checks, 0 for the
	// traffic port. Providers that set it per target (HAProxy) use it when
	// they add the target; it does not take part in identity.
	CheckPort uint16
}

// Same reports whether t and o denote the same registration. When both carry
// an ID they are compared by ID and port (a replaced instance may reuse an
// IP); otherwise by address.
func (t Target) Same(o Target) bool {
	if t.ID != "" && o.ID != "" {
		return t.ID == o.ID && t.Address.Port() == o.Address.Port()
	}
	return t.Address == o.Address
}

// Compare orders targets by ID, then address; providers and plans use it
// for deterministic output.
func (t Target) Compare(o Target) int {
	if c := strings.Compare(t.ID, o.ID); c != 0 {
		return c
	}
	return t.Address.Compare(o.Address)
}

// String returns the ID and port of an instance target, the address otherwise.
func (t Target) String() string {
	if t.ID != "" {
		return t.ID + ":" + strconv.Itoa(int(t.Address.Port()))
	}
	return t.Address.String()
}

// State is a target's health as the load balancer sees it. The values mirror
// AWS ELBv2 target health so that every provider maps onto one vocabulary.
type State string

const (
	// Initial: registered, health not yet established. The LB may or may
	// not send traffic; the controller must not call the target healthy.
	Initial State = "initial"
	// Healthy: passing health checks and receiving new traffic.
	Healthy State = "healthy"
	// Unhealthy: failing health checks; no new traffic.
	Unhealthy State = "unhealthy"
	// Draining: deregistered (or told to stop by the LB); the LB sends no
	// new traffic, in-flight connections may continue. Connections in
	// Status tells how many remain when the provider knows.
	Draining State = "draining"
	// Unused: drained and removed; safe to forget. Providers may instead
	// simply stop listing the target (HAProxy does).
	Unused State = "unused"
	// Unavailable: health is unknown (checks disabled, LB-side problem).
	Unavailable State = "unavailable"
)

// Status is one target as a provider lists it.
type Status struct {
	Target Target
	State  State
	// Reason is a short provider-specific explanation, e.g. "L7STS 503" or
	// "drain". Empty when there is nothing to add.
	Reason string
	// Connections is the number of current connections or sessions from
	// the LB to the target; -1 when the provider does not know.
	Connections int
}

// Provider registers and deregisters targets in a load-balancer group (an
// HAProxy backend, an ELBv2 target group). Implementations must be safe for
// concurrent use and must only list and touch targets that sluice owns.
type Provider interface {
	// Targets lists the sluice-owned targets in group with their health,
	// in a deterministic order. It never returns a partial list without an
	// error. An unknown group is ErrGroupNotFound.
	Targets(ctx context.Context, group string) ([]Status, error)
	// Register adds targets to group, or returns draining ones to service.
	// Idempotent: registering a registered target is a no-op and does not
	// reset its health. A new target starts Initial. Errors for single
	// targets are joined; the others are still attempted.
	Register(ctx context.Context, group string, ts []Target) error
	// Deregister stops new traffic to targets and lets them drain; once a
	// target is drained and has no connections it is removed and no longer
	// listed (or listed Unused). Idempotent, and safe to call repeatedly:
	// providers without their own timers (HAProxy) advance a target's
	// drain on each call, so callers re-issue it for every Draining target
	// they no longer want until it is gone. Unknown targets are ignored.
	Deregister(ctx context.Context, group string, ts []Target) error
}

// Errors every provider returns, wrapped; check them with errors.Is.
var (
	// ErrGroupNotFound: the group (backend, target group) does not exist.
	ErrGroupNotFound = errors.New("load-balancer group not found")
	// ErrNotDynamic: the group exists but cannot hold targets added at run
	// time (HAProxy backend with a static balancing algorithm).
	ErrNotDynamic = errors.New("load-balancer group does not accept dynamic targets")
	// ErrUnreachable: the load balancer's API could not be reached or the
	// exchange broke off; retrying later may succeed.
	ErrUnreachable = errors.New("load balancer unreachable")
	// ErrInvalid: a group name or target was refused before anything was
	// sent (bad characters, unusable address).
	ErrInvalid = errors.New("invalid load-balancer group or target")
)
