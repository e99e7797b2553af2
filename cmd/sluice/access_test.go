package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseAccess(t *testing.T) {
	inCluster := func() string { return "sluice-system" }
	outside := func() string { return "" }
	for _, tc := range []struct {
		name                 string
		ns, apis, groups, le string
		own                  func() string
		wantNS               []string
		wantErr              string
	}{
		{name: "default: the pod's namespace", apis: "*", groups: "*", le: "other", own: inCluster, wantNS: []string{"sluice-system"}},
		{name: "default outside: the lease namespace", apis: "*", groups: "*", le: "ingress", own: outside, wantNS: []string{"ingress"}},
		{name: "default unknown", apis: "*", groups: "*", own: outside, wantErr: "own namespace is unknown"},
		{name: "all", ns: "*", apis: "*", groups: "*", own: outside, wantNS: []string{"*"}},
		{name: "list with spaces", ns: "a, b ,", apis: "*", groups: "*", own: outside, wantNS: []string{"a", "b"}},
		{name: "bad namespace", ns: "Team_A", apis: "*", groups: "*", own: inCluster, wantErr: `--binding-namespaces: invalid entry "Team_A"`},
		{name: "runtime APIs", apis: "tcp://10.0.0.1:9999,unix:///run/h.sock", groups: "*", own: inCluster, wantNS: []string{"sluice-system"}},
		{name: "bad runtime API", apis: "10.0.0.1:9999", groups: "*", own: inCluster, wantErr: "--allowed-haproxy-runtime-apis"},
		{name: "empty runtime APIs", apis: "", groups: "*", own: inCluster, wantErr: "must not be empty"},
		{name: "target groups", apis: "*", groups: "arn:aws:elasticloadbalancing:eu-west-1:1:*,tag:sluice.dev/frontend=web", own: inCluster, wantNS: []string{"sluice-system"}},
		{name: "none", apis: "none", groups: "none", own: inCluster, wantNS: []string{"sluice-system"}},
		{name: "bad target group", apis: "*", groups: "tag:team=a", own: inCluster, wantErr: "--allowed-aws-target-groups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseAccess(tc.ns, tc.apis, tc.groups, tc.le, tc.own)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.Namespaces, tc.wantNS) {
				t.Errorf("namespaces = %v, want %v", a.Namespaces, tc.wantNS)
			}
		})
	}
}
