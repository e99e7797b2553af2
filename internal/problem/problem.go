// Package problem holds the one Problem type the pure planners share
// (internal/translate for routing, internal/targets for load-balancer
// targets) and the Announcer that tells which problems are new, so that
// the reconcilers at the edges announce each problem once per change (as
// a Kubernetes Event), not on every resync.
//
// Data flow: objects → translate.Build / targets.Desired → []Problem →
// Announcer.Announce → new problems → Events on the objects.
package problem

import (
	"cmp"
	"slices"
	"strings"
	"sync"
)

// Problem is something wrong with one object (or a spec). The object's
// other parts, and every other object, are still served where possible.
type Problem struct {
	Kind      string // "Ingress", "Secret", "Pod", "Node", "Spec", ...
	Namespace string
	Name      string
	// Reason is a short CamelCase word for Events and metrics labels, e.g.
	// "InvalidAnnotation", "ServiceNotFound", "Conflict"; "" when the
	// planner has none (target planning).
	Reason string
	// Message says what is wrong and what was done about it.
	Message string
}

func (p Problem) String() string {
	msg := p.Message
	if p.Reason != "" {
		msg = p.Reason + ": " + msg
	}
	if p.Namespace != "" {
		return p.Kind + " " + p.Namespace + "/" + p.Name + ": " + msg
	}
	if p.Name != "" {
		return p.Kind + " " + p.Name + ": " + msg
	}
	return p.Kind + ": " + msg
}

// Compare orders problems by object, then reason and message.
func Compare(a, b Problem) int {
	return cmp.Or(
		strings.Compare(a.Kind, b.Kind),
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.Reason, b.Reason),
		strings.Compare(a.Message, b.Message),
	)
}

// Announcer remembers the problems last announced. It is safe for
// concurrent use.
type Announcer struct {
	mu   sync.Mutex
	last map[Problem]bool
}

// Announce returns the problems of current that were not in the previous
// call's current, sorted and without duplicates, and remembers current. A
// problem that goes away and comes back is announced again; one that
// persists is announced once.
func (a *Announcer) Announce(current []Problem) []Problem {
	now := make(map[Problem]bool, len(current))
	var fresh []Problem
	a.mu.Lock()
	for _, p := range current {
		if !now[p] && !a.last[p] {
			fresh = append(fresh, p)
		}
		now[p] = true
	}
	a.last = now
	a.mu.Unlock()
	slices.SortFunc(fresh, Compare)
	return fresh
}

// Latest remembers the message last announced for each key, for a
// reconciler that announces one problem per object at a time (a binding
// or IngressDaemonSet it may not act on): the Event is sent when the
// message changes, not on every resync. Safe for concurrent use; the zero
// value is ready.
type Latest[K comparable] struct {
	m sync.Map
}

// Changed records msg for key and reports whether it differs from the
// message recorded before (true for the first one).
func (l *Latest[K]) Changed(key K, msg string) bool {
	prev, loaded := l.m.Swap(key, msg)
	return !loaded || prev != msg
}

// Forget drops key's message: the next one is new again.
func (l *Latest[K]) Forget(key K) { l.m.Delete(key) }
