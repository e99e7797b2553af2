package managedlb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/acm"
	acmtypes "github.com/aws/aws-sdk-go-v2/service/acm/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb/aws/managed"
)

// ELB is the part of the ELBv2 client SDKCloud uses (*elbv2.Client).
type ELB interface {
	elbv2.DescribeLoadBalancersAPIClient
	elbv2.DescribeTargetGroupsAPIClient
	elbv2.DescribeListenersAPIClient
	DescribeTags(context.Context, *elbv2.DescribeTagsInput, ...func(*elbv2.Options)) (*elbv2.DescribeTagsOutput, error)
	DescribeTargetGroupAttributes(context.Context, *elbv2.DescribeTargetGroupAttributesInput, ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupAttributesOutput, error)
	DescribeTargetHealth(context.Context, *elbv2.DescribeTargetHealthInput, ...func(*elbv2.Options)) (*elbv2.DescribeTargetHealthOutput, error)
	DescribeListenerCertificates(context.Context, *elbv2.DescribeListenerCertificatesInput, ...func(*elbv2.Options)) (*elbv2.DescribeListenerCertificatesOutput, error)
	CreateLoadBalancer(context.Context, *elbv2.CreateLoadBalancerInput, ...func(*elbv2.Options)) (*elbv2.CreateLoadBalancerOutput, error)
	DeleteLoadBalancer(context.Context, *elbv2.DeleteLoadBalancerInput, ...func(*elbv2.Options)) (*elbv2.DeleteLoadBalancerOutput, error)
	CreateTargetGroup(context.Context, *elbv2.CreateTargetGroupInput, ...func(*elbv2.Options)) (*elbv2.CreateTargetGroupOutput, error)
	ModifyTargetGroup(context.Context, *elbv2.ModifyTargetGroupInput, ...func(*elbv2.Options)) (*elbv2.ModifyTargetGroupOutput, error)
	ModifyTargetGroupAttributes(context.Context, *elbv2.ModifyTargetGroupAttributesInput, ...func(*elbv2.Options)) (*elbv2.ModifyTargetGroupAttributesOutput, error)
	DeleteTargetGroup(context.Context, *elbv2.DeleteTargetGroupInput, ...func(*elbv2.Options)) (*elbv2.DeleteTargetGroupOutput, error)
	CreateListener(context.Context, *elbv2.CreateListenerInput, ...func(*elbv2.Options)) (*elbv2.CreateListenerOutput, error)
	ModifyListener(context.Context, *elbv2.ModifyListenerInput, ...func(*elbv2.Options)) (*elbv2.ModifyListenerOutput, error)
	DeleteListener(context.Context, *elbv2.DeleteListenerInput, ...func(*elbv2.Options)) (*elbv2.DeleteListenerOutput, error)
	AddListenerCertificates(context.Context, *elbv2.AddListenerCertificatesInput, ...func(*elbv2.Options)) (*elbv2.AddListenerCertificatesOutput, error)
	RemoveListenerCertificates(context.Context, *elbv2.RemoveListenerCertificatesInput, ...func(*elbv2.Options)) (*elbv2.RemoveListenerCertificatesOutput, error)
}

var _ ELB = (*elbv2.Client)(nil)

// SDKCloud is the Cloud over aws-sdk-go-v2's ELBv2 and ACM clients.
type SDKCloud struct {
	ELB ELB
	ACM acm.ListCertificatesAPIClient
	// EC2 finds subnets by tag (spec.subnetTags). Nil: not supported.
	EC2 EC2
	// Describe reads one certificate's full list of names (a listing
	// holds at most 100). Nil: the listing's names are used.
	Describe func(context.Context, *acm.DescribeCertificateInput, ...func(*acm.Options)) (*acm.DescribeCertificateOutput, error)
}

var _ Cloud = (*SDKCloud)(nil)

// NewSDKCloud wraps the SDK clients.
func NewSDKCloud(e *elbv2.Client, a *acm.Client, x EC2) *SDKCloud {
	return &SDKCloud{ELB: e, ACM: a, EC2: x, Describe: a.DescribeCertificate}
}

// tagged reads the tags of arns, 20 at a time.
func (c *SDKCloud) tagged(ctx context.Context, arns []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for chunk := range slices.Chunk(arns, 20) {
		res, err := c.ELB.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: chunk})
		if err != nil {
			return nil, fmt.Errorf("reading tags: %w", err)
		}
		for _, d := range res.TagDescriptions {
			m := map[string]string{}
			for _, t := range d.Tags {
				m[aws.ToString(t.Key)] = aws.ToString(t.Value)
			}
			out[aws.ToString(d.ResourceArn)] = m
		}
	}
	return out, nil
}

// Find lists what AWS holds for a binding: load balancers and target
// groups tagged with its cluster and UID, and target groups tagged with
// its cluster and frontend but no UID (adopted).
func (c *SDKCloud) Find(ctx context.Context, cluster, frontend, uid string) (managed.Found, error) {
	var f managed.Found
	var lbs []types.LoadBalancer
	lp := elbv2.NewDescribeLoadBalancersPaginator(c.ELB, &elbv2.DescribeLoadBalancersInput{PageSize: aws.Int32(400)})
	for lp.HasMorePages() {
		page, err := lp.NextPage(ctx)
		if err != nil {
			return f, fmt.Errorf("listing load balancers: %w", err)
		}
		lbs = append(lbs, page.LoadBalancers...)
	}
	var tgs []types.TargetGroup
	tp := elbv2.NewDescribeTargetGroupsPaginator(c.ELB, &elbv2.DescribeTargetGroupsInput{PageSize: aws.Int32(400)})
	for tp.HasMorePages() {
		page, err := tp.NextPage(ctx)
		if err != nil {
			return f, fmt.Errorf("listing target groups: %w", err)
		}
		tgs = append(tgs, page.TargetGroups...)
	}
	arns := make([]string, 0, len(lbs)+len(tgs))
	for _, l := range lbs {
		arns = append(arns, aws.ToString(l.LoadBalancerArn))
	}
	for _, g := range tgs {
		arns = append(arns, aws.ToString(g.TargetGroupArn))
	}
	tags, err := c.tagged(ctx, arns)
	if err != nil {
		return f, err
	}
	setOf := func(t map[string]string) int64 {
		n, _ := strconv.ParseInt(t[managed.SetTag], 10, 64)
		return n
	}
	for _, l := range lbs {
		t := tags[aws.ToString(l.LoadBalancerArn)]
		if t[managed.ClusterTag] != cluster || t[managed.OwnerTag] != uid {
			continue
		}
		f.LoadBalancers = append(f.LoadBalancers, managed.LoadBalancer{ARN: aws.ToString(l.LoadBalancerArn), Name: aws.ToString(l.LoadBalancerName),
			Type: string(l.Type), Scheme: string(l.Scheme), DNSName: aws.ToString(l.DNSName), ZoneID: aws.ToString(l.CanonicalHostedZoneId), Set: setOf(t)})
		ls := elbv2.NewDescribeListenersPaginator(c.ELB, &elbv2.DescribeListenersInput{LoadBalancerArn: l.LoadBalancerArn})
		for ls.HasMorePages() {
			page, err := ls.NextPage(ctx)
			if err != nil {
				return f, fmt.Errorf("listing listeners of %s: %w", aws.ToString(l.LoadBalancerArn), err)
			}
			for _, x := range page.Listeners {
				fl, err := c.listener(ctx, x)
				if err != nil {
					return f, err
				}
				f.Listeners = append(f.Listeners, fl)
			}
		}
	}
	for _, g := range tgs {
		arn := aws.ToString(g.TargetGroupArn)
		t := tags[arn]
		owned := t[managed.ClusterTag] == cluster && t[managed.OwnerTag] == uid
		adopted := t[managed.ClusterTag] == cluster && t[managed.FrontendTag] == frontend && t[managed.OwnerTag] == ""
		if !owned && !adopted {
			continue
		}
		tg := managed.TargetGroup{ARN: arn, Name: aws.ToString(g.TargetGroupName), Protocol: string(g.Protocol), TargetType: string(g.TargetType),
			Port: aws.ToInt32(g.Port), Set: setOf(t), Owned: owned, Attributes: map[string]string{},
			HealthCheck: v1alpha1.ManagedHealthCheck{Path: aws.ToString(g.HealthCheckPath), Port: aws.ToString(g.HealthCheckPort),
				IntervalSeconds: aws.ToInt32(g.HealthCheckIntervalSeconds), TimeoutSeconds: aws.ToInt32(g.HealthCheckTimeoutSeconds),
				HealthyThreshold: aws.ToInt32(g.HealthyThresholdCount), UnhealthyThreshold: aws.ToInt32(g.UnhealthyThresholdCount)}}
		attrs, err := c.ELB.DescribeTargetGroupAttributes(ctx, &elbv2.DescribeTargetGroupAttributesInput{TargetGroupArn: g.TargetGroupArn})
		if err != nil {
			return f, fmt.Errorf("reading attributes of %s: %w", arn, err)
		}
		for _, a := range attrs.Attributes {
			tg.Attributes[aws.ToString(a.Key)] = aws.ToString(a.Value)
		}
		health, err := c.ELB.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: g.TargetGroupArn})
		if err != nil {
			return f, fmt.Errorf("reading target health of %s: %w", arn, err)
		}
		for _, h := range health.TargetHealthDescriptions {
			if h.TargetHealth != nil && h.TargetHealth.State == types.TargetHealthStateEnumHealthy {
				tg.Healthy++
			}
		}
		f.TargetGroups = append(f.TargetGroups, tg)
	}
	return f, nil
}

// listener converts a listener, with its certificates.
func (c *SDKCloud) listener(ctx context.Context, x types.Listener) (managed.FoundListener, error) {
	fl := managed.FoundListener{ARN: aws.ToString(x.ListenerArn), LoadBalancer: aws.ToString(x.LoadBalancerArn), Port: aws.ToInt32(x.Port),
		Protocol: string(x.Protocol), SSLPolicy: aws.ToString(x.SslPolicy)}
	for _, a := range x.DefaultActions {
		if a.Type == types.ActionTypeEnumForward {
			fl.TargetGroup = aws.ToString(a.TargetGroupArn)
		}
	}
	if x.Protocol != types.ProtocolEnumTls && x.Protocol != types.ProtocolEnumHttps {
		return fl, nil
	}
	var def string
	var others []string
	in := &elbv2.DescribeListenerCertificatesInput{ListenerArn: x.ListenerArn}
	for {
		page, err := c.ELB.DescribeListenerCertificates(ctx, in)
		if err != nil {
			return fl, fmt.Errorf("listing certificates of %s: %w", fl.ARN, err)
		}
		for _, ct := range page.Certificates {
			if aws.ToBool(ct.IsDefault) {
				def = aws.ToString(ct.CertificateArn)
			} else {
				others = append(others, aws.ToString(ct.CertificateArn))
			}
		}
		if aws.ToString(page.NextMarker) == "" {
			break
		}
		in.Marker = page.NextMarker
	}
	if def != "" {
		fl.Certificates = append([]string{def}, others...)
	}
	return fl, nil
}

// Certificates lists the issued ACM certificates of every key type.
func (c *SDKCloud) Certificates(ctx context.Context) ([]managed.Cert, error) {
	var out []managed.Cert
	p := acm.NewListCertificatesPaginator(c.ACM, &acm.ListCertificatesInput{
		CertificateStatuses: []acmtypes.CertificateStatus{acmtypes.CertificateStatusIssued},
		Includes: &acmtypes.Filters{KeyTypes: []acmtypes.KeyAlgorithm{acmtypes.KeyAlgorithmRsa2048, acmtypes.KeyAlgorithmRsa3072,
			acmtypes.KeyAlgorithmRsa4096, acmtypes.KeyAlgorithmEcPrime256v1, acmtypes.KeyAlgorithmEcSecp384r1}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing certificates: %w", err)
		}
		for _, s := range page.CertificateSummaryList {
			ct := managed.Cert{ARN: aws.ToString(s.CertificateArn), Names: slices.Clone(s.SubjectAlternativeNameSummaries), Status: string(s.Status),
				NotBefore: aws.ToTime(s.NotBefore), NotAfter: aws.ToTime(s.NotAfter)}
			if d := aws.ToString(s.DomainName); d != "" && !slices.Contains(ct.Names, d) {
				ct.Names = append(ct.Names, d)
			}
			if aws.ToBool(s.HasAdditionalSubjectAlternativeNames) && c.Describe != nil {
				d, err := c.Describe(ctx, &acm.DescribeCertificateInput{CertificateArn: s.CertificateArn})
				if err != nil {
					return nil, fmt.Errorf("describing certificate %s: %w", ct.ARN, err)
				}
				ct.Names = append(ct.Names, d.Certificate.SubjectAlternativeNames...)
			}
			out = append(out, ct)
		}
	}
	return out, nil
}

func elbTags(m map[string]string, set int64) []types.Tag {
	m = maps.Clone(m)
	if set >= 0 {
		m[managed.SetTag] = strconv.FormatInt(set, 10)
	}
	var out []types.Tag
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func healthInput(hc v1alpha1.ManagedHealthCheck) (path, port *string, interval, timeout, healthy, unhealthy *int32) {
	opt := func(n int32) *int32 {
		if n == 0 {
			return nil
		}
		return aws.Int32(n)
	}
	if hc.Path != "" {
		path = aws.String(hc.Path)
	}
	if hc.Port != "" {
		port = aws.String(hc.Port)
	}
	return path, port, opt(hc.IntervalSeconds), opt(hc.TimeoutSeconds), opt(hc.HealthyThreshold), opt(hc.UnhealthyThreshold)
}

func certs(arns []string) []types.Certificate {
	out := make([]types.Certificate, len(arns))
	for i, a := range arns {
		out[i] = types.Certificate{CertificateArn: aws.String(a)}
	}
	return out
}

// Apply runs one action.
func (c *SDKCloud) Apply(ctx context.Context, d managed.Desired, a managed.Action) error {
	var err error
	switch a.Kind {
	case managed.CreateTargetGroup:
		path, port, interval, timeout, healthy, unhealthy := healthInput(d.HealthCheck)
		in := &elbv2.CreateTargetGroupInput{Name: aws.String(a.Name), Protocol: types.ProtocolEnum(managed.TargetProtocol(d.Type)),
			Port: aws.Int32(d.Port), TargetType: types.TargetTypeEnum(d.TargetType), HealthCheckPath: path, HealthCheckPort: port,
			HealthCheckIntervalSeconds: interval, HealthCheckTimeoutSeconds: timeout, HealthyThresholdCount: healthy, UnhealthyThresholdCount: unhealthy,
			Tags: elbTags(d.Tags, a.Set)}
		if d.VPCID != "" {
			in.VpcId = aws.String(d.VPCID)
		}
		_, err = c.ELB.CreateTargetGroup(ctx, in)
	case managed.CreateLoadBalancer:
		if len(d.Subnets) == 0 {
			return fmt.Errorf("creating load balancer %s: %w", a.Name, managed.ErrNoSubnets)
		}
		_, err = c.ELB.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String(a.Name), Type: types.LoadBalancerTypeEnum(d.Type),
			Scheme: types.LoadBalancerSchemeEnum(d.Scheme), Subnets: d.Subnets, Tags: elbTags(d.Tags, a.Set)})
	case managed.CreateListener:
		in := &elbv2.CreateListenerInput{LoadBalancerArn: aws.String(a.LoadBalancer), Port: aws.Int32(a.Listener.Port),
			Protocol: types.ProtocolEnum(a.Listener.Protocol), Certificates: certs(a.Certificates), Tags: elbTags(d.Tags, -1),
			DefaultActions: []types.Action{{Type: types.ActionTypeEnumForward, TargetGroupArn: aws.String(a.TargetGroup)}}}
		if a.Listener.SSLPolicy != "" {
			in.SslPolicy = aws.String(a.Listener.SSLPolicy)
		}
		_, err = c.ELB.CreateListener(ctx, in)
	case managed.ModifyListener:
		in := &elbv2.ModifyListenerInput{ListenerArn: aws.String(a.ARN), Port: aws.Int32(a.Listener.Port), Protocol: types.ProtocolEnum(a.Listener.Protocol),
			Certificates:   certs(a.Certificates),
			DefaultActions: []types.Action{{Type: types.ActionTypeEnumForward, TargetGroupArn: aws.String(a.TargetGroup)}}}
		if a.Listener.SSLPolicy != "" {
			in.SslPolicy = aws.String(a.Listener.SSLPolicy)
		}
		_, err = c.ELB.ModifyListener(ctx, in)
	case managed.AddListenerCertificates:
		_, err = c.ELB.AddListenerCertificates(ctx, &elbv2.AddListenerCertificatesInput{ListenerArn: aws.String(a.ARN), Certificates: certs(a.Certificates)})
	case managed.RemoveListenerCertificates:
		_, err = c.ELB.RemoveListenerCertificates(ctx, &elbv2.RemoveListenerCertificatesInput{ListenerArn: aws.String(a.ARN), Certificates: certs(a.Certificates)})
	case managed.ModifyTargetGroup:
		path, port, interval, timeout, healthy, unhealthy := healthInput(d.HealthCheck)
		_, err = c.ELB.ModifyTargetGroup(ctx, &elbv2.ModifyTargetGroupInput{TargetGroupArn: aws.String(a.ARN), HealthCheckPath: path, HealthCheckPort: port,
			HealthCheckIntervalSeconds: interval, HealthCheckTimeoutSeconds: timeout, HealthyThresholdCount: healthy, UnhealthyThresholdCount: unhealthy})
	case managed.ModifyTargetGroupAttributes:
		var attrs []types.TargetGroupAttribute
		for _, k := range slices.Sorted(maps.Keys(a.Attributes)) {
			attrs = append(attrs, types.TargetGroupAttribute{Key: aws.String(k), Value: aws.String(a.Attributes[k])})
		}
		_, err = c.ELB.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: aws.String(a.ARN), Attributes: attrs})
	case managed.DeleteListener:
		_, err = c.ELB.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: aws.String(a.ARN)})
		var nf *types.ListenerNotFoundException
		if errors.As(err, &nf) {
			err = nil // gone with its load balancer
		}
	case managed.DeleteLoadBalancer:
		_, err = c.ELB.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: aws.String(a.ARN)})
	case managed.DeleteTargetGroup:
		_, err = c.ELB.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: aws.String(a.ARN)})
	default:
		return fmt.Errorf("applying %s: unknown action", a.Kind)
	}
	if err != nil {
		return fmt.Errorf("applying %s: %w", a, err)
	}
	return nil
}
