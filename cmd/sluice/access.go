package main

import (
	"errors"
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
	awsGroupRE   = regexp.MustCompile(`^(arn:\S+|tag:sluice\.dev/frontend=\S+)$`)
)

// parseAccess turns the --binding-namespaces and allow-list flags into a
// binding.Access. An empty namespace list means the controller's own
// namespace: the pod's (ownNamespace), else the leader-election namespace.
func parseAccess(namespaces, haproxyAPIs, awsGroups, leaderNamespace string, ownNamespace func() string) (binding.Access, error) {
	var a binding.Access
	var err error
	if a.Namespaces, err = splitList("--binding-namespaces", namespaces, namespaceRE); err != nil {
		return a, err
	}
	if len(a.Namespaces) == 0 {
		own := ownNamespace()
		if own == "" {
			own = leaderNamespace
		}
		if own == "" {
			return a, errors.New("--binding-namespaces: the controller's own namespace is unknown outside a cluster; set --binding-namespaces or --leader-election-namespace")
		}
		a.Namespaces = []string{own}
	}
	if a.HAProxyRuntimeAPIs, err = splitList("--allowed-haproxy-runtime-apis", haproxyAPIs, runtimeAPIRE); err != nil {
		return a, err
	}
	if a.AWSTargetGroups, err = splitList("--allowed-aws-target-groups", awsGroups, awsGroupRE); err != nil {
		return a, err
	}
	// An empty allow-list would allow everything (binding.Access): say "*"
	// to mean that.
	if len(a.HAProxyRuntimeAPIs) == 0 || len(a.AWSTargetGroups) == 0 {
		return a, errors.New(`--allowed-haproxy-runtime-apis and --allowed-aws-target-groups must not be empty (say "*" for any)`)
	}
	return a, nil
}

// none, as an allow-list entry, matches nothing: "none" alone allows
// nothing.
const none = "none"

// splitList splits a comma-separated flag value; every entry is "*",
// "none" or matches re.
func splitList(flag, v string, re *regexp.Regexp) ([]string, error) {
	var out []string
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if e != binding.Any && e != none && !re.MatchString(e) {
			return nil, fmt.Errorf("%s: invalid entry %q", flag, e)
		}
		out = append(out, e)
	}
	return out, nil
}
