package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"sluice.dev/sluice/internal/lb"
)

// ErrDelayTooLong: a target group drains for longer than the pods'
// termination grace period leaves room for. Check returns a *DelayError
// that matches it.
var ErrDelayTooLong = errors.New("deregistration delay longer than the pods' grace period allows")

// DelayError is Check's warning: pods would be killed while the load
// balancer may still send them traffic.
type DelayError struct {
	Group string
	// Delay is the group's deregistration_delay.timeout_seconds.
	Delay time.Duration
	// Margin is Options.DrainMargin, the time around the delay.
	Margin time.Duration
	// Grace is the pods' terminationGracePeriodSeconds.
	Grace time.Duration
}

func (e *DelayError) Error() string {
	return fmt.Sprintf("target group %s: deregistration delay %v + %v margin exceeds the pods' termination grace period %v: "+
		"lower deregistration_delay.timeout_seconds to at most %v or raise terminationGracePeriodSeconds to at least %v",
		e.Group, e.Delay, e.Margin, e.Grace, max(e.Grace-e.Margin, 0), e.Delay+e.Margin)
}

// Is makes errors.Is(err, ErrDelayTooLong) true.
func (e *DelayError) Is(target error) bool { return target == ErrDelayTooLong }

// DeregistrationDelay reads a target group's deregistration delay
// (DescribeTargetGroupAttributes).
func (p *Provider) DeregistrationDelay(ctx context.Context, arn string) (time.Duration, error) {
	if err := validARN(arn); err != nil {
		return 0, fmt.Errorf("reading deregistration delay: %w", err)
	}
	out, err := p.client.DescribeTargetGroupAttributes(ctx, &elbv2.DescribeTargetGroupAttributesInput{TargetGroupArn: aws.String(arn)})
	if err != nil {
		return 0, fmt.Errorf("reading deregistration delay of %s: %w", arn, classify(err))
	}
	for _, a := range out.Attributes {
		if aws.ToString(a.Key) != "deregistration_delay.timeout_seconds" {
			continue
		}
		s, err := strconv.Atoi(aws.ToString(a.Value))
		if err != nil || s < 0 {
			return 0, fmt.Errorf("reading deregistration delay of %s: bad value %q", arn, aws.ToString(a.Value))
		}
		return time.Duration(s) * time.Second, nil
	}
	return 300 * time.Second, nil // AWS's default when the attribute is absent
}

// Check warns (a *DelayError, errors.Is ErrDelayTooLong) when a group's
// deregistration delay plus Options.DrainMargin is longer than podGrace,
// the pods' terminationGracePeriodSeconds: the pod must outlive the drain,
// or AWS keeps sending connections to a dead pod. Other errors are the
// lookup's.
func (p *Provider) Check(ctx context.Context, arn string, podGrace time.Duration) error {
	delay, err := p.DeregistrationDelay(ctx, arn)
	if err != nil {
		return err
	}
	if delay+p.opts.DrainMargin > podGrace {
		return &DelayError{Group: arn, Delay: delay, Margin: p.opts.DrainMargin, Grace: podGrace}
	}
	return nil
}

// HealthCheckPort returns a target group's HealthCheckPort as AWS states
// it: "traffic-port" or a port number (DescribeTargetGroups, cached for
// Options.GroupTTL like the group's type).
func (p *Provider) HealthCheckPort(ctx context.Context, arn string) (string, error) {
	if err := validARN(arn); err != nil {
		return "", fmt.Errorf("reading health-check port: %w", err)
	}
	g := p.group(arn)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := p.describe(ctx, g); err != nil {
		return "", fmt.Errorf("reading health-check port of %s: %w", arn, err)
	}
	return g.healthCheckPort, nil
}

// Discover returns the ARNs, sorted, of the target groups tagged
// sluice.dev/cluster=cluster and sluice.dev/frontend=frontend (e.g. an
// internal and an internet-facing one). It reads every target group of the
// region (DescribeTargetGroups, paginated) and their tags (DescribeTags, 20
// at a time). No match is not an error: the list is empty.
func (p *Provider) Discover(ctx context.Context, cluster, frontend string) ([]string, error) {
	if cluster == "" || frontend == "" {
		return nil, fmt.Errorf("discovering target groups: cluster and frontend are required: %w", lb.ErrInvalid)
	}
	var arns []string
	in := &elbv2.DescribeTargetGroupsInput{PageSize: aws.Int32(400)}
	for {
		out, err := p.client.DescribeTargetGroups(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("discovering target groups: %w", classify(err))
		}
		for _, tg := range out.TargetGroups {
			arns = append(arns, aws.ToString(tg.TargetGroupArn))
		}
		if aws.ToString(out.NextMarker) == "" {
			break
		}
		in.Marker = out.NextMarker
	}
	var found []string
	for chunk := range slices.Chunk(arns, 20) {
		out, err := p.client.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: chunk})
		if err != nil {
			return nil, fmt.Errorf("discovering target groups: reading tags: %w", classify(err))
		}
		for _, d := range out.TagDescriptions {
			var c, f bool
			for _, t := range d.Tags {
				c = c || aws.ToString(t.Key) == ClusterTag && aws.ToString(t.Value) == cluster
				f = f || aws.ToString(t.Key) == FrontendTag && aws.ToString(t.Value) == frontend
			}
			if c && f {
				found = append(found, aws.ToString(d.ResourceArn))
			}
		}
	}
	slices.Sort(found)
	return found, nil
}

// Adopt makes targets owned without registering them, for a caller that
// persisted what it registered (in a group not tagged sluice.dev/owned)
// and restarts: adopted targets are listed by Targets and may be
// deregistered. Targets the group cannot hold are reported and skipped.
func (p *Provider) Adopt(ctx context.Context, arn string, ts []lb.Target) error {
	if err := validARN(arn); err != nil {
		return fmt.Errorf("adopting targets: %w", err)
	}
	g := p.group(arn)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := p.describe(ctx, g); err != nil {
		return fmt.Errorf("adopting targets of %s: %w", arn, err)
	}
	keys, byKey, errs := g.convert(ts)
	now := p.opts.Now()
	for _, k := range keys {
		if _, ok := g.mine[k]; !ok {
			g.mine[k] = &owned{target: byKey[k], registeredAt: now}
		}
	}
	return errors.Join(errs...)
}

// DrainTime is how long the target group may still send new connections
// to a deregistered target: its deregistration delay plus
// Options.DrainMargin (the binding reconciler's TimersConsistent check).
func (p *Provider) DrainTime(ctx context.Context, arn string) (time.Duration, error) {
	d, err := p.DeregistrationDelay(ctx, arn)
	if err != nil {
		return 0, err
	}
	return d + p.opts.DrainMargin, nil
}
