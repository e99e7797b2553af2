package route53

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"golang.org/x/time/rate"

	"sluice.dev/sluice/internal/awsretry"
)

// newClient loads the SDK configuration (credentials from the standard
// chain unless o overrides them) and builds a Route53 client whose every
// attempt waits on one token bucket.
func newClient(ctx context.Context, o Options) (*route53.Client, error) {
	lo := []func(*config.LoadOptions) error{
		config.WithRegion(o.Region),
		config.WithRetryer(func() aws.Retryer { return newRetryer(o) }),
	}
	if o.Credentials != nil {
		lo = append(lo, config.WithCredentialsProvider(o.Credentials))
	}
	if o.HTTPClient != nil {
		lo = append(lo, config.WithHTTPClient(o.HTTPClient))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("loading aws configuration: %w", err)
	}
	bucket := rate.NewLimiter(rate.Limit(o.RequestsPerSecond), 1)
	limit := awsretry.Limit("SluiceRoute53RateLimit", func(string) *rate.Limiter { return bucket }, func(op string, err error) {
		if err != nil {
			o.Logger.Debug("route53 api attempt failed", "operation", op, "err", err)
		}
	})
	return route53.NewFromConfig(cfg, func(ro *route53.Options) {
		if o.Endpoint != "" {
			ro.BaseEndpoint = aws.String(o.Endpoint)
		}
		ro.APIOptions = append(ro.APIOptions, limit)
	}), nil
}

// newRetryer retries Throttling, PriorRequestNotComplete, 5xx and
// connection errors with full-jitter exponential backoff.
func newRetryer(o Options) aws.Retryer {
	return awsretry.Retryer(awsretry.Policy{
		MaxAttempts: o.MaxAttempts, Base: o.RetryBase, Max: o.MaxBackoff,
		Codes: []string{"Throttling", "PriorRequestNotComplete"},
	})
}
