package main

import (
	"flag"
	"fmt"
	"regexp"
	"strings"

	"sluice.dev/sluice/internal/controller/binding"
)

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

var (
	namespaceRE  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	runtimeAPIRE = regexp.MustCompile(`^(unix://.+|tcp://[^/]+)$`)
	awsARNRE     = regexp.MustCompile(`^arn:\S+$`)
)

// accessFlags are the controller's allow-lists as given on its command
// line. An absent flag allows the controller's own namespace and no load
// balancer: whoever may create a binding or an IngressDaemonSet in a
// namespace the operator did not name gets nothing done.
type accessFlags struct {
	bindingNamespaces, idsNamespaces, haproxyAPIs, awsGroups string
}

func (f *accessFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.bindingNamespaces, "binding-namespaces", "", `comma-separated namespaces whose LoadBalancerBindings the controller acts on, "*" for all (default: the controller's own namespace: --namespace, the pod's, else --leader-election-namespace)`)
	fs.StringVar(&f.idsNamespaces, "ingressdaemonset-namespaces", "", `comma-separated namespaces whose IngressDaemonSets the controller acts on (they pin pods to nodes and run a health checker on the host network), "*" for all; separate from --binding-namespaces (default: the controller's own namespace; --ingress-daemonsets=false runs none)`)
	fs.StringVar(&f.haproxyAPIs, "allowed-haproxy-runtime-apis", "", `comma-separated HAProxy runtime API addresses bindings may name (tcp://HOST:PORT or unix:///PATH, exact), "*" for any, "none" for none (default: none)`)
	fs.StringVar(&f.awsGroups, "allowed-aws-target-groups", "", `comma-separated target groups bindings may drive: ARNs (a trailing * matches a prefix) or tag:sluice.dev/frontend=NAMESPACE/NAME (NAME or *), which lets the binding NAMESPACE/NAME discover the groups tagged sluice.dev/frontend=NAME; "*" for any, "none" for none (default: none)`)
}

// parse turns the flags into a binding.Access. own returns the
// controller's own namespace ("" outside a cluster), the default of both
// namespace lists.
func (f *accessFlags) parse(own func() string) (binding.Access, error) {
	var a binding.Access
	var err error
	ownNamespace := func(flag string) ([]string, error) {
		if ns := own(); ns != "" {
			return []string{ns}, nil
		}
		return nil, fmt.Errorf("%s: the controller's own namespace is unknown outside a cluster; set %s, --namespace or --leader-election-namespace", flag, flag)
	}
	if a.Namespaces, err = splitList("--binding-namespaces", f.bindingNamespaces, namespaceRE.MatchString); err != nil {
		return a, err
	}
	if len(a.Namespaces) == 0 {
		if a.Namespaces, err = ownNamespace("--binding-namespaces"); err != nil {
			return a, err
		}
	}
	if a.IngressDaemonSets, err = splitList("--ingressdaemonset-namespaces", f.idsNamespaces, namespaceRE.MatchString); err != nil {
		return a, err
	}
	if len(a.IngressDaemonSets) == 0 {
		if a.IngressDaemonSets, err = ownNamespace("--ingressdaemonset-namespaces"); err != nil {
			return a, err
		}
	}
	if a.HAProxyRuntimeAPIs, err = splitList("--allowed-haproxy-runtime-apis", f.haproxyAPIs, runtimeAPIRE.MatchString); err != nil {
		return a, err
	}
	if a.AWSTargetGroups, err = splitList("--allowed-aws-target-groups", f.awsGroups, validAWSGroup); err != nil {
		return a, err
	}
	// An empty binding.Access list allows everything: an absent flag
	// allows nothing.
	if len(a.HAProxyRuntimeAPIs) == 0 {
		a.HAProxyRuntimeAPIs = []string{none}
	}
	if len(a.AWSTargetGroups) == 0 {
		a.AWSTargetGroups = []string{none}
	}
	return a, nil
}

// validAWSGroup accepts an ARN (pattern) or a tag entry that names a
// namespace (binding.ParseTagEntry).
func validAWSGroup(e string) bool {
	if strings.HasPrefix(e, "tag:") {
		_, _, err := binding.ParseTagEntry(e)
		return err == nil
	}
	return awsARNRE.MatchString(e)
}

// none, as an allow-list entry, matches nothing: "none" alone allows
// nothing.
const none = "none"

// splitList splits a comma-separated flag value; every entry is "*",
// "none" or valid. A tag entry that is not valid says why (a bare name
// needs its namespace).
func splitList(flag, v string, valid func(string) bool) ([]string, error) {
	var out []string
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if e != binding.Any && e != none && !valid(e) {
			if _, _, err := binding.ParseTagEntry(e); strings.HasPrefix(e, "tag:") && err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			return nil, fmt.Errorf("%s: invalid entry %q", flag, e)
		}
		out = append(out, e)
	}
	return out, nil
}
