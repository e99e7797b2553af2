package awsretry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/time/rate"
)

func TestRetryer(t *testing.T) {
	r := Retryer(Policy{MaxAttempts: 5, Base: 100 * time.Millisecond, Max: time.Second, Codes: []string{"PriorRequestNotComplete"}})
	if r.MaxAttempts() != 5 {
		t.Errorf("MaxAttempts = %d", r.MaxAttempts())
	}
	for _, code := range []string{"Throttling", "PriorRequestNotComplete"} {
		if !r.IsErrorRetryable(&smithy.GenericAPIError{Code: code}) {
			t.Errorf("%s not retried", code)
		}
	}
	if r.IsErrorRetryable(&smithy.GenericAPIError{Code: "AccessDenied"}) {
		t.Error("AccessDenied retried")
	}
	for attempt, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 30: time.Second} {
		for range 50 {
			d, err := r.RetryDelay(attempt, errors.New("x"))
			if err != nil || d <= 0 || d > ceiling+1 {
				t.Fatalf("RetryDelay(%d) = %v, %v; want in (0, %v]", attempt, d, err, ceiling)
			}
		}
	}
}

// TestLimitPastDeadline: a token that would come after the deadline is
// context.DeadlineExceeded, and the call is not made.
func TestLimitPastDeadline(t *testing.T) {
	bucket := rate.NewLimiter(rate.Every(time.Hour), 1)
	bucket.Allow() // drained for an hour
	s := middleware.NewStack("test", func() any { return nil })
	calls := 0
	if err := Limit("test", func(string) *rate.Limiter { return bucket }, func(string, error) { calls++ })(s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := middleware.DecorateHandler(middleware.HandlerFunc(func(context.Context, any) (any, middleware.Metadata, error) {
		t.Error("call made")
		return nil, middleware.Metadata{}, nil
	}), s)
	_, _, err := h.Handle(ctx, nil)
	if !errors.Is(err, context.DeadlineExceeded) || calls != 0 {
		t.Errorf("err %v, done calls %d; want DeadlineExceeded and none", err, calls)
	}
}
