package gateway

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// GRPCRoutesServed reports whether the API server serves GRPCRoutes too
// (standard channel since v1.1; a cluster may have the other kinds
// without it). The proxy's watch and the status writer read GRPCRoutes
// only then; false on any discovery error.
func GRPCRoutesServed(disco Discovery) bool {
	list, err := disco.ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String())
	if err != nil {
		return false
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "grpcroutes" })
}

// BackendTLSPoliciesServed reports whether the API server serves
// BackendTLSPolicies (gateway.networking.k8s.io/v1, standard channel since
// v1.4; a cluster may have the other kinds without it). The proxy's watch
// (with the ConfigMaps their caCertificateRefs name) and the status writer
// read them only then; false on any discovery error.
func BackendTLSPoliciesServed(disco Discovery) bool {
	list, err := disco.ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String())
	if err != nil {
		return false
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "backendtlspolicies" })
}
