// Package notices writes the Events of standing problems so that they stay
// visible where users look (`kubectl describe`, `kubectl get events`) for
// as long as the problem stands:
//
//   - one Event object per (object, reason, message): two problems of one
//     Ingress with the same reason (two foreign DNS names, two conflicting
//     hosts) are two Events. The events API's own recorder keys a series on
//     the object and reason only, so the second would only count up the
//     first and its message would never be seen;
//   - refreshed while the problem stands (the Event's series count and last
//     observed time, which also renews its TTL on the API server, default
//     one hour), so a problem that has lasted a day is still on the object;
//   - a Normal Event with reason Resolved when it clears.
//
// Data flow: a reconciler's current problems → Writer.Sync(scope, notices)
// → create (new), merge-patch of the series (standing, due for a refresh),
// Resolved Event (gone) → the API server's Events.
//
// Event names are derived from the object's UID, the reason and the
// message, so a new leader finds the Events of the last one (create answers
// AlreadyExists) and refreshes their series instead of duplicating them.
// It needs create and patch on events.k8s.io Events and reads none, so a
// new leader's series count starts again at 2.
package notices

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// DefaultRefresh is how often a standing problem's Event is written again:
// well inside the API server's default Event TTL of one hour.
const DefaultRefresh = 20 * time.Minute

// ReasonResolved is the reason of the Normal Event written when a problem
// clears.
const ReasonResolved = "Resolved"

// maxNote is the events API's limit of an Event's note, in bytes.
const maxNote = 1024

// Notice is one standing problem on one object.
type Notice struct {
	// Object is the object the problem is on (an Ingress, a binding).
	Object client.Object
	// Type is corev1.EventTypeWarning or EventTypeNormal.
	Type string
	// Reason is the Event's reason: one per kind of problem.
	Reason string
	// Message says what is wrong and how to fix it.
	Message string
}

// Options configure a Writer.
type Options struct {
	// Client creates and patches Events; its scheme maps Objects to their
	// kinds. Required.
	Client client.Client
	// Controller is the Events' reportingController, e.g.
	// "sluice.dev/controller"; Instance their reportingInstance (the pod's
	// name). Required.
	Controller, Instance string
	// Action is the Events' action, e.g. "Translate". Required.
	Action string
	// Refresh: a standing problem's Event is written again when its last
	// write is older than this. Default DefaultRefresh.
	Refresh time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Writer keeps the Events of standing problems. Safe for concurrent use.
type Writer struct {
	opts Options

	mu sync.Mutex
	// standing holds the notices of the last Sync of each scope.
	standing map[string]map[key]*entry
}

// key identifies one notice's Event.
type key struct {
	uid             types.UID
	reason, message string
}

// entry is a notice last synced and what was written for it.
type entry struct {
	notice    Notice
	name      string // the Event's name
	count     int32  // the series count written last; 1 before any series
	written   time.Time
	unwritten bool // its last write failed: try again on the next Sync
}

// New returns a Writer.
func New(o Options) (*Writer, error) {
	if o.Client == nil || o.Controller == "" || o.Instance == "" || o.Action == "" {
		return nil, errors.New("creating the notices writer: Client, Controller, Instance and Action are required")
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Writer{opts: o, standing: map[string]map[key]*entry{}}, nil
}

// Refresh is the writer's refresh period: a caller that syncs only on
// changes should also sync at least this often (reconcile.Result's
// RequeueAfter), or standing problems expire with their Events.
func (w *Writer) Refresh() time.Duration { return w.opts.Refresh }

// Sync makes the Events of scope (a reconciler's name, or one part of what
// it reports, like a DNS zone) say current: an Event for each new notice,
// a refresh of each standing one whose last write is older than Refresh,
// and a Resolved Event for each notice of the scope's last Sync that is
// no longer current. It returns the errors of the writes it tried; a
// failed write is tried again on the next Sync.
func (w *Writer) Sync(ctx context.Context, scope string, current []Notice) error {
	now := w.opts.Now()
	w.mu.Lock()
	last := w.standing[scope]
	next := make(map[key]*entry, len(current))
	var writes []*entry
	for _, n := range current {
		if n.Object == nil {
			continue
		}
		k := key{uid: n.Object.GetUID(), reason: n.Reason, message: n.Message}
		if _, dup := next[k]; dup {
			continue
		}
		e := last[k]
		if e == nil {
			e = &entry{notice: n, name: eventName(n.Object, n.Reason, n.Message), unwritten: true}
		}
		e.notice = n // the newest copy of the object
		next[k] = e
		if e.unwritten || now.Sub(e.written) >= w.opts.Refresh {
			writes = append(writes, e)
		}
	}
	var resolved []Notice
	for k, e := range last {
		if _, ok := next[k]; !ok && !e.unwritten && e.notice.Type == corev1.EventTypeWarning {
			resolved = append(resolved, e.notice)
		}
	}
	if len(next) == 0 {
		delete(w.standing, scope)
	} else {
		w.standing[scope] = next
	}
	w.mu.Unlock()

	var errs []error
	for _, e := range writes {
		count, err := w.write(ctx, e.notice, e.name, e.count, now)
		w.mu.Lock()
		e.count, e.unwritten = count, err != nil
		if err == nil {
			e.written = now
		}
		w.mu.Unlock()
		errs = append(errs, err)
	}
	for _, n := range resolved {
		note := fmt.Sprintf("resolved: %s: %s", n.Reason, n.Message)
		r := Notice{Object: n.Object, Type: corev1.EventTypeNormal, Reason: ReasonResolved, Message: note}
		_, err := w.write(ctx, r, eventName(n.Object, ReasonResolved, note), 0, now)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// write creates n's Event named name, or, when it exists (a refresh, or
// written by an earlier leader), counts on in its series. count is the
// series count written last (0: none known); it returns the one written.
func (w *Writer) write(ctx context.Context, n Notice, name string, count int32, now time.Time) (int32, error) {
	if count == 0 {
		ev, err := w.event(n, name, now)
		if err != nil {
			return 0, err
		}
		err = w.opts.Client.Create(ctx, ev)
		if err == nil {
			return 1, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("creating Event %s/%s (%s): %w", ev.Namespace, name, n.Reason, err)
		}
		count = 1
	}
	count++
	patch, err := json.Marshal(map[string]any{"series": eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(now)}})
	if err != nil {
		return count - 1, fmt.Errorf("encoding the series of Event %s: %w", name, err)
	}
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: eventNamespace(n.Object), Name: name}}
	if err := w.opts.Client.Patch(ctx, ev, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return w.write(ctx, n, name, 0, now) // expired meanwhile
		}
		return count - 1, fmt.Errorf("refreshing Event %s/%s (%s): %w", ev.Namespace, name, n.Reason, err)
	}
	return count, nil
}

// event builds n's Event.
func (w *Writer) event(n Notice, name string, now time.Time) (*eventsv1.Event, error) {
	gvk, err := apiutil.GVKForObject(n.Object, w.opts.Client.Scheme())
	if err != nil {
		return nil, fmt.Errorf("finding the kind of %s/%s: %w", n.Object.GetNamespace(), n.Object.GetName(), err)
	}
	note := n.Message
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: eventNamespace(n.Object), Name: name},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: w.opts.Controller,
		ReportingInstance:   w.opts.Instance,
		Action:              w.opts.Action,
		Reason:              n.Reason,
		Regarding: corev1.ObjectReference{
			APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
			Namespace: n.Object.GetNamespace(), Name: n.Object.GetName(), UID: n.Object.GetUID(),
			ResourceVersion: n.Object.GetResourceVersion(),
		},
		Note: note,
		Type: n.Type,
	}, nil
}

// eventNamespace is where an object's Events live: its namespace, or
// "default" for cluster-scoped objects (as the events API's recorder).
func eventNamespace(o client.Object) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns
	}
	return metav1.NamespaceDefault
}

// eventName is the Event's name: the object's name and a digest of its
// UID, the reason and the message, within the 253 bytes of a name.
func eventName(o client.Object, reason, message string) string {
	sum := sha256.Sum256([]byte(string(o.GetUID()) + "\x00" + reason + "\x00" + message))
	prefix := o.GetName()
	if len(prefix) > 200 {
		prefix = strings.TrimRight(prefix[:200], ".-")
	}
	return prefix + "." + hex.EncodeToString(sum[:8])
}
