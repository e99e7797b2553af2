// Package admission holds the zone floor's webhooks: the zone steering of
// a rollout's new pods (steer.go), and the eviction webhook: a
// validating admission webhook on pods/eviction, served by the controller
// with its own certificate, that refuses (429, so kubectl drain and the
// cluster autoscaler retry) an eviction that would leave a zone of a
// binding with fewer healthy targets than the binding's zoneFloor. It sits
// beside the binding reconciler and reads what that reconciler last saw:
//
//	eviction (API server) ─► Handler ─► bindings of the namespace (cache) + snapshot.Store snapshots
//	                                    ─► binding.Members ─► targets.Evictable ─► allowed / 429
//
// Both webhooks fail open: their configurations say failurePolicy Ignore,
// so while the controller is down evictions proceed and pods are placed by
// the scheduler alone. Deleting a pod is never
// intercepted (only the eviction subresource is).
package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	"sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/targets"
)

// Path is where the webhook answers eviction reviews.
const Path = "/validate-eviction"

// maxReview bounds the size of one AdmissionReview request body.
const maxReview = 1 << 20

// Handler answers AdmissionReviews of pods/eviction.
type Handler struct {
	// Client reads the bindings of the evicted pod's namespace (cached).
	Client client.Reader
	// Store holds the binding reconciler's snapshots; used when Snapshots
	// is nil.
	Store *snapshot.Store
	// Snapshots, if not nil, gives a binding's snapshot instead of Store:
	// the leader's stored one, or on a replica that does not lead one
	// built from its cache (binding.Reconciler.View). Nil: none.
	Snapshots Snapshots
	// Logger: nil discards.
	Logger *slog.Logger
}

// Snapshots gives the snapshot of a binding the webhooks answer from; nil
// when there is none (the webhooks then allow).
type Snapshots func(ctx context.Context, b *v1alpha1.LoadBalancerBinding) *snapshot.Snapshot

// snapshotOf is src, or store's snapshot of b when src is nil.
func snapshotOf(ctx context.Context, src Snapshots, store *snapshot.Store, b *v1alpha1.LoadBalancerBinding) *snapshot.Snapshot {
	if src != nil {
		return src(ctx, b)
	}
	if store == nil {
		return nil
	}
	return store.Get(types.NamespacedName{Namespace: b.Namespace, Name: b.Name})
}

// ServeHTTP implements http.Handler: it decodes an AdmissionReview (v1),
// decides, and answers with the same review carrying the response. A
// request it cannot read is answered 400 (the API server then applies the
// failure policy: Ignore).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review, ok := readReview(w, r)
	if !ok {
		return
	}
	resp := h.decide(r.Context(), review.Request)
	if !resp.Allowed {
		logger(h.Logger).Info("eviction refused", "pod", review.Request.Namespace+"/"+review.Request.Name, "reason", resp.Result.Message)
	}
	writeReview(w, review, resp)
}

// readReview reads the AdmissionReview (v1) a POST carries. A request it
// cannot read is answered 400 and ok is false (the API server then
// applies the failure policy: Ignore).
func readReview(w http.ResponseWriter, r *http.Request) (review *admissionv1.AdmissionReview, ok bool) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReview+1))
	if err != nil || len(body) > maxReview {
		http.Error(w, "reading the review failed or it is too large", http.StatusBadRequest)
		return nil, false
	}
	review, err = decodeReview(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return review, true
}

// writeReview answers with the same review carrying resp.
func writeReview(w http.ResponseWriter, review *admissionv1.AdmissionReview, resp *admissionv1.AdmissionResponse) {
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// logger is l, or a logger that discards for nil.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l
}

// decodeReview parses an AdmissionReview and checks that it carries a
// request with a UID.
func decodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("decoding the admission review: %w", err)
	}
	if review.Request == nil || review.Request.UID == "" {
		return nil, errors.New("decoding the admission review: no request or no request UID")
	}
	if review.APIVersion == "" {
		review.APIVersion, review.Kind = "admission.k8s.io/v1", "AdmissionReview"
	}
	return &review, nil
}

// decide allows anything but the eviction of a pod that some binding of
// its namespace needs for its zone floor. Errors reading the bindings
// allow (fail open, like the configuration).
func (h *Handler) decide(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allow := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Resource.Resource != "pods" || req.SubResource != "eviction" || req.Operation != admissionv1.Create || req.Name == "" {
		return allow
	}
	var list v1alpha1.LoadBalancerBindingList
	if err := h.Client.List(ctx, &list, client.InNamespace(req.Namespace)); err != nil {
		return allow
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.LoadBalancerBinding) int {
		return strings.Compare(a.Name, b.Name)
	})
	pod := req.Namespace + "/" + req.Name
	for i := range list.Items {
		b := &list.Items[i]
		snap := snapshotOf(ctx, h.Snapshots, h.Store, b)
		if ok, reason := targets.Evictable(binding.Members(snap), pod, binding.ZoneFloor(b)); !ok {
			return &admissionv1.AdmissionResponse{UID: req.UID, Allowed: false, Result: &metav1.Status{
				Status:  metav1.StatusFailure,
				Code:    http.StatusTooManyRequests,
				Reason:  metav1.StatusReasonTooManyRequests,
				Message: fmt.Sprintf("LoadBalancerBinding %s/%s: %s", b.Namespace, b.Name, reason),
			}}
		}
	}
	return allow
}
