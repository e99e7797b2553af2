package admission

import (
	"context"
	"encoding/json"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The webhook configurations. By default (the Helm chart) they exist
// already, each with its webhook's rules, selectors and clientConfig and
// an empty caBundle; the server only adds its CA to the caBundle of its
// webhook (bundle.go), by name, so its RBAC is `get` and `patch` on those
// two names. With CreateConfigurations (a controller installed without
// the chart) the server creates them and keeps their webhooks as below,
// which needs get, create and update.

// configure puts the current CA into the ValidatingWebhookConfiguration,
// and into the MutatingWebhookConfiguration of Steer, keeping the CAs of
// the other replicas there.
func (s *Server) configure(ctx context.Context) error {
	if s.opts.Steer != nil {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := s.apply(ctx, cfg, s.opts.SteerConfigName, SteerWebhookName, SteerPath, func(cc admissionregistrationv1.WebhookClientConfig) {
			cfg.Webhooks = steerWebhooks(cc, s.opts.Namespaces)
		}); err != nil {
			return err
		}
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	return s.apply(ctx, cfg, s.opts.ConfigName, WebhookName, Path, func(cc admissionregistrationv1.WebhookClientConfig) {
		cfg.Webhooks = webhooks(cc, s.opts.Namespaces)
	})
}

// apply adds the server's CA to the caBundle of webhook in the
// configuration name (a JSON patch guarded by the resourceVersion read, so
// that two replicas adding theirs at once do not drop one), or, with
// CreateConfigurations, creates or updates the whole configuration (obj,
// whose webhooks setWebhooks fills in).
func (s *Server) apply(ctx context.Context, obj client.Object, name, webhook, path string,
	setWebhooks func(admissionregistrationv1.WebhookClientConfig)) error {
	cc, err := clientConfig(s.opts.URL, s.opts.Service, nil, path)
	if err != nil {
		return err
	}
	own := s.certs.bundle()
	err = s.opts.Client.Get(ctx, client.ObjectKey{Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err) && !s.opts.CreateConfigurations:
		return fmt.Errorf("reading webhook configuration %s: it does not exist (the Helm chart creates it; "+
			"without the chart pass --eviction-webhook-create-configurations): %w", name, err)
	case apierrors.IsNotFound(err):
		obj.SetName(name)
		obj.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "sluice-controller"})
		cc.CABundle = own
		setWebhooks(cc)
		if err := s.opts.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating webhook configuration %s: %w", name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading webhook configuration %s: %w", name, err)
	}
	i, current := webhookBundle(obj, webhook)
	merged, changed := mergeBundle(current, own, s.opts.Now(), MaxCAs)
	if s.opts.CreateConfigurations {
		before := obj.DeepCopyObject()
		cc.CABundle = merged
		setWebhooks(cc)
		if equality.Semantic.DeepEqual(before, obj) {
			return nil // rechecked: nothing to write
		}
		if err := s.opts.Client.Update(ctx, obj); err != nil {
			return fmt.Errorf("updating webhook configuration %s: %w", name, err)
		}
		return nil
	}
	if i < 0 {
		return fmt.Errorf("webhook configuration %s has no webhook %s", name, webhook)
	}
	if !changed {
		return nil
	}
	patch, err := caBundlePatch(obj.GetResourceVersion(), i, merged)
	if err != nil {
		return err
	}
	if err := s.opts.Client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("adding the CA to the caBundle of webhook configuration %s: %w", name, err)
	}
	return nil
}

// webhookBundle finds webhook in a webhook configuration: its index (-1
// when absent) and caBundle.
func webhookBundle(obj client.Object, webhook string) (int, []byte) {
	switch cfg := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i, w := range cfg.Webhooks {
			if w.Name == webhook {
				return i, w.ClientConfig.CABundle
			}
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i, w := range cfg.Webhooks {
			if w.Name == webhook {
				return i, w.ClientConfig.CABundle
			}
		}
	}
	return -1, nil
}

// caBundlePatch is a JSON patch that sets the caBundle of the webhook at
// index i, only if the configuration is still at resourceVersion rv, and
// touches nothing else.
func caBundlePatch(rv string, i int, ca []byte) ([]byte, error) {
	b, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
		{"op": "add", "path": fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), "value": ca},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the caBundle patch: %w", err)
	}
	return b, nil
}

// namespaceSelector limits a webhook to namespaces (by the
// kubernetes.io/metadata.name label the API server sets); nil for none or
// "*" (every namespace).
func namespaceSelector(namespaces []string) *metav1.LabelSelector {
	if len(namespaces) == 0 {
		return nil
	}
	for _, ns := range namespaces {
		if ns == "*" {
			return nil
		}
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: namespaces}}}
}

// webhooks is the configuration's one webhook: pods/eviction CREATE in
// namespaces, failurePolicy Ignore (fail open), no side effects. No
// objectSelector: the object of an eviction review is the Eviction, which
// carries none of the pod's labels.
func webhooks(cc admissionregistrationv1.WebhookClientConfig, namespaces []string) []admissionregistrationv1.ValidatingWebhook {
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	scope := admissionregistrationv1.NamespacedScope
	timeout := int32(5)
	return []admissionregistrationv1.ValidatingWebhook{{
		Name:         WebhookName,
		ClientConfig: cc,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
				Resources: []string{"pods/eviction"}, Scope: &scope},
		}},
		NamespaceSelector:       namespaceSelector(namespaces),
		FailurePolicy:           &ignore,
		MatchPolicy:             &equivalent,
		SideEffects:             &none,
		TimeoutSeconds:          &timeout,
		AdmissionReviewVersions: []string{"v1"},
	}}
}

// SteerWebhookName names the one webhook of the steering configuration.
const SteerWebhookName = "steer.floor.sluice.dev"

// steerWebhooks is the steering configuration's one webhook: CREATE of
// pods carrying pod-template-hash (made by a ReplicaSet) in namespaces,
// failurePolicy Ignore (fail open), no side effects.
func steerWebhooks(cc admissionregistrationv1.WebhookClientConfig, namespaces []string) []admissionregistrationv1.MutatingWebhook {
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	never := admissionregistrationv1.NeverReinvocationPolicy
	scope := admissionregistrationv1.NamespacedScope
	timeout := int32(5)
	return []admissionregistrationv1.MutatingWebhook{{
		Name:         SteerWebhookName,
		ClientConfig: cc,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
				Resources: []string{"pods"}, Scope: &scope},
		}},
		NamespaceSelector: namespaceSelector(namespaces),
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "pod-template-hash", Operator: metav1.LabelSelectorOpExists}}},
		FailurePolicy:           &ignore,
		MatchPolicy:             &equivalent,
		SideEffects:             &none,
		ReinvocationPolicy:      &never,
		TimeoutSeconds:          &timeout,
		AdmissionReviewVersions: []string{"v1"},
	}}
}
