package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	gwlisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/translate"
)

// backendTLSListers are the BackendTLSPolicy listers and those of the
// ConfigMaps their caCertificateRefs name, per watched namespace.
type backendTLSListers struct {
	policies   []gwlisters.BackendTLSPolicyLister
	configMaps []corelisters.ConfigMapLister
}

// tlsInformers adds the BackendTLSPolicy informers, and those of the
// ConfigMaps (in factories of their own, w.cmFactories), and returns
// their listers; called once the API server serves BackendTLSPolicies,
// as the watch starts or later (gateway.go's late kinds): without the CRD
// no ConfigMap is read. ConfigMaps are kept with their "ca.crt" only
// (caOnly).
func (w *gatewayWatch) tlsInformers() *backendTLSListers {
	l := &backendTLSListers{}
	for i, f := range w.factories {
		p := f.Gateway().V1().BackendTLSPolicies()
		name := "BackendTLSPolicy"
		if len(w.factories) > 1 {
			name = fmt.Sprintf("BackendTLSPolicy/%d", i)
		}
		w.informers[name] = p.Informer()
		l.policies = append(l.policies, p.Lister())
	}
	for i, ns := range w.namespaceList {
		f := informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithNamespace(ns), informers.WithTransform(caOnly))
		w.cmFactories = append(w.cmFactories, f)
		cm := f.Core().V1().ConfigMaps()
		name := "ConfigMap"
		if len(w.namespaceList) > 1 {
			name = fmt.Sprintf("ConfigMap/%d", i)
		}
		w.informers[name] = cm.Informer()
		l.configMaps = append(l.configMaps, cm.Lister())
	}
	return l
}

// caOnly keeps of a ConfigMap its metadata (without managed fields) and
// its gateway.CAKey: the proxy holds no other data of a tenant's
// ConfigMaps.
func caOnly(obj any) (any, error) {
	obj, err := StripObject(obj)
	if cm, ok := obj.(*corev1.ConfigMap); ok && err == nil {
		ca, bin := cm.Data[gateway.CAKey], cm.BinaryData[gateway.CAKey]
		cm.Data, cm.BinaryData = nil, nil
		if ca != "" {
			cm.Data = map[string]string{gateway.CAKey: ca}
		}
		if len(bin) > 0 {
			cm.BinaryData = map[string][]byte{gateway.CAKey: bin}
		}
		cm.Labels, cm.Annotations = nil, nil
	}
	return obj, err
}

// snapshotBackendTLS lists the policies and ConfigMaps into g; nothing
// before their caches synced.
func (w *gatewayWatch) snapshotBackendTLS(g *translate.GatewayInput) {
	tls := w.backendTLS.Load()
	if tls == nil {
		return
	}
	for _, l := range tls.policies {
		pols, _ := l.List(labels.Everything())
		g.BackendTLSPolicies = append(g.BackendTLSPolicies, pols...)
	}
	for _, l := range tls.configMaps {
		cms, _ := l.List(labels.Everything())
		g.ConfigMaps = append(g.ConfigMaps, cms...)
	}
}
