package main

import (
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/translate"
)

// nginxCompatFlags are --ingress-nginx-compat and --ingress-nginx-class,
// shared by the proxy and the controller so that routes, Events and
// Ingress status agree on which Ingresses are served.
type nginxCompatFlags struct {
	on    bool
	class string
}

func (f *nginxCompatFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "ingress-nginx-compat", false, "also serve the Ingresses of ingress-nginx's classes (--ingress-nginx-class and every IngressClass whose spec.controller is "+translate.IngressNginxController+
		") and read their nginx.ingress.kubernetes.io annotations with ingress-nginx's semantics; snippet and Lua annotations are refused and unsupported ones listed, in Events on the Ingress")
	fs.StringVar(&f.class, "ingress-nginx-class", translate.DefaultIngressNginxClass, "with --ingress-nginx-compat, the IngressClass name (spec.ingressClassName or the kubernetes.io/ingress.class annotation) served as ingress-nginx's even without an IngressClass object")
}

// options returns the translation option, nil when compatibility is off.
func (f *nginxCompatFlags) options() (*translate.IngressNginx, error) {
	if !f.on {
		return nil, nil
	}
	if errs := validation.IsDNS1123Subdomain(f.class); len(errs) > 0 {
		return nil, fmt.Errorf("--ingress-nginx-class %q: not an IngressClass name", f.class)
	}
	return &translate.IngressNginx{Class: f.class}, nil
}
