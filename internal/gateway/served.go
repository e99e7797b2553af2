package gateway

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Resources are the gateway.networking.k8s.io/v1 resources sluice reads.
var Resources = []string{"gatewayclasses", "gateways", "httproutes", "referencegrants"}

// Discovery lists the resources of an API group version (client-go's
// discovery client).
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// Served reports whether the API server serves every one of Resources:
// the proxy's watch and the controller's status writer start only then.
func Served(disco Discovery) (bool, error) {
	list, err := disco.ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", gatewayv1.GroupVersion, err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Name] = true
	}
	for _, k := range Resources {
		if !served[k] {
			return false, nil
		}
	}
	return true, nil
}
