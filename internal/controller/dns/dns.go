// Package dns is the DNS reconciler: it keeps the DNS records of the hosts
// of the Ingresses sluice serves pointing at the load balancer of their
// class, and with Gateway API those of the Gateways of its classes and
// their attached routes pointing at the Gateway's status.addresses,
// touching only the names it owns. It is the thin, stateful edge of the
// third data flow:
//
//	Ingresses, IngressClasses, bindings (cache) ─► ingressstatus.Serving ───┐
//	Gateways, HTTPRoutes, GRPCRoutes (routeclaims) ─► gatewayhosts.Sources ─┴► dns.Desired ─┐
//	Provider.Records(zone) ─────────────────────────────────────────────────────────────────┴► dns.MakePlan ─► Provider.Apply ─► Events, metrics
//
// One reconcile covers every zone (a single work item), on any change of
// an Ingress, IngressClass or binding (and, once the Gateway API CRDs are
// served, of a GatewayClass, Gateway, HTTPRoute or GRPCRoute) and every
// Interval. Ownership is in
// the zones (signed ownership records), wants in the cache; the one thing
// kept in memory is when each owned name was first seen unwanted: the
// delete delay never runs from an earlier time, so a restarted controller
// or a new leader waits the delay out again (deletion is delayed, never
// hastened, whatever a zone's unwanted-since stamp says). A provider
// error makes the reconcile fail and retry with backoff; it never
// deletes anything.
package dns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/ingressstatus"
	"sluice.dev/sluice/internal/controller/notices"
	"sluice.dev/sluice/internal/controller/routeclaims"
	model "sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/gatewayhosts"
	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/translate"
)

// Recorder emits Kubernetes Events (events.k8s.io EventRecorder).
type Recorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Notifier keeps the Events of standing problems (notices.Writer).
type Notifier interface {
	Sync(ctx context.Context, scope string, current []notices.Notice) error
}

// Options configures a Reconciler.
type Options struct {
	// Client reads Ingresses, IngressClasses and bindings (the cache).
	// Required.
	Client client.Client
	// Provider reads and writes the zones. Required.
	Provider model.Provider
	// Aliases: the provider supports Route53 ALIAS records.
	Aliases bool
	// OwnerID is --dns-owner-id, written into every ownership record.
	// Required.
	OwnerID string
	// Keys sign and verify the ownership records
	// (--dns-ownership-key-file). Required: without them no record
	// could be told from a forged one.
	Keys *model.Keys
	// AdoptUnsigned re-signs unsigned ownership records with OwnerID of
	// wanted names (--dns-adopt-unsigned, for the upgrade).
	AdoptUnsigned bool
	// AllowApex lets hosts that are a zone's apex be published
	// (--dns-allow-apex).
	AllowApex bool
	// NamespaceDomains are the hosts each namespace may publish
	// (--dns-namespace-domains). Nil: any host in the zones.
	NamespaceDomains model.NamespaceDomains
	// Policy: sync (default), upsert-only or create-only.
	Policy model.Policy
	// TTL of the records. Default 60s.
	TTL time.Duration
	// DeleteDelay is how long an unwanted owned name stays. Default 2×TTL.
	DeleteDelay time.Duration
	// DryRun logs the plan and changes nothing.
	DryRun bool
	// Serving selects our Ingresses and their bindings; its HostOwnership
	// is the proxies': a host gets its record only from Ingresses of the
	// namespace owning it (never from a refused or merely shared-with one).
	Serving ingressstatus.ServingOptions
	// Interval between reconciles when nothing changes. Default 1m.
	Interval time.Duration
	// Recorder emits the Normal Events on Ingresses, Gateways and routes
	// (published, deleted, dry run) and failed changes, once per change.
	// Nil: none.
	Recorder Recorder
	// Notices keeps the Warning Events of standing problems on Ingresses
	// (a foreign record, a host refused): one per Ingress, reason and
	// message, refreshed while the problem stands, resolved when it
	// clears. Nil: logged only.
	Notices Notifier
	// Registerer receives the metrics. Nil: not registered.
	Registerer prometheus.Registerer
	// Routes reads the Gateway API objects (--gateway-api): attached
	// routes own hosts as Ingresses do (translate.HostOwnership), and the
	// Gateways of our classes and their attached routes get records for
	// their hosts (gatewayhosts). Nil: Ingresses alone.
	Routes *routeclaims.Reader
	// Logger: nil discards.
	Logger *slog.Logger
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// Reconciler reconciles the DNS records of every zone.
type Reconciler struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics

	mu       sync.Mutex
	reported map[string]string    // name or host → last reported state/message: Events only on change
	seen     map[string]time.Time // ingress UID/generation → first seen, for the publish latency
	// unwanted: zone ID → owned name → when this process first saw it
	// unwanted. The delete delay runs from here at the earliest, whatever
	// the zone's stamp says; a restart starts it again (deletion delayed,
	// never hastened).
	unwanted map[string]map[string]time.Time
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// New returns a Reconciler.
func New(o Options) (*Reconciler, error) {
	if o.Client == nil || o.Provider == nil || o.OwnerID == "" || o.Keys.Len() == 0 {
		return nil, errors.New("creating DNS reconciler: Client, Provider, OwnerID and Keys are required")
	}
	o.Policy = cmp.Or(o.Policy, model.PolicySync)
	if _, err := model.ParsePolicy(string(o.Policy)); err != nil {
		return nil, fmt.Errorf("creating DNS reconciler: %w", err)
	}
	o.TTL = cmp.Or(o.TTL, time.Minute)
	o.DeleteDelay = cmp.Or(o.DeleteDelay, 2*o.TTL)
	o.Interval = cmp.Or(o.Interval, time.Minute)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if o.Now == nil {
		o.Now = time.Now
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	return &Reconciler{opts: o, log: o.Logger, metrics: m, reported: map[string]string{}, seen: map[string]time.Time{},
		unwanted: map[string]map[string]time.Time{}}, nil
}

// Reconcile implements reconcile.Reconciler. The request is ignored:
// every reconcile covers every zone.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	objs, srcs, gwProblems, err := r.read(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	zones, err := r.opts.Provider.Zones(ctx)
	if err != nil {
		return reconcile.Result{}, r.providerError("zones", fmt.Errorf("listing DNS zones: %w", err))
	}
	wants, problems := model.Desired(srcs, model.DesiredOptions{Zones: zones, TTL: r.ttl(), Aliases: r.opts.Aliases,
		AllowApex: r.opts.AllowApex, Namespaces: r.opts.NamespaceDomains})
	r.reportProblems(ctx, objs, append(problems, gwProblems...))

	now := r.opts.Now()
	next := now.Add(r.opts.Interval)
	counts := map[string]int{}
	var errs []error
	conflict := false
	for _, z := range zones {
		res, err := r.syncZone(ctx, z, wants, objs, now)
		if err != nil {
			errs = append(errs, err)
		}
		conflict = conflict || res.conflict
		for st, n := range res.counts {
			counts[st] += n
		}
		if !res.next.IsZero() && res.next.Before(next) {
			next = res.next
		}
	}
	r.metrics.setStates(counts)
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	if conflict {
		// Someone wrote a name between our read and our write: plan again
		// from fresh zone contents, soon.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	return reconcile.Result{RequeueAfter: max(next.Sub(now), time.Second)}, nil
}

// read lists our Ingresses, and with Gateway API our Gateways and the
// routes attached to them, and turns their hosts into plan sources; the
// problems are those of route hosts owned by another namespace.
func (r *Reconciler) read(ctx context.Context) (map[model.Ref]client.Object, []model.Source, []model.Problem, error) {
	var ingList networkingv1.IngressList
	if err := r.opts.Client.List(ctx, &ingList); err != nil {
		return nil, nil, nil, fmt.Errorf("listing ingresses: %w", err)
	}
	var classes networkingv1.IngressClassList
	if err := r.opts.Client.List(ctx, &classes); err != nil {
		return nil, nil, nil, fmt.Errorf("listing ingress classes: %w", err)
	}
	var bindings v1alpha1.LoadBalancerBindingList
	if err := r.opts.Client.List(ctx, &bindings); err != nil {
		return nil, nil, nil, fmt.Errorf("listing bindings: %w", err)
	}
	serving := ingressstatus.NewServing(classes.Items, bindings.Items, r.opts.Serving)
	objs := map[model.Ref]client.Object{}
	var srcs []model.Source
	now := r.opts.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	live := map[string]bool{}
	var ours []*networkingv1.Ingress
	for i := range ingList.Items {
		if ing := &ingList.Items[i]; ing.DeletionTimestamp == nil && serving.Serves(ing) {
			ours = append(ours, ing)
		}
	}
	// The proxies' decision (translate.HostOwnership): Ingresses of every
	// class of ours and attached HTTPRoutes claim hosts.
	claims := translate.Input{}
	for i := range classes.Items {
		claims.IngressClasses = append(claims.IngressClasses, &classes.Items[i])
	}
	for i := range ingList.Items {
		if ing := &ingList.Items[i]; ing.DeletionTimestamp == nil {
			claims.Ingresses = append(claims.Ingresses, ing)
		}
	}
	gw, gopts, err := r.opts.Routes.Read(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if claims.Secrets, err = r.opts.Routes.Secrets(ctx); err != nil {
		return nil, nil, nil, err
	}
	claims.Gateway = gw
	so := r.opts.Serving
	own := translate.HostOwnership(claims, translate.Options{IngressClass: so.IngressClass, ControllerName: so.ControllerName,
		IngressNginx: so.IngressNginx, HostOwnership: so.HostOwnership, Gateway: gopts, SecretsUnread: true})
	for _, ing := range ours {
		ref := model.Ref{Namespace: ing.Namespace, Name: ing.Name, UID: string(ing.UID)}
		objs[ref] = ing
		gen := seenKey(ing)
		live[gen] = true
		if _, ok := r.seen[gen]; !ok {
			r.seen[gen] = now
		}
		addrs, known := serving.Addresses(ing)
		var das []model.Address
		for _, a := range addrs {
			das = append(das, model.Address{IP: a.IP, Hostname: a.Hostname, HostedZoneID: a.CanonicalHostedZoneID})
		}
		for _, h := range hosts(ing) {
			if !own.Owns(ing.Namespace, h) {
				continue // HostOwnedElsewhere: announced by the problems reconciler
			}
			srcs = append(srcs, model.Source{Host: h, Ingress: ref, Addresses: das, Known: known})
		}
	}
	for k := range r.seen {
		if !live[k] {
			delete(r.seen, k)
		}
	}
	if gopts == nil {
		return objs, srcs, nil, nil // no Gateway API (flag off, CRDs not served yet)
	}
	gsrcs, problems := gatewayhosts.Sources(gateway.Input{GatewayClasses: gw.GatewayClasses, Gateways: gw.Gateways,
		HTTPRoutes: gw.HTTPRoutes, GRPCRoutes: gw.GRPCRoutes, ReferenceGrants: gw.ReferenceGrants,
		Namespaces: gw.Namespaces, Secrets: claims.Secrets},
		gatewayhosts.Options{Gateway: *gopts, Ownership: own, HostedZoneIDs: hostedZoneIDs(bindings.Items)})
	for _, g := range gw.Gateways {
		objs[model.Ref{Kind: model.KindGateway, Namespace: g.Namespace, Name: g.Name, UID: string(g.UID)}] = g
	}
	for _, rt := range gw.HTTPRoutes {
		objs[model.Ref{Kind: model.KindHTTPRoute, Namespace: rt.Namespace, Name: rt.Name, UID: string(rt.UID)}] = rt
	}
	for _, rt := range gw.GRPCRoutes {
		objs[model.Ref{Kind: model.KindGRPCRoute, Namespace: rt.Namespace, Name: rt.Name, UID: string(rt.UID)}] = rt
	}
	return objs, append(srcs, gsrcs...), problems, nil
}

// hostedZoneIDs maps the DNS names of the bindings' load balancers to
// their canonical hosted zones: a Gateway served at one of them gets
// Route53 ALIAS records as an Ingress does.
func hostedZoneIDs(bindings []v1alpha1.LoadBalancerBinding) map[string]string {
	out := map[string]string{}
	for i := range bindings {
		for _, a := range bindings[i].Status.Addresses {
			if a.Hostname != "" && a.CanonicalHostedZoneID != "" {
				out[strings.TrimSuffix(strings.ToLower(a.Hostname), ".")] = a.CanonicalHostedZoneID
			}
		}
	}
	return out
}

func seenKey(ing *networkingv1.Ingress) string {
	return fmt.Sprintf("%s/%d", ing.UID, ing.Generation)
}

// hosts are the Ingress's rule hosts, lower case, without duplicates.
func hosts(ing *networkingv1.Ingress) []string {
	var out []string
	for _, rule := range ing.Spec.Rules {
		if h := strings.ToLower(rule.Host); h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

type zoneResult struct {
	counts   map[string]int
	next     time.Time // earliest pending deletion
	conflict bool
}

// syncZone reads one zone, plans and applies. A zone that cannot be read
// is not planned: nothing in it changes.
func (r *Reconciler) syncZone(ctx context.Context, z model.Zone, all []model.Want, objs map[model.Ref]client.Object, now time.Time) (zoneResult, error) {
	res := zoneResult{counts: map[string]int{}}
	var wants []model.Want
	for _, w := range all {
		if w.Zone == z {
			wants = append(wants, w)
		}
	}
	current, err := r.opts.Provider.Records(ctx, z)
	if err != nil {
		return res, r.providerError("records", fmt.Errorf("reading zone %s: %w", z.Name, err))
	}
	plan := model.MakePlan(wants, current, model.PlanOptions{
		OwnerID: r.opts.OwnerID, Keys: r.opts.Keys, Policy: r.opts.Policy, AdoptUnsigned: r.opts.AdoptUnsigned,
		TTL: r.ttl(), DeleteDelay: r.opts.DeleteDelay, UnwantedSeen: r.unwantedSeen(z), Now: now})
	r.rememberUnwanted(z, plan.Statuses, now)
	for _, st := range plan.Statuses {
		res.counts[st.State]++
		if st.State == model.StateUnwanted && (res.next.IsZero() || st.DeleteAt.Before(res.next)) {
			res.next = st.DeleteAt
		}
	}
	failed := map[string]error{}
	if len(plan.Batches) > 0 {
		if r.opts.DryRun {
			for _, b := range plan.Batches {
				r.log.Info("dns dry run: would change", "zone", z.Name, "name", b.Name, "changes", b.Describe())
			}
		} else {
			errs := r.opts.Provider.Apply(ctx, z, plan.Batches)
			var perr []error
			for i, b := range plan.Batches {
				err := errors.New("the provider gave no answer for this batch")
				if i < len(errs) {
					err = errs[i]
				}
				switch {
				case err == nil:
					r.applied(b, wants, now)
				case errors.Is(err, model.ErrConflict):
					res.conflict = true
					r.metrics.conflicts.Inc()
					r.log.Info("dns records changed under us; planning again", "zone", z.Name, "name", b.Name, "err", err)
					failed[b.Name] = err
				default:
					failed[b.Name] = err
					perr = append(perr, fmt.Errorf("applying changes to %s: %w", b.Name, err))
				}
			}
			if len(perr) > 0 {
				err = r.providerError("apply", errors.Join(perr...))
			}
		}
	}
	r.reportStatuses(ctx, z, objs, plan.Statuses, failed)
	return res, err
}

// unwantedSeen is a copy of the first-seen-unwanted times of zone z's
// names.
func (r *Reconciler) unwantedSeen(z model.Zone) map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.unwanted[z.ID])
}

// rememberUnwanted keeps when each unwanted owned name of zone z was
// first seen unwanted, and forgets the names of z that are wanted again,
// deleted or no longer ours.
func (r *Reconciler) rememberUnwanted(z model.Zone, sts []model.Status, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.unwanted[z.ID]
	next := map[string]time.Time{}
	for _, st := range sts {
		if st.State != model.StateUnwanted && st.State != model.StateDeleting {
			continue
		}
		t, ok := last[st.Name]
		if !ok {
			t = now
		}
		next[st.Name] = t
	}
	r.unwanted[z.ID] = next
}

// applied counts an applied batch and observes the publish latency of
// its owner's Ingress generation (once).
func (r *Reconciler) applied(b model.Batch, wants []model.Want, now time.Time) {
	records := false
	for _, c := range b.Changes {
		typ := "update"
		switch {
		case c.Old == nil:
			typ = "create"
		case c.New == nil:
			typ = "delete"
		}
		r.metrics.changes.WithLabelValues(typ).Inc()
		records = records || (c.New != nil && c.New.Type != model.TypeTXT)
	}
	r.log.Info("dns records changed", "name", b.Name, "changes", b.Describe())
	if !records {
		return
	}
	i := slices.IndexFunc(wants, func(w model.Want) bool { return w.Name == b.Name })
	if i < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, t := range r.seen {
		if strings.HasPrefix(k, wants[i].Owner.UID+"/") && !t.IsZero() {
			r.metrics.publishLatency.Observe(now.Sub(t).Seconds())
			r.seen[k] = time.Time{} // observed once per generation
		}
	}
}

func (r *Reconciler) providerError(op string, err error) error {
	r.metrics.providerErrors.WithLabelValues(op).Inc()
	r.log.Warn("dns provider error; retrying with backoff, nothing is deleted", "op", op, "err", err)
	return err
}

func (r *Reconciler) ttl() int64 { return int64(r.opts.TTL / time.Second) }

// reportProblems keeps a Warning Event on each Ingress (Gateway, route)
// a problem names while the problem stands.
func (r *Reconciler) reportProblems(ctx context.Context, objs map[model.Ref]client.Object, problems []model.Problem) {
	var current []notices.Notice
	for _, p := range problems {
		for _, ref := range p.Ingress {
			r.log.Info("dns", "reason", p.Kind, "object", ref.Object(), "message", p.Message)
			if obj := objs[ref]; obj != nil {
				current = append(current, notices.Notice{Object: obj, Type: corev1.EventTypeWarning, Reason: p.Kind, Message: p.Message})
			}
		}
	}
	r.notify(ctx, "dns-hosts", current)
}

// notify syncs the standing problems of scope.
func (r *Reconciler) notify(ctx context.Context, scope string, current []notices.Notice) {
	if r.opts.Notices == nil {
		return
	}
	if err := r.opts.Notices.Sync(ctx, scope, current); err != nil {
		r.log.Warn("writing DNS problem Events (tried again on the next reconcile)", "err", err)
	}
}

// reportStatuses emits Events for the names of zone z: published, foreign
// record, deletion pending, deleting, and failed changes. The plan holds
// every name of the zone that is wanted or ours, so a name it no longer
// holds (deleted, or never ours) is forgotten: the map stays as large as
// the zones' names.
func (r *Reconciler) reportStatuses(ctx context.Context, z model.Zone, objs map[model.Ref]client.Object, sts []model.Status, failed map[string]error) {
	prefix := "name " + z.Name + " "
	keys := make(map[string]bool, len(sts))
	var foreign []notices.Notice // standing: names held by a foreign record
	defer func() { r.notify(ctx, "dns-zone "+z.Name, foreign) }()
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for k := range r.reported {
			if strings.HasPrefix(k, prefix) && !keys[k] {
				delete(r.reported, k)
			}
		}
	}()
	for _, st := range sts {
		ing := objs[st.Owner]
		key := prefix + st.Name
		keys[key] = true
		if err := failed[st.Name]; err != nil {
			r.report(key, ing, corev1.EventTypeWarning, "DNSChangeFailed", fmt.Sprintf("changing the records of %s failed (retried): %v", st.Name, err))
			continue
		}
		switch st.State {
		case model.StatePending:
			if r.opts.DryRun {
				r.report(key, ing, corev1.EventTypeNormal, "DNSDryRun", fmt.Sprintf("%s would be changed (dry run)", st.Name))
				continue
			}
			r.report(key, ing, corev1.EventTypeNormal, "DNSPublished", publishedMessage(st))
		case model.StatePublished:
			r.report(key, ing, corev1.EventTypeNormal, "DNSPublished", publishedMessage(st))
		case model.StateConflict:
			r.metrics.foreign.Inc()
			r.report(key, nil, corev1.EventTypeWarning, model.ProblemForeignRecord, st.Message) // logged once
			if ing != nil {
				foreign = append(foreign, notices.Notice{Object: ing, Type: corev1.EventTypeWarning, Reason: model.ProblemForeignRecord, Message: st.Message})
			}
		case model.StateUnwanted:
			r.report(key, ing, corev1.EventTypeNormal, model.ProblemDeletionPending, st.Message)
		case model.StateDeleting:
			r.report(key, ing, corev1.EventTypeNormal, "DNSDeleted", st.Message)
		case model.StateKept:
			r.mu.Lock()
			delete(r.reported, key) // the problem was reported on the host
			r.mu.Unlock()
		}
	}
}

// publishedMessage is the note of a DNSPublished Event on the owner.
func publishedMessage(st model.Status) string {
	switch st.Owner.Kind {
	case "":
		return fmt.Sprintf("%s points at the load balancer of this Ingress's class", st.Name)
	case model.KindGateway:
		return fmt.Sprintf("%s points at this Gateway's status.addresses", st.Name)
	default:
		return fmt.Sprintf("%s points at the status.addresses of the Gateway this %s is attached to", st.Name, st.Owner.Kind)
	}
}

// report emits an Event on obj (nil: log only) when key's reason and
// message differ from the last report.
func (r *Reconciler) report(key string, obj client.Object, typ, reason, msg string) {
	r.mu.Lock()
	last := r.reported[key]
	r.reported[key] = reason + ": " + msg
	r.mu.Unlock()
	if last == reason+": "+msg {
		return
	}
	r.log.Info("dns", "reason", reason, "message", msg)
	if obj != nil && r.opts.Recorder != nil {
		r.opts.Recorder.Eventf(obj, nil, typ, reason, "DNS", "%s", msg)
	}
}
