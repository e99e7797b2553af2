package route53

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/time/rate"
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
	limit := middleware.FinalizeMiddlewareFunc("SluiceRoute53RateLimit", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		op := awsmiddleware.GetOperationName(ctx)
		if err := bucket.Wait(ctx); err != nil {
			if ctx.Err() == nil {
				// The token would come after the deadline: say so, so
				// that callers see context.DeadlineExceeded.
				err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
			}
			return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("waiting for the route53 rate limit (%s): %w", op, err)
		}
		out, md, err := next.HandleFinalize(ctx, in)
		if err != nil {
			o.Logger.Debug("route53 api attempt failed", "operation", op, "err", err)
		}
		return out, md, err
	})
	return route53.NewFromConfig(cfg, func(ro *route53.Options) {
		if o.Endpoint != "" {
			ro.BaseEndpoint = aws.String(o.Endpoint)
		}
		// After the retry middleware, so that every attempt waits.
		ro.APIOptions = append(ro.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(limit, middleware.After)
		})
	}), nil
}

// newRetryer retries Throttling, PriorRequestNotComplete, 5xx and
// connection errors with full-jitter exponential backoff. The SDK's retry
// token bucket is off: the provider already limits its rate, and a drained
// bucket would fail calls under throttling instead of slowing them down.
func newRetryer(o Options) aws.Retryer {
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = o.MaxAttempts
		so.MaxBackoff = o.MaxBackoff
		so.RateLimiter = ratelimit.None
		so.Retryables = append(so.Retryables, retry.RetryableErrorCode{Codes: map[string]struct{}{
			"Throttling": {}, "PriorRequestNotComplete": {},
		}})
		so.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			d := o.RetryBase << min(max(attempt-1, 0), 20)
			if d <= 0 || d > o.MaxBackoff {
				d = o.MaxBackoff
			}
			return rand.N(d) + 1, nil
		})
	})
}
