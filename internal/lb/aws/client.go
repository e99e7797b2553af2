package aws

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"sluice.dev/sluice/internal/awsretry"
	"sluice.dev/sluice/internal/lb"
)

// newClient loads the SDK configuration (region and credentials from the
// standard chain unless o overrides them) and builds an ELBv2 client with
// sluice's retry policy and client-side rate limits.
func newClient(ctx context.Context, o Options, m *metrics) (*elbv2.Client, error) {
	var lo []func(*config.LoadOptions) error
	if o.Region != "" {
		lo = append(lo, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		lo = append(lo, config.WithCredentialsProvider(o.Credentials))
	}
	if o.HTTPClient != nil {
		lo = append(lo, config.WithHTTPClient(o.HTTPClient))
	}
	lo = append(lo, config.WithRetryer(func() aws.Retryer { return newRetryer(o) }))
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("loading aws configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("loading aws configuration: no region (set spec.provider.aws.region or AWS_REGION): %w", lb.ErrInvalid)
	}
	write := rate.NewLimiter(rate.Limit(o.WriteRate), max(1, int(o.WriteRate)))
	read := rate.NewLimiter(rate.Limit(o.ReadRate), max(1, int(o.ReadRate)))
	pick := func(op string) *rate.Limiter {
		if op == "RegisterTargets" || op == "DeregisterTargets" {
			return write
		}
		return read
	}
	limit := awsretry.Limit("SluiceRateLimit", pick, func(op string, err error) {
		m.requests.WithLabelValues(op, outcome(err)).Inc()
		if err != nil {
			o.Logger.Debug("aws api attempt failed", "operation", op, "err", err)
		}
	})
	return elbv2.NewFromConfig(cfg, func(eo *elbv2.Options) {
		if o.Endpoint != "" {
			eo.BaseEndpoint = aws.String(o.Endpoint)
		}
		// After the retry middleware, so that every attempt is limited
		// and counted.
		eo.APIOptions = append(eo.APIOptions, limit)
	}), nil
}

// newRetryer retries throttling, 5xx and connection errors with
// full-jitter exponential backoff (see awsretry).
func newRetryer(o Options) aws.Retryer {
	return awsretry.Retryer(awsretry.Policy{MaxAttempts: o.MaxAttempts, Base: o.RetryBase, Max: o.MaxBackoff})
}

// outcome labels a request for the metrics: "ok", the AWS error code, or
// "error" (no answer).
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return "error"
}

// classify wraps an SDK error with the lb sentinel it means.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var (
		notFound *types.TargetGroupNotFoundException
		invalid  *types.InvalidTargetException
		ae       smithy.APIError
		re       *smithyhttp.ResponseError
		ne       net.Error
	)
	switch {
	case errors.As(err, &notFound):
		return fmt.Errorf("%w: %w", lb.ErrGroupNotFound, err)
	case errors.As(err, &invalid):
		return fmt.Errorf("%w: %w", lb.ErrInvalid, err)
	case errors.As(err, &ae) && ae.ErrorCode() == "ValidationError":
		return fmt.Errorf("%w: %w", lb.ErrInvalid, err)
	case errors.As(err, &ae) && (retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary):
		return fmt.Errorf("%w: %w", lb.ErrUnreachable, err)
	case errors.As(err, &re) && re.HTTPStatusCode() >= 500:
		return fmt.Errorf("%w: %w", lb.ErrUnreachable, err)
	case errors.As(err, &ae):
		return err // e.g. AccessDenied: retrying will not help
	case errors.As(err, &ne), errors.As(err, &re):
		return fmt.Errorf("%w: %w", lb.ErrUnreachable, err)
	default:
		return fmt.Errorf("%w: %w", lb.ErrUnreachable, err)
	}
}

// isInvalidTarget reports an InvalidTarget answer (e.g. a terminated
// instance in a deregistration).
func isInvalidTarget(err error) bool {
	var invalid *types.InvalidTargetException
	return errors.As(err, &invalid)
}

// metrics counts API requests.
type metrics struct {
	requests *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_aws_api_requests_total",
		Help: "ELBv2 API requests (each retry attempt counts) by operation and outcome (ok, an AWS error code, or error).",
	}, []string{"operation", "outcome"})}
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m.requests); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("registering aws metrics: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("registering aws metrics: %w", err)
		}
		m.requests = existing // several providers (regions) share one counter
	}
	return m, nil
}
