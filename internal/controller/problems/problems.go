// Package problems is the Ingress-problems reconciler: on the controller's
// leader (not on every proxy replica) it runs the proxies' own pure
// translation over the cluster's Ingresses, IngressClasses, Services and
// TLS Secrets and EndpointSlices, and emits a Warning Event on the Ingress
// for every problem it finds: a rejected rule, an invalid annotation and
// why, a conflict naming the Ingress that wins, a missing Service, port or
// Secret, a bad certificate, endpoints refused (not a Pod of the Service's
// namespace, an address that is not the named Pod's, or a special
// address), an Ingress of which nothing is served.
//
//	Ingresses, IngressClasses, Services, Secrets, EndpointSlices, Pod addresses ─► translate.BuildCached (pure) ─► notices.Writer ─► Events
//
// Every change runs the whole translation (it is the same work each proxy
// does on every change, and the cluster-wide view is what decides
// conflicts), with the parsed TLS Secrets kept between runs as the proxies
// keep them (translate.KeyPairCache): a change parses only the Secrets
// that changed. The notices writer (internal/controller/notices) keeps
// one Event per Ingress, reason and message while the problem stands:
// written when it appears, refreshed before the API server's Event TTL
// (the reconciler runs again at least that often), and followed by a
// Normal Resolved Event when it clears. Resyncs and unrelated changes
// write nothing new.
package problems

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/internal/controller/notices"
	"sluice.dev/sluice/internal/controller/routeclaims"
	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/problem"
	"sluice.dev/sluice/internal/translate"
)

// Notifier keeps the Events of standing problems (notices.Writer).
type Notifier interface {
	// Sync makes scope's Events say current (see notices.Writer.Sync).
	Sync(ctx context.Context, scope string, current []notices.Notice) error
	// Refresh is how often Sync must run for standing problems to stay
	// visible; 0 for never.
	Refresh() time.Duration
}

var _ Notifier = (*notices.Writer)(nil)

// retryWrites is how soon Events that could not be written are tried again.
const retryWrites = 30 * time.Second

// Scope is the notices scope of the Ingress problems.
const Scope = "ingress-problems"

// Options configures a Reconciler.
type Options struct {
	// Client lists Ingresses, IngressClasses, Services, EndpointSlices
	// and, with ReadSecrets, Secrets (the manager's cache holds only TLS
	// Secrets). Required.
	Client client.Reader
	// Notices writes the Events. Required.
	Notices Notifier
	// IngressClass and ControllerName select the Ingresses, as for the
	// proxies. Defaults "sluice" and translate.ControllerName.
	IngressClass, ControllerName string
	// IngressNginx also serves ingress-nginx classes and reports their
	// annotations (refused snippets, unsupported ones); nil: off.
	IngressNginx *translate.IngressNginx
	// Pods, when set, are the Pods' addresses the endpoint checks compare
	// each endpoint with, as the proxies do (translate.Input.Pods); runs
	// wait until it has synced. Nil: targetRefs are believed.
	Pods PodIndex
	// PodChanges, with Pods, queues a run for each value sent (the Pod
	// watch's address changes). Nil: none.
	PodChanges <-chan event.GenericEvent
	// AllowEndpointsWithoutPod is the proxies' --allow-endpoints-without-pod:
	// endpoints without a targetRef are not reported as refused.
	AllowEndpointsWithoutPod bool
	// ForwardAuthAnyURL is the proxies' --forward-auth-any-url.
	ForwardAuthAnyURL bool
	// HostOwnership and DefaultBackendNamespaces are the proxies'
	// translate.Options of the same names, so that the Events
	// (HostOwnedElsewhere, DefaultBackendRefused) say what the proxies do.
	HostOwnership            string
	DefaultBackendNamespaces []string
	// ReadSecrets: Secrets are read, and missing or invalid TLS Secrets
	// are reported here too. False (the default): no Secret is read, and
	// translation counts every Secret an Ingress names as valid
	// (translate.Options.SecretsUnread); the proxies report Secret
	// problems in their logs and metrics.
	ReadSecrets bool
	// Routes reads the HTTPRoutes that claim hosts as the proxies count
	// them (translate.HostOwnership); nil: Ingresses alone (Gateway API
	// off).
	Routes *routeclaims.Reader
	// Logger: nil discards.
	Logger *slog.Logger
}

// PodIndex is a translate.PodAddresses that says when its first load is
// done (kube.PodWatch).
type PodIndex interface {
	translate.PodAddresses
	Synced() bool
}

// podsUnsynced is how soon a run waiting for the Pod cache tries again.
const podsUnsynced = time.Second

// Reconciler announces translation problems as Events. Every request
// reconciles the whole cluster; the request's name does not matter.
type Reconciler struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex              // serializes builds: the cache is not safe for concurrent use
	keyPairs *translate.KeyPairCache // parsed TLS Secrets of earlier builds
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// New returns a Reconciler.
func New(o Options) (*Reconciler, error) {
	if o.Client == nil || o.Notices == nil {
		return nil, errors.New("creating ingress-problems reconciler: Client and Notices are required")
	}
	o.IngressClass = cmp.Or(o.IngressClass, translate.DefaultIngressClass)
	o.ControllerName = cmp.Or(o.ControllerName, translate.ControllerName)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return &Reconciler{opts: o, log: o.Logger, keyPairs: translate.NewKeyPairCache()}, nil
}

// EventAction is the action of the Events written.
const EventAction = "Translate"

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if r.opts.Pods != nil && !r.opts.Pods.Synced() {
		// Every endpoint would be refused for want of its Pod.
		return reconcile.Result{RequeueAfter: podsUnsynced}, nil
	}
	in, gw, err := r.read(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if r.opts.Pods != nil {
		in.Pods = r.opts.Pods
	}
	r.mu.Lock()
	_, ps := translate.BuildCached(in, translate.Options{IngressClass: r.opts.IngressClass, ControllerName: r.opts.ControllerName, IngressNginx: r.opts.IngressNginx,
		AllowEndpointsWithoutPod: r.opts.AllowEndpointsWithoutPod, ForwardAuthAnyURL: r.opts.ForwardAuthAnyURL,
		HostOwnership: r.opts.HostOwnership, DefaultBackendNamespaces: r.opts.DefaultBackendNamespaces,
		SecretsUnread: !r.opts.ReadSecrets, Gateway: gw}, r.keyPairs)
	r.mu.Unlock()
	ingresses := make(map[types.NamespacedName]*networkingv1.Ingress, len(in.Ingresses))
	for _, ing := range in.Ingresses {
		ingresses[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = ing
	}
	ps = onIngresses(ps)
	current := make([]notices.Notice, 0, len(ps))
	for _, p := range ps {
		if ing := ingresses[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]; ing != nil {
			current = append(current, notices.Notice{Object: ing, Type: corev1.EventTypeWarning, Reason: p.Reason, Message: p.Message})
		}
	}
	res := reconcile.Result{RequeueAfter: r.opts.Notices.Refresh()}
	if err := r.opts.Notices.Sync(ctx, Scope, current); err != nil {
		// Tried again soon; the problems are also in the proxies' logs
		// and metrics.
		r.log.Warn("writing ingress problem Events", "err", err)
		return reconcile.Result{RequeueAfter: retryWrites}, nil
	}
	return res, nil
}

// onIngresses keeps the problems of Ingresses, the objects users wrote
// (problems of Kind "Secret" are about the proxies' own options).
func onIngresses(ps []problem.Problem) []problem.Problem {
	out := ps[:0:0]
	for _, p := range ps {
		if p.Kind == "Ingress" {
			out = append(out, p)
		}
	}
	return out
}

// read lists the objects translation needs. EndpointSlices are read for
// the endpoint checks (EndpointsRefused).
func (r *Reconciler) read(ctx context.Context) (in translate.Input, gw *gateway.Options, _ error) {
	var ings networkingv1.IngressList
	if err := r.opts.Client.List(ctx, &ings); err != nil {
		return in, nil, fmt.Errorf("listing ingresses: %w", err)
	}
	var classes networkingv1.IngressClassList
	if err := r.opts.Client.List(ctx, &classes); err != nil {
		return in, nil, fmt.Errorf("listing ingress classes: %w", err)
	}
	var svcs corev1.ServiceList
	if err := r.opts.Client.List(ctx, &svcs); err != nil {
		return in, nil, fmt.Errorf("listing services: %w", err)
	}
	var secrets corev1.SecretList
	if r.opts.ReadSecrets {
		if err := r.opts.Client.List(ctx, &secrets); err != nil {
			return in, nil, fmt.Errorf("listing secrets: %w", err)
		}
	}
	var epSlices discoveryv1.EndpointSliceList
	if err := r.opts.Client.List(ctx, &epSlices); err != nil {
		return in, nil, fmt.Errorf("listing endpoint slices: %w", err)
	}
	for i := range epSlices.Items {
		in.EndpointSlices = append(in.EndpointSlices, &epSlices.Items[i])
	}
	for i := range ings.Items {
		in.Ingresses = append(in.Ingresses, &ings.Items[i])
	}
	for i := range classes.Items {
		in.IngressClasses = append(in.IngressClasses, &classes.Items[i])
	}
	for i := range svcs.Items {
		in.Services = append(in.Services, &svcs.Items[i])
	}
	for i := range secrets.Items {
		if secrets.Items[i].Type == corev1.SecretTypeTLS {
			in.Secrets = append(in.Secrets, &secrets.Items[i])
		}
	}
	var err error
	in.Gateway, gw, err = r.opts.Routes.Read(ctx) // attached HTTPRoutes own hosts too
	return in, gw, err
}
