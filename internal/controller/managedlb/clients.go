package managedlb

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/acm"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"sluice.dev/sluice/internal/awsretry"
	lbaws "sluice.dev/sluice/internal/lb/aws"
)

// Clouds returns a Clouds function for Options: one SDKCloud per region,
// built from the same settings as the aws target provider (endpoint
// override, credentials, HTTP client, retry policy), kept for reuse.
func Clouds(o lbaws.Options) func(ctx context.Context, region string) (Cloud, error) {
	o.MaxAttempts = cmp.Or(o.MaxAttempts, 8)
	o.RetryBase = cmp.Or(o.RetryBase, 200*time.Millisecond)
	o.MaxBackoff = cmp.Or(o.MaxBackoff, 20*time.Second)
	var mu sync.Mutex
	byRegion := map[string]Cloud{}
	return func(ctx context.Context, region string) (Cloud, error) {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := byRegion[region]; ok {
			return c, nil
		}
		var lo []func(*config.LoadOptions) error
		if region != "" {
			lo = append(lo, config.WithRegion(region))
		}
		if o.Credentials != nil {
			lo = append(lo, config.WithCredentialsProvider(o.Credentials))
		}
		if o.HTTPClient != nil {
			lo = append(lo, config.WithHTTPClient(o.HTTPClient))
		}
		lo = append(lo, config.WithRetryer(func() aws.Retryer {
			return awsretry.Retryer(awsretry.Policy{MaxAttempts: o.MaxAttempts, Base: o.RetryBase, Max: o.MaxBackoff})
		}))
		cfg, err := config.LoadDefaultConfig(ctx, lo...)
		if err != nil {
			return nil, fmt.Errorf("loading aws configuration: %w", err)
		}
		if cfg.Region == "" {
			return nil, fmt.Errorf("loading aws configuration: no region (set spec.provider.aws.region or AWS_REGION)")
		}
		e := elbv2.NewFromConfig(cfg, func(eo *elbv2.Options) {
			if o.Endpoint != "" {
				eo.BaseEndpoint = aws.String(o.Endpoint)
			}
		})
		a := acm.NewFromConfig(cfg, func(ao *acm.Options) {
			if o.Endpoint != "" {
				ao.BaseEndpoint = aws.String(o.Endpoint)
			}
		})
		x := ec2.NewFromConfig(cfg, func(xo *ec2.Options) {
			if o.Endpoint != "" {
				xo.BaseEndpoint = aws.String(o.Endpoint)
			}
		})
		c := NewSDKCloud(e, a, x)
		byRegion[region] = c
		return c, nil
	}
}
