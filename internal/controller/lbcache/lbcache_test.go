package lbcache_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/lbcache"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/aws"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
)

func TestRuntimeAddress(t *testing.T) {
	cases := []struct{ in, want string }{
		{"unix:///run/haproxy/admin.sock", "unix:/run/haproxy/admin.sock"},
		{"tcp://127.0.0.1:9999", "127.0.0.1:9999"},
		{"tcp://haproxy.lb:9999", "haproxy.lb:9999"},
		{"unix://", ""},
		{"tcp://", ""},
		{"tcp://host:1/path", ""},
		{"http://x", ""},
		{"/run/x.sock", ""},
	}
	for _, tc := range cases {
		got, err := lbcache.RuntimeAddress(tc.in)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("lbcache.RuntimeAddress(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if err != nil && !errors.Is(err, lb.ErrInvalid) {
			t.Errorf("lbcache.RuntimeAddress(%q) error %v is not lb.ErrInvalid", tc.in, err)
		}
	}
}

func binding(name string, spec v1alpha1.ProviderSpec) *v1alpha1.LoadBalancerBinding {
	return &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1alpha1.LoadBalancerBindingSpec{Provider: spec}}
}

func TestCacheForHAProxy(t *testing.T) {
	c := lbcache.New(lbcache.Options{})
	ctx := context.Background()
	hp := func(addr, backend string) *v1alpha1.LoadBalancerBinding {
		return binding("b", v1alpha1.ProviderSpec{HAProxy: &v1alpha1.HAProxyProvider{RuntimeAPI: addr, Backend: backend}})
	}
	p1, g1, err := c.For(ctx, hp("unix:///a.sock", "be1"))
	if err != nil || !slices.Equal(g1, []string{"be1"}) {
		t.Fatal(g1, err)
	}
	p2, g2, _ := c.For(ctx, hp("unix:///a.sock", "be2"))
	p3, _, _ := c.For(ctx, hp("tcp://127.0.0.1:1", "be1"))
	if p1 != p2 || !slices.Equal(g2, []string{"be2"}) {
		t.Error("same runtime API, different backend: provider not shared")
	}
	if p1 == p3 {
		t.Error("different runtime APIs share a provider")
	}
	if _, _, err := c.For(ctx, binding("b", v1alpha1.ProviderSpec{})); !errors.Is(err, lb.ErrInvalid) {
		t.Errorf("empty: %v", err)
	}
	if _, _, err := c.For(ctx, hp("ftp://x", "be")); !errors.Is(err, lb.ErrInvalid) {
		t.Errorf("bad address: %v", err)
	}
}

const (
	arnEU1 = "arn:aws:elasticloadbalancing:eu-west-3:123456789012:targetgroup/web/0123456789abcdef"
	arnEU2 = "arn:aws:elasticloadbalancing:eu-west-3:123456789012:targetgroup/web-internal/0123456789abcdef"
	arnUS  = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/web/0123456789abcdef"
)

func TestRegion(t *testing.T) {
	cases := []struct {
		name   string
		spec   v1alpha1.AWSProvider
		region string
		arns   []string
	}{
		{"from the first ARN", v1alpha1.AWSProvider{TargetGroupARNs: []string{arnEU1, arnEU2}}, "eu-west-3", []string{arnEU1, arnEU2}},
		{"duplicates dropped", v1alpha1.AWSProvider{TargetGroupARNs: []string{arnEU1, arnEU2, arnEU1}}, "eu-west-3", []string{arnEU1, arnEU2}},
		{"spec region", v1alpha1.AWSProvider{Region: "eu-west-3", TargetGroupARNs: []string{arnEU1}}, "eu-west-3", []string{arnEU1}},
		{"no ARN: spec region", v1alpha1.AWSProvider{Region: "eu-west-3"}, "eu-west-3", []string{}},
		{"no ARN, no region: the environment's", v1alpha1.AWSProvider{}, "", []string{}},
		{"ARNs in two regions", v1alpha1.AWSProvider{TargetGroupARNs: []string{arnEU1, arnUS}}, "", nil},
		{"ARN outside the spec region", v1alpha1.AWSProvider{Region: "us-east-1", TargetGroupARNs: []string{arnEU1}}, "", nil},
		{"malformed ARN", v1alpha1.AWSProvider{TargetGroupARNs: []string{"arn:tg"}}, "", nil},
	}
	for _, tc := range cases {
		region, arns, err := lbcache.Region(&tc.spec)
		if tc.arns == nil {
			if !errors.Is(err, lb.ErrInvalid) {
				t.Errorf("%s: err = %v, want lb.ErrInvalid", tc.name, err)
			}
			continue
		}
		if err != nil || region != tc.region || !slices.Equal(arns, tc.arns) {
			t.Errorf("%s: Region = %q, %v, %v; want %q, %v", tc.name, region, arns, err, tc.region, tc.arns)
		}
	}
}

func TestCacheForAWS(t *testing.T) {
	ct.IsolateAWS(t)
	ctx := context.Background()
	c := lbcache.New(lbcache.Options{AWS: ct.AWSOptions("http://127.0.0.1:1")})
	awsb := func(name string, s v1alpha1.AWSProvider) *v1alpha1.LoadBalancerBinding {
		return binding(name, v1alpha1.ProviderSpec{AWS: &s})
	}
	p1, g1, err := c.For(ctx, awsb("a", v1alpha1.AWSProvider{TargetGroupARNs: []string{arnEU1, arnEU2}}))
	if err != nil || !slices.Equal(g1, []string{arnEU1, arnEU2}) {
		t.Fatalf("For = %v, %v", g1, err)
	}
	if r := p1.(*aws.Provider).Region(); r != "eu-west-3" {
		t.Errorf("region %q", r)
	}
	p2, _, _ := c.For(ctx, awsb("b", v1alpha1.AWSProvider{Region: "eu-west-3", TargetGroupARNs: []string{arnEU2}}))
	p3, _, _ := c.For(ctx, awsb("c", v1alpha1.AWSProvider{TargetGroupARNs: []string{arnUS}}))
	if p1 != p2 {
		t.Error("same region and endpoint: provider not shared")
	}
	if p1 == p3 {
		t.Error("two regions share a provider")
	}
	if _, _, err := c.For(ctx, awsb("d", v1alpha1.AWSProvider{TargetGroupARNs: []string{arnEU1, arnUS}})); !errors.Is(err, lb.ErrInvalid) {
		t.Errorf("two regions in one binding: %v", err)
	}
	// No ARN and no cluster to discover by: a configuration error.
	if _, _, err := c.For(ctx, awsb("e", v1alpha1.AWSProvider{Region: "eu-west-3"})); !errors.Is(err, lb.ErrInvalid) {
		t.Errorf("no ARN, no cluster: %v", err)
	}
	// No region anywhere.
	if _, _, err := c.For(ctx, awsb("f", v1alpha1.AWSProvider{})); !errors.Is(err, lb.ErrInvalid) {
		t.Errorf("no region: %v", err)
	}
}

func TestDiscovery(t *testing.T) {
	ct.IsolateAWS(t)
	ctx := context.Background()
	f := ct.AWSFake(t, 50)
	tags := func(frontend string) map[string]string {
		return map[string]string{aws.ClusterTag: "prod", aws.FrontendTag: frontend}
	}
	pub, err := f.AddTargetGroup(awsfake.TargetGroup{Name: "web-public", Tags: tags("web")})
	if err != nil {
		t.Fatal(err)
	}
	internal, _ := f.AddTargetGroup(awsfake.TargetGroup{Name: "web-internal", Tags: tags("web")})
	_, _ = f.AddTargetGroup(awsfake.TargetGroup{Name: "api", Tags: tags("api")})
	_, _ = f.AddTargetGroup(awsfake.TargetGroup{Name: "other-cluster", Tags: map[string]string{aws.ClusterTag: "dev", aws.FrontendTag: "web"}})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := lbcache.New(lbcache.Options{AWS: ct.AWSOptions(f.URL()), AWSCluster: "prod", Now: func() time.Time { return now }})
	web := binding("web", v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{Region: "us-east-1"}})

	_, groups, err := c.For(ctx, web)
	want := []string{pub, internal}
	slices.Sort(want)
	if err != nil || !slices.Equal(groups, want) {
		t.Fatalf("discovered %v, %v; want %v", groups, err, want)
	}
	// Reused within the TTL: no API call.
	before := f.Calls()["DescribeTargetGroups"]
	if _, again, err := c.For(ctx, web); err != nil || !slices.Equal(again, want) || f.Calls()["DescribeTargetGroups"] != before {
		t.Errorf("second For: %v, %v, %d calls (had %d)", again, err, f.Calls()["DescribeTargetGroups"], before)
	}
	// Tags read again after the TTL.
	if err := f.SetTags(internal, nil); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, groups, err := c.For(ctx, web); err != nil || !slices.Equal(groups, []string{pub}) {
		t.Errorf("after the TTL: %v, %v; want only %s", groups, err, pub)
	}
	// Nothing tagged for the frontend.
	none := binding("nothing", v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{Region: "us-east-1"}})
	if _, _, err := c.For(ctx, none); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Errorf("no tagged group: %v", err)
	}
	// Listed ARNs are used as they are, without discovery.
	before = f.Calls()["DescribeTargetGroups"]
	listed := binding("web", v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{TargetGroupARNs: []string{internal}}})
	if _, groups, err := c.For(ctx, listed); err != nil || !slices.Equal(groups, []string{internal}) || f.Calls()["DescribeTargetGroups"] != before {
		t.Errorf("listed ARN: %v, %v", groups, err)
	}
	// Discovery failing is the provider's error (retried), not a
	// configuration error.
	f.SetFaults(awsfake.Faults{ServerError: 1})
	now = now.Add(2 * time.Minute)
	if _, _, err := c.For(ctx, web); !errors.Is(err, lb.ErrUnreachable) {
		t.Errorf("discovery failing: %v", err)
	}
}

// TestExampleBinding keeps deploy/examples/aws-binding.yaml valid: it
// decodes strictly and its ARNs resolve to one region.
func TestExampleBinding(t *testing.T) {
	data, err := os.ReadFile("../../../deploy/examples/aws-binding.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b v1alpha1.LoadBalancerBinding
	if err := yaml.UnmarshalStrict(data, &b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.Provider.AWS == nil || b.Spec.Provider.HAProxy != nil {
		t.Fatalf("provider = %+v", b.Spec.Provider)
	}
	region, arns, err := lbcache.Region(b.Spec.Provider.AWS)
	if err != nil || region != "eu-west-1" || len(arns) != 2 {
		t.Errorf("Region = %q, %v, %v", region, arns, err)
	}
}
