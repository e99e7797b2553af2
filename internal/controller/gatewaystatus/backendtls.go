package gatewaystatus

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
)

// BackendTLSPolicies (Options.BackendTLSPolicies): listed beside the
// routes, with the ConfigMaps their caCertificateRefs name read one by one
// through Options.Reader (the controller caches no ConfigMap data, only
// their metadata to notice changes: Setup), and sluice's entries of their
// status.ancestors written.

// caRefs is the set of ConfigMaps ("namespace/name") the policies named at
// the last reconcile: only changes of those enqueue (Setup).
type caRefs struct {
	mu   sync.Mutex
	refs map[string]bool
}

func (c *caRefs) set(refs map[string]bool) {
	c.mu.Lock()
	c.refs = refs
	c.mu.Unlock()
}

func (c *caRefs) has(obj client.Object) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refs[obj.GetNamespace()+"/"+obj.GetName()]
}

// listBackendTLS lists the policies into in and reads the ConfigMaps they
// name; nothing without Options.BackendTLSPolicies or
// WatchBackendTLSPolicies.
func (r *Reconciler) listBackendTLS(ctx context.Context, in *gateway.Input) (*gatewayv1.BackendTLSPolicyList, error) {
	list := &gatewayv1.BackendTLSPolicyList{}
	if !r.opts.BackendTLSPolicies && !r.tlsLater.on.Load() {
		return list, nil
	}
	if err := r.opts.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing %T: %w", list, err)
	}
	refs := map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		in.BackendTLSPolicies = append(in.BackendTLSPolicies, p)
		for _, ref := range p.Spec.Validation.CACertificateRefs {
			if ref.Group != "" || ref.Kind != "ConfigMap" || refs[p.Namespace+"/"+string(ref.Name)] {
				continue
			}
			refs[p.Namespace+"/"+string(ref.Name)] = true
			cm := &corev1.ConfigMap{}
			err := r.opts.Reader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: string(ref.Name)}, cm)
			switch {
			case apierrors.IsNotFound(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
				continue // absent: the policy says so
			case err != nil:
				return nil, fmt.Errorf("reading ConfigMap %s/%s of BackendTLSPolicy %s: %w", p.Namespace, ref.Name, p.Name, err)
			}
			in.ConfigMaps = append(in.ConfigMaps, cm)
		}
	}
	r.caRefs.set(refs)
	return list, nil
}

// patchBackendTLS writes the policies' ancestor statuses of res.
func (r *Reconciler) patchBackendTLS(ctx context.Context, list *gatewayv1.BackendTLSPolicyList, res gateway.Result, now metav1.Time) []error {
	ours := map[string][]gatewayv1.PolicyAncestorStatus{}
	for _, st := range res.BackendTLSPolicies {
		ours[st.Namespace+"/"+st.Name] = st.Ancestors
	}
	return patchEntries(ctx, r, list.Items, ours, func(p *gatewayv1.BackendTLSPolicy) *[]gatewayv1.PolicyAncestorStatus { return &p.Status.Ancestors },
		policyAncestors, now)
}

// ServeBackendTLSPolicies sets Options.BackendTLSPolicies; call it before
// Setup (the manager finds out with gateway.BackendTLSPoliciesServed).
func (r *Reconciler) ServeBackendTLSPolicies(served bool) { r.opts.BackendTLSPolicies = served }

// WatchBackendTLSPolicies makes a reconciler set up without
// BackendTLSPolicies read them (their CRD was installed since): it
// watches them and the ConfigMaps they name from now on, and the next
// reconcile reads them and writes their statuses. Call it after Setup,
// once.
func (r *Reconciler) WatchBackendTLSPolicies() error { return r.tlsLater.start("BackendTLSPolicies") }
