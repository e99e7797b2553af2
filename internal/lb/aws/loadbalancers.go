package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"sluice.dev/sluice/internal/lb"
)

// LoadBalancer is a load balancer in front of sluice's target groups: what
// DNS records point at (an ALIAS to DNSName in CanonicalHostedZoneID).
type LoadBalancer struct {
	ARN string
	// DNSName is AWS's name for the load balancer, lower case, no trailing
	// dot ("web-0123456789abcdef.elb.us-east-1.amazonaws.com").
	DNSName string
	// CanonicalHostedZoneID is the Route53 zone of DNSName, the ALIAS
	// target's HostedZoneId.
	CanonicalHostedZoneID string
	// Type is "network", "application" or "gateway".
	Type string
	// Scheme is "internet-facing" or "internal".
	Scheme string
}

// lbCache remembers which load balancers front which target groups, and
// what those load balancers are. Load balancers rarely change: entries
// live for Options.LoadBalancerTTL.
type lbCache struct {
	mu     sync.Mutex // serializes LoadBalancers calls: one refresh at a time
	groups map[string]lbEntry[[]string]
	lbs    map[string]lbEntry[LoadBalancer]
}

type lbEntry[T any] struct {
	value T
	at    time.Time
}

// LoadBalancers returns the load balancers that forward to the given target
// groups, deduplicated and sorted by ARN. A group no load balancer uses
// adds none. Answers are cached for Options.LoadBalancerTTL (default 1m);
// a refresh costs one DescribeTargetGroups per 400 stale groups and one
// DescribeLoadBalancers per 20 stale load balancers, through the provider's
// Describe rate limit. On an error nothing is returned: callers keep what
// they knew.
func (p *Provider) LoadBalancers(ctx context.Context, groups []string) ([]LoadBalancer, error) {
	for _, arn := range groups {
		if err := validARN(arn); err != nil {
			return nil, fmt.Errorf("discovering load balancers: %w", err)
		}
	}
	c := &p.lbs
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups, c.lbs = map[string]lbEntry[[]string]{}, map[string]lbEntry[LoadBalancer]{}
	}
	now := p.opts.Now()
	fresh := func(at time.Time) bool { return now.Sub(at) < p.opts.LoadBalancerTTL }

	groups = slices.Compact(slices.Sorted(slices.Values(groups)))
	var stale []string
	for _, g := range groups {
		if e, ok := c.groups[g]; !ok || !fresh(e.at) {
			stale = append(stale, g)
		}
	}
	for chunk := range slices.Chunk(stale, 400) {
		out, err := p.client.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: chunk, PageSize: aws.Int32(400)})
		if err != nil {
			return nil, fmt.Errorf("discovering load balancers: describing target groups: %w", classify(err))
		}
		for _, tg := range out.TargetGroups {
			c.groups[aws.ToString(tg.TargetGroupArn)] = lbEntry[[]string]{value: slices.Clone(tg.LoadBalancerArns), at: now}
		}
	}

	var want []string
	for _, g := range groups {
		e, ok := c.groups[g]
		if !ok {
			return nil, fmt.Errorf("discovering load balancers: target group %s not in the answer: %w", g, lb.ErrGroupNotFound)
		}
		want = append(want, e.value...)
	}
	want = slices.Compact(slices.Sorted(slices.Values(want)))
	stale = stale[:0]
	for _, arn := range want {
		if e, ok := c.lbs[arn]; !ok || !fresh(e.at) {
			stale = append(stale, arn)
		}
	}
	for chunk := range slices.Chunk(stale, 20) {
		if err := p.describeLoadBalancers(ctx, chunk, now); err != nil {
			return nil, fmt.Errorf("discovering load balancers: %w", err)
		}
	}

	out := make([]LoadBalancer, 0, len(want))
	for _, arn := range want {
		e, ok := c.lbs[arn]
		if !ok {
			// Deleted since the target group was described: not in front
			// of it any more.
			continue
		}
		out = append(out, e.value)
	}
	return out, nil
}

// describeLoadBalancers loads up to 20 load balancers into the cache,
// following NextMarker. Caller holds p.lbs.mu.
func (p *Provider) describeLoadBalancers(ctx context.Context, arns []string, now time.Time) error {
	in := &elbv2.DescribeLoadBalancersInput{LoadBalancerArns: arns}
	for {
		out, err := p.client.DescribeLoadBalancers(ctx, in)
		if isLoadBalancerNotFound(err) && len(in.LoadBalancerArns) > 1 {
			// One was deleted: AWS fails the whole call, so ask one by one.
			for _, arn := range in.LoadBalancerArns {
				if err := p.describeLoadBalancers(ctx, []string{arn}, now); err != nil {
					return err
				}
			}
			return nil
		}
		if isLoadBalancerNotFound(err) {
			delete(p.lbs.lbs, in.LoadBalancerArns[0])
			return nil
		}
		if err != nil {
			return fmt.Errorf("describing load balancers: %w", classify(err))
		}
		for _, l := range out.LoadBalancers {
			v := LoadBalancer{
				ARN:                   aws.ToString(l.LoadBalancerArn),
				DNSName:               normalizeDNSName(aws.ToString(l.DNSName)),
				CanonicalHostedZoneID: aws.ToString(l.CanonicalHostedZoneId),
				Type:                  string(l.Type),
				Scheme:                string(l.Scheme),
			}
			p.lbs.lbs[v.ARN] = lbEntry[LoadBalancer]{value: v, at: now}
		}
		if aws.ToString(out.NextMarker) == "" {
			return nil
		}
		in.Marker = out.NextMarker
	}
}

// isLoadBalancerNotFound reports AWS's answer for an unknown load balancer.
func isLoadBalancerNotFound(err error) bool {
	var nf *types.LoadBalancerNotFoundException
	return err != nil && errors.As(err, &nf)
}

// normalizeDNSName lower-cases a DNS name and drops the trailing dot.
func normalizeDNSName(s string) string {
	return strings.ToLower(strings.TrimRight(s, "."))
}
