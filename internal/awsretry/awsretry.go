// Package awsretry is the retry and rate policy that sluice's AWS API
// clients share (ELBv2 in lb/aws, Route53 in dns/route53): it sits between
// each provider and aws-sdk-go-v2, under every API call they make.
//
// Throttling, 5xx and connection errors (and any extra error codes) are
// retried with full-jitter exponential backoff, and every attempt, retries
// included, first waits on a client-side token bucket. The SDK's own retry
// token bucket is off: the providers already limit their rate, and a
// drained bucket would fail calls under throttling instead of slowing them
// down.
package awsretry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/time/rate"
)

// Policy is how calls are retried.
type Policy struct {
	// MaxAttempts per call, retries included.
	MaxAttempts int
	// Base is the backoff before the first retry; it doubles per attempt
	// up to Max, each delay drawn uniformly below it (full jitter).
	Base, Max time.Duration
	// Codes are AWS error codes retried besides the SDK's throttling and
	// transient ones.
	Codes []string
}

// Retryer builds the SDK retryer of a policy.
func Retryer(p Policy) aws.Retryer {
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = p.MaxAttempts
		so.MaxBackoff = p.Max
		so.RateLimiter = ratelimit.None
		if len(p.Codes) > 0 {
			codes := map[string]struct{}{}
			for _, c := range p.Codes {
				codes[c] = struct{}{}
			}
			so.Retryables = append(so.Retryables, retry.RetryableErrorCode{Codes: codes})
		}
		so.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			d := p.Base << min(max(attempt-1, 0), 20)
			if d <= 0 || d > p.Max {
				d = p.Max
			}
			return rand.N(d) + 1, nil
		})
	})
}

// Limit returns an SDK API option that makes every attempt of a call wait
// on the bucket pick chooses for the operation, then calls done with the
// attempt's outcome (for metrics and logs; nil: nothing). It runs after
// the retry middleware, so that retries wait too. A wait that would end
// past the context's deadline fails with context.DeadlineExceeded.
func Limit(name string, pick func(op string) *rate.Limiter, done func(op string, err error)) func(*middleware.Stack) error {
	m := middleware.FinalizeMiddlewareFunc(name, func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		op := awsmiddleware.GetOperationName(ctx)
		if err := pick(op).Wait(ctx); err != nil {
			if ctx.Err() == nil {
				// The token would come after the deadline.
				err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
			}
			return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("waiting for the %s rate limit: %w", op, err)
		}
		out, md, err := next.HandleFinalize(ctx, in)
		if done != nil {
			done(op, err)
		}
		return out, md, err
	})
	return func(s *middleware.Stack) error { return s.Finalize.Add(m, middleware.After) }
}
