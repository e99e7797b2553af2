package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/controller/binding"
)

func TestParseAccess(t *testing.T) {
	inCluster := func() string { return "sluice-system" }
	outside := func() string { return "" }
	for _, tc := range []struct {
		name    string
		f       accessFlags
		own     func() string
		want    binding.Access // compared when wantErr is empty
		wantErr string
	}{
		{name: "absent flags: own namespace, no load balancer", own: inCluster,
			want: binding.Access{Namespaces: []string{"sluice-system"}, IngressDaemonSets: []string{"sluice-system"}, HAProxyRuntimeAPIs: []string{"none"}, AWSTargetGroups: []string{"none"}}},
		{name: "own namespace unknown", own: outside, wantErr: "--binding-namespaces: the controller's own namespace is unknown"},
		{name: "IDS namespace unknown", f: accessFlags{bindingNamespaces: "a"}, own: outside, wantErr: "--ingressdaemonset-namespaces: the controller's own namespace is unknown"},
		{name: "all", f: accessFlags{bindingNamespaces: "*", idsNamespaces: "*", haproxyAPIs: "*", awsGroups: "*"}, own: outside,
			want: binding.Access{Namespaces: []string{"*"}, IngressDaemonSets: []string{"*"}, HAProxyRuntimeAPIs: []string{"*"}, AWSTargetGroups: []string{"*"}}},
		// Widening the binding namespaces leaves IngressDaemonSets in the
		// controller's own.
		{name: "binding namespaces widened", f: accessFlags{bindingNamespaces: "a, b ,"}, own: inCluster,
			want: binding.Access{Namespaces: []string{"a", "b"}, IngressDaemonSets: []string{"sluice-system"}, HAProxyRuntimeAPIs: []string{"none"}, AWSTargetGroups: []string{"none"}}},
		{name: "IDS namespaces", f: accessFlags{bindingNamespaces: "sluice-system,team-a", idsNamespaces: "edge"}, own: inCluster,
			want: binding.Access{Namespaces: []string{"sluice-system", "team-a"}, IngressDaemonSets: []string{"edge"}, HAProxyRuntimeAPIs: []string{"none"}, AWSTargetGroups: []string{"none"}}},
		{name: "bad namespace", f: accessFlags{bindingNamespaces: "Team_A"}, own: inCluster, wantErr: `--binding-namespaces: invalid entry "Team_A"`},
		{name: "bad IDS namespace", f: accessFlags{idsNamespaces: "a/b"}, own: inCluster, wantErr: `--ingressdaemonset-namespaces: invalid entry "a/b"`},
		{name: "runtime APIs", f: accessFlags{haproxyAPIs: "tcp://10.0.0.1:9999,unix:///run/h.sock"}, own: inCluster,
			want: binding.Access{Namespaces: []string{"sluice-system"}, IngressDaemonSets: []string{"sluice-system"}, HAProxyRuntimeAPIs: []string{"tcp://10.0.0.1:9999", "unix:///run/h.sock"}, AWSTargetGroups: []string{"none"}}},
		{name: "bad runtime API", f: accessFlags{haproxyAPIs: "10.0.0.1:9999"}, own: inCluster, wantErr: "--allowed-haproxy-runtime-apis"},
		{name: "target groups", f: accessFlags{awsGroups: "arn:aws:elasticloadbalancing:eu-west-1:1:*,tag:sluice.dev/frontend=sluice-system/web,tag:sluice.dev/frontend=team-a/*"}, own: inCluster,
			want: binding.Access{Namespaces: []string{"sluice-system"}, IngressDaemonSets: []string{"sluice-system"}, HAProxyRuntimeAPIs: []string{"none"},
				AWSTargetGroups: []string{"arn:aws:elasticloadbalancing:eu-west-1:1:*", "tag:sluice.dev/frontend=sluice-system/web", "tag:sluice.dev/frontend=team-a/*"}}},
		// A bare name once matched every namespace: refused, with the fix.
		{name: "bare tag name", f: accessFlags{awsGroups: "tag:sluice.dev/frontend=web"}, own: inCluster,
			wantErr: "--allowed-aws-target-groups: tag entry \"tag:sluice.dev/frontend=web\": a tag entry names the binding as NAMESPACE/NAME: write tag:sluice.dev/frontend=NAMESPACE/web"},
		{name: "bare tag *", f: accessFlags{awsGroups: "tag:sluice.dev/frontend=*"}, own: inCluster, wantErr: "write tag:sluice.dev/frontend=NAMESPACE/*"},
		{name: "any namespace in a tag", f: accessFlags{awsGroups: "tag:sluice.dev/frontend=*/web"}, own: inCluster, wantErr: `namespace "*"`},
		{name: "other tag", f: accessFlags{awsGroups: "tag:team=a"}, own: inCluster, wantErr: "--allowed-aws-target-groups: tag entry"},
		{name: "not an ARN", f: accessFlags{awsGroups: "web"}, own: inCluster, wantErr: `--allowed-aws-target-groups: invalid entry "web"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.f.parse(tc.own)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range []struct {
				name      string
				got, want []string
			}{{"namespaces", a.Namespaces, tc.want.Namespaces}, {"ingressdaemonsets", a.IngressDaemonSets, tc.want.IngressDaemonSets},
				{"haproxy", a.HAProxyRuntimeAPIs, tc.want.HAProxyRuntimeAPIs}, {"aws", a.AWSTargetGroups, tc.want.AWSTargetGroups}} {
				if !slices.Equal(l.got, l.want) {
					t.Errorf("%s = %q, want %q", l.name, l.got, l.want)
				}
			}
		})
	}
}

// The flag defaults are the empty strings parse reads as "own namespace,
// no load balancer"; the help says so.
func TestAccessFlagDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f accessFlags
	f.register(fs)
	for name, want := range map[string]string{"binding-namespaces": "own namespace", "ingressdaemonset-namespaces": "own namespace",
		"allowed-haproxy-runtime-apis": "(default: none)", "allowed-aws-target-groups": "(default: none)"} {
		fl := fs.Lookup(name)
		if fl == nil || fl.DefValue != "" || !strings.Contains(fl.Usage, want) {
			t.Errorf("--%s: %+v, want default \"\" and help saying %q", name, fl, want)
		}
	}
}

// FuzzAccessFlags: the allow-lists come from the operator's command line.
// Nothing panics; every entry kept is "*", "none" or valid, and a kept tag
// entry names a namespace.
func FuzzAccessFlags(f *testing.F) {
	for _, s := range []string{"", "*", "none", "a,b", "tag:sluice.dev/frontend=web", "tag:sluice.dev/frontend=ns/web",
		"tag:sluice.dev/frontend=ns/*", "tag:sluice.dev/frontend=/", "arn:aws:x:*", "unix:///run/h.sock,tcp://h:1", "tag:sluice.dev/frontend=a/b/c"} {
		f.Add(s)
	}
	own := func() string { return "own" }
	f.Fuzz(func(t *testing.T, v string) {
		a, err := (&accessFlags{bindingNamespaces: v, idsNamespaces: v, haproxyAPIs: v, awsGroups: v}).parse(own)
		if err != nil {
			return
		}
		for _, l := range [][]string{a.Namespaces, a.IngressDaemonSets, a.HAProxyRuntimeAPIs, a.AWSTargetGroups} {
			if len(l) == 0 {
				t.Fatalf("an empty list (allows everything) from %q", v)
			}
		}
		for _, e := range a.AWSTargetGroups {
			if strings.HasPrefix(e, "tag:") {
				if _, _, err := binding.ParseTagEntry(e); err != nil {
					t.Fatalf("kept tag entry %q: %v", e, err)
				}
			}
		}
	})
}
