package aws

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
)

func TestLoadBalancers(t *testing.T) {
	f := newFake(t)
	tgA := newGroup(t, f, awsfake.TargetGroup{Name: "a"})
	tgB := newGroup(t, f, awsfake.TargetGroup{Name: "b"})
	tgC := newGroup(t, f, awsfake.TargetGroup{Name: "c"})
	nlb, err := f.AddLoadBalancer(awsfake.LoadBalancer{Name: "web", TargetGroups: []string{tgA, tgB}})
	if err != nil {
		t.Fatal(err)
	}
	alb, err := f.AddLoadBalancer(awsfake.LoadBalancer{Name: "Admin", Type: "application", Scheme: "internal", TargetGroups: []string{tgB}})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^web-[0-9a-f]{16}\.elb\.us-east-1\.amazonaws\.com$`).MatchString(nlb.DNSName) || nlb.CanonicalHostedZoneID != "Z26RNL4JYFTOTI" {
		t.Errorf("network load balancer %+v: want web-<hex>.elb.us-east-1.amazonaws.com in Z26RNL4JYFTOTI", nlb)
	}
	if !regexp.MustCompile(`^internal-admin-[0-9]+\.us-east-1\.elb\.amazonaws\.com$`).MatchString(alb.DNSName) || alb.CanonicalHostedZoneID != "Z35SXDOTRQ7X7K" {
		t.Errorf("application load balancer %+v: want internal-admin-<n>.us-east-1.elb.amazonaws.com in Z35SXDOTRQ7X7K", alb)
	}
	now := &clock{now: time.Unix(1e9, 0)}
	p := newProvider(t, f, func(o *Options) { o.Now = now.Now })
	ctx := context.Background()

	got, err := p.LoadBalancers(ctx, []string{tgB, tgA, tgC, tgA})
	if err != nil {
		t.Fatal(err)
	}
	want := []LoadBalancer{
		{ARN: nlb.ARN, DNSName: nlb.DNSName, CanonicalHostedZoneID: nlb.CanonicalHostedZoneID, Type: "network", Scheme: "internet-facing"},
		{ARN: alb.ARN, DNSName: alb.DNSName, CanonicalHostedZoneID: alb.CanonicalHostedZoneID, Type: "application", Scheme: "internal"},
	}
	slices.SortFunc(want, func(a, b LoadBalancer) int { return strings.Compare(a.ARN, b.ARN) })
	if !slices.Equal(got, want) {
		t.Fatalf("LoadBalancers = %+v\nwant %+v", got, want)
	}
	if got, err := p.LoadBalancers(ctx, []string{tgC}); err != nil || len(got) != 0 {
		t.Errorf("LoadBalancers(unused group) = %v, %v; want none", got, err)
	}

	// Cached: no call within the TTL, one refresh after it.
	calls := f.Calls()
	if _, err := p.LoadBalancers(ctx, []string{tgA, tgB}); err != nil {
		t.Fatal(err)
	}
	if after := f.Calls(); after["DescribeTargetGroups"] != calls["DescribeTargetGroups"] || after["DescribeLoadBalancers"] != calls["DescribeLoadBalancers"] {
		t.Errorf("cached call made requests: %v then %v", calls, after)
	}
	if err := f.RemoveLoadBalancer(alb.ARN); err != nil {
		t.Fatal(err)
	}
	now.Add(time.Minute)
	got, err = p.LoadBalancers(ctx, []string{tgA, tgB})
	if err != nil || len(got) != 1 || got[0].ARN != nlb.ARN {
		t.Errorf("after removing the ALB: %+v, %v; want the NLB only", got, err)
	}

	if _, err := p.LoadBalancers(ctx, []string{"arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/gone/0123456789abcdef"}); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Errorf("unknown group: %v, want ErrGroupNotFound", err)
	}
	if _, err := p.LoadBalancers(ctx, []string{"not an arn"}); !errors.Is(err, lb.ErrInvalid) {
		t.Errorf("bad ARN: %v, want ErrInvalid", err)
	}
}

// TestLoadBalancersPaging makes DescribeLoadBalancers page (the fake pages
// like AWS) and a deleted load balancer fail the batch it is in.
func TestLoadBalancersPaging(t *testing.T) {
	f := newFake(t)
	var groups []string
	for i := range 25 {
		tg := newGroup(t, f, awsfake.TargetGroup{Name: fmt.Sprintf("g%d", i)})
		groups = append(groups, tg)
		if _, err := f.AddLoadBalancer(awsfake.LoadBalancer{Name: fmt.Sprintf("lb%d", i), TargetGroups: []string{tg}}); err != nil {
			t.Fatal(err)
		}
	}
	now := &clock{now: time.Unix(1e9, 0)}
	p := newProvider(t, f, func(o *Options) { o.Now = now.Now })
	got, err := p.LoadBalancers(context.Background(), groups)
	if err != nil || len(got) != 25 {
		t.Fatalf("LoadBalancers: %d, %v; want 25", len(got), err)
	}
	if !slices.IsSortedFunc(got, func(a, b LoadBalancer) int { return strings.Compare(a.ARN, b.ARN) }) {
		t.Error("not sorted by ARN")
	}
	if n := answered(p, "DescribeLoadBalancers", "ok"); n != 2 {
		t.Errorf("DescribeLoadBalancers calls = %d, want 2 (20 ARNs per call)", n)
	}

	// A load balancer deleted between the two describes: AWS fails the
	// batch with LoadBalancerNotFound; the others are still found.
	if err := f.RemoveLoadBalancer(got[3].ARN); err != nil {
		t.Fatal(err)
	}
	now.Add(time.Minute)
	for g, e := range p.lbs.groups {
		e.at = now.Now() // the groups' view is fresh and still lists it
		p.lbs.groups[g] = e
	}
	before := answered(p, "DescribeLoadBalancers", "ok")
	got2, err := p.LoadBalancers(context.Background(), groups)
	if err != nil || len(got2) != 24 {
		t.Fatalf("after a deletion: %d, %v; want 24", len(got2), err)
	}
	// The batch with the deleted one fails, then its 20 are asked one by
	// one (19 found, 1 not), then the other batch.
	ok, nf := answered(p, "DescribeLoadBalancers", "ok")-before, answered(p, "DescribeLoadBalancers", "LoadBalancerNotFound")
	if ok != 19+1 || nf != 2 {
		t.Errorf("DescribeLoadBalancers answered ok %d, not found %d; want 20 and 2", ok, nf)
	}
}
