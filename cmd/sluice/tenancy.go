package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/translate"
)

// tenancyFlags are the multi-tenancy flags the proxy and the controller
// share: both must decide host ownership and the catch-all the same way
// (routes on the proxy; Events, Ingress status and DNS on the controller).
type tenancyFlags struct {
	hostOwnership            string
	defaultBackendNamespaces string
}

func (t *tenancyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.hostOwnership, "host-ownership", translate.HostOwnershipNamespace,
		`who may serve a host: "namespace" (the namespace of its oldest Ingress, and the namespaces it names in sluice.dev/share-host-with) or "none" (any namespace may add paths under any host: single-tenant clusters)`)
	fs.StringVar(&t.defaultBackendNamespaces, "default-backend-namespaces", "",
		`comma-separated namespaces whose Ingresses may set the catch-all (spec.defaultBackend for every host, rules without a host), "*" for all (default: the pod's own namespace; every namespace outside a cluster)`)
}

func (t *tenancyFlags) check() error {
	if t.hostOwnership != translate.HostOwnershipNamespace && t.hostOwnership != translate.HostOwnershipNone {
		return fmt.Errorf("--host-ownership must be namespace or none, not %q", t.hostOwnership)
	}
	for _, ns := range commaList(t.defaultBackendNamespaces) {
		if ns != "*" && len(validation.IsDNS1123Label(ns)) > 0 {
			return fmt.Errorf("--default-backend-namespaces: %q is not a namespace name", ns)
		}
	}
	return nil
}

// namespaces is translate.Options.DefaultBackendNamespaces: the flag's
// list, else own (the release's namespace); nil (every namespace) when
// neither is known, i.e. outside a cluster.
func (t *tenancyFlags) namespaces(own string) []string {
	if l := commaList(t.defaultBackendNamespaces); len(l) > 0 {
		return l
	}
	if own != "" {
		return []string{own}
	}
	return nil
}

// podNamespace is the proxy's own namespace: $POD_NAMESPACE, else the
// service account's; "" outside a cluster.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

func commaList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
