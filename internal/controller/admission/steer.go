package admission

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/targets"
)

// The zone steering webhook places a rollout's new pods for the floor.
// pod-deletion-cost orders a ReplicaSet's deletions, but cannot place
// pods: with the default (soft) topology spread, every surge pod of a
// rollout may land in one zone, and the last old pod of another zone is
// then deleted with no replacement there. So a pod a ReplicaSet creates
// gets, when a zone of its binding is short of pods of its revision (see
// targets.SteerZone), a nodeSelector on that zone's
// topology.kubernetes.io/zone. Like the eviction webhook it fails open.
//
//	pod CREATE (API server) ─► Steer ─► bindings selecting the pod + snapshots
//	                                   ─► targets.SteerZone ─► JSON patch (nodeSelector, annotation)

// SteerPath is where the webhook answers pod creation reviews.
const SteerPath = "/mutate-pod"

// AnnotationSteered records the zone the webhook placed a pod in.
const AnnotationSteered = "sluice.dev/zone-steered"

// ZoneLabel is the node label a steered pod is placed by.
const ZoneLabel = "topology.kubernetes.io/zone"

// Steer answers AdmissionReviews of pod creation.
type Steer struct {
	// Client reads the bindings of the pod's namespace (cached).
	Client client.Reader
	// Store and Snapshots are Handler's.
	Store     *state.Store
	Snapshots Snapshots
	// Logger: nil discards.
	Logger *slog.Logger
}

// ServeHTTP implements http.Handler like Handler.ServeHTTP.
func (s *Steer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review, ok := readReview(w, r)
	if !ok {
		return
	}
	resp, zone := s.decide(r.Context(), review.Request)
	if zone != "" {
		logger(s.Logger).Info("pod placed in a zone for the floor", "namespace", review.Request.Namespace, "generateName", generateName(review.Request), "zone", zone)
	}
	writeReview(w, review, resp)
}

func generateName(req *admissionv1.AdmissionRequest) string {
	var pod metav1.PartialObjectMetadata
	if json.Unmarshal(req.Object.Raw, &pod) != nil {
		return ""
	}
	return pod.GenerateName
}

// decide allows every pod; a pod made by a ReplicaSet (generateName and a
// pod-template-hash label) that a binding with a floor selects is patched
// into the zone targets.SteerZone picks. Errors allow unchanged (fail
// open).
func (s *Steer) decide(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, string) {
	allow := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Resource.Resource != "pods" || req.SubResource != "" || req.Operation != admissionv1.Create {
		return allow, ""
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return allow, ""
	}
	if pod.GenerateName == "" || pod.Labels["pod-template-hash"] == "" {
		return allow, ""
	}
	if _, set := pod.Spec.NodeSelector[ZoneLabel]; set || pod.Spec.NodeName != "" {
		return allow, "" // placed already
	}
	var list v1alpha1.LoadBalancerBindingList
	if err := s.Client.List(ctx, &list, client.InNamespace(req.Namespace)); err != nil {
		return allow, ""
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.LoadBalancerBinding) int { return strings.Compare(a.Name, b.Name) })
	prefix := req.Namespace + "/" + pod.GenerateName
	sameRevision := func(p string) bool { return strings.HasPrefix(p, prefix) }
	for i := range list.Items {
		b := &list.Items[i]
		sel, err := metav1.LabelSelectorAsSelector(&b.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labelSet(pod.Labels)) {
			continue
		}
		snap := snapshotOf(ctx, s.Snapshots, s.Store, b)
		zone := targets.SteerZone(binding.Members(snap), sameRevision, binding.ZoneFloor(b))
		if zone == "" {
			continue
		}
		patch, err := steerPatch(&pod, zone)
		if err != nil {
			return allow, ""
		}
		pt := admissionv1.PatchTypeJSONPatch
		allow.Patch, allow.PatchType = patch, &pt
		return allow, zone
	}
	return allow, ""
}

// labelSet adapts a label map to labels.Labels.
type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

// steerPatch is the JSON patch that puts pod in zone: the node selector
// (merged with the pod's own) and the annotation.
func steerPatch(pod *corev1.Pod, zone string) ([]byte, error) {
	sel := maps.Clone(pod.Spec.NodeSelector)
	if sel == nil {
		sel = map[string]string{}
	}
	sel[ZoneLabel] = zone
	ann := maps.Clone(pod.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationSteered] = zone
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	return json.Marshal([]op{
		{Op: "add", Path: "/spec/nodeSelector", Value: sel},
		{Op: "add", Path: "/metadata/annotations", Value: ann},
	})
}
