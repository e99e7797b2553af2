// Package aws is the lb.Provider for Elastic Load Balancing v2 (Network and
// Application Load Balancers): a group is one target group, given by ARN,
// and sluice's targets are its IP targets (pod IP and port) or instance
// targets (EC2 instance ID and port). It sits at the apply end of the
// controller's target flow (pods → targets.Desired → targets.Diff →
// Provider → ELBv2 API) and is built on aws-sdk-go-v2, with the standard
// credential chain (IRSA web identity, environment, shared config,
// instance role) and region settings.
//
// AWS drives target health itself: a registered target is initial until it
// passes the group's health checks, and a deregistered one is draining for
// the group's deregistration delay, then no longer listed. So, unlike the
// HAProxy provider, Deregister only starts the drain (repeated calls are
// answered from the cache without calling AWS), and Targets reports what
// DescribeTargetHealth says.
//
// # API calls
//
// Targets answers from a per-group cache while it is fresh: for FastTTL
// (1s) while any target is initial or draining, SlowTTL (10s) otherwise;
// one DescribeTargetHealth per group and refresh, never a partial list, and
// an error (never an empty list) when the call fails. RegisterTargets and
// DeregisterTargets are batched (BatchSize) and limited to WriteRate calls
// a second, Describe calls to ReadRate; throttling, 5xx and connection
// errors are retried with full-jitter exponential backoff.
//
// # Ownership
//
// AWS has no per-target tags, so ownership is decided per group:
//   - a target group tagged sluice.dev/owned=true belongs to sluice
//     entirely: every target in it is listed and may be deregistered (the
//     recommended setup, and the only one that survives a controller
//     restart without leaking targets);
//   - otherwise sluice lists and touches only the targets this process
//     registered (or was told about with Adopt); targets registered by
//     anyone else are invisible to the controller and never deregistered.
//     After a restart, targets registered by the previous process are no
//     longer known; the controller registers the pods it still wants again
//     (a no-op at AWS) and so owns them again, but targets of pods deleted
//     meanwhile stay registered until removed by hand.
package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/sluice/internal/lb"
)

// Tags sluice reads on target groups.
const (
	// OwnedTag=true gives sluice every target in the group.
	OwnedTag = "sluice.dev/owned"
	// ClusterTag and FrontendTag select groups in Discover.
	ClusterTag  = "sluice.dev/cluster"
	FrontendTag = "sluice.dev/frontend"
)

// Options configures a Provider.
type Options struct {
	// Region of the target groups. Empty: from the environment
	// (AWS_REGION, AWS_DEFAULT_REGION, shared config); one is required.
	Region string
	// Endpoint overrides the ELBv2 endpoint URL (the SDK's BaseEndpoint),
	// e.g. an awsfake's URL in tests. Empty: AWS's regional endpoint, or
	// AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2 if set.
	Endpoint string
	// Credentials overrides the credential chain (tests use
	// credentials.NewStaticCredentialsProvider). Nil: the standard chain.
	Credentials aws.CredentialsProvider
	// HTTPClient sends the API requests. Nil: the SDK's default client.
	HTTPClient aws.HTTPClient
	// WriteRate bounds RegisterTargets and DeregisterTargets calls (each
	// attempt counts) per second. Default 4.
	WriteRate float64
	// ReadRate bounds Describe* calls per second. Default 10.
	ReadRate float64
	// MaxAttempts is the number of attempts per call, retries included.
	// Default 8.
	MaxAttempts int
	// RetryBase is the backoff before the first retry; it doubles per
	// attempt up to MaxBackoff, each delay drawn uniformly below it (full
	// jitter). Defaults 200ms and 20s.
	RetryBase, MaxBackoff time.Duration
	// BatchSize is the number of targets per Register/DeregisterTargets
	// call. Default 200.
	BatchSize int
	// FastTTL is how long a group's listing is reused while any target is
	// initial or draining; SlowTTL otherwise. Defaults 1s and 10s.
	FastTTL, SlowTTL time.Duration
	// GroupTTL is how long a group's type and tags are reused. Default 5m.
	GroupTTL time.Duration
	// LoadBalancerTTL is how long LoadBalancers reuses which load
	// balancers front a group, and their names. Default 1m.
	LoadBalancerTTL time.Duration
	// OwnGrace keeps a registered target owned for this long even if
	// listings do not show it (AWS's listings are eventually consistent).
	// Default 2m.
	OwnGrace time.Duration
	// DrainMargin is the time Check adds to the deregistration delay for
	// the controller to notice the deleted pod, deregister it, see it
	// gone, and for the proxy to close. Default 15s.
	DrainMargin time.Duration
	// Registerer receives the metrics. Nil: not registered.
	Registerer prometheus.Registerer
	// Logger: nil discards.
	Logger *slog.Logger
	// Now is the clock of the caches. Nil: time.Now.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.WriteRate <= 0 {
		o.WriteRate = 4
	}
	if o.ReadRate <= 0 {
		o.ReadRate = 10
	}
	o.MaxAttempts = cmp.Or(o.MaxAttempts, 8)
	o.RetryBase = cmp.Or(o.RetryBase, 200*time.Millisecond)
	o.MaxBackoff = cmp.Or(o.MaxBackoff, 20*time.Second)
	o.BatchSize = cmp.Or(o.BatchSize, 200)
	o.FastTTL = cmp.Or(o.FastTTL, time.Second)
	o.SlowTTL = cmp.Or(o.SlowTTL, 10*time.Second)
	o.GroupTTL = cmp.Or(o.GroupTTL, 5*time.Minute)
	o.LoadBalancerTTL = cmp.Or(o.LoadBalancerTTL, time.Minute)
	o.OwnGrace = cmp.Or(o.OwnGrace, 2*time.Minute)
	o.DrainMargin = cmp.Or(o.DrainMargin, 15*time.Second)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Provider implements lb.Provider over the ELBv2 API. It is safe for
// concurrent use; calls for one group are serialized.
type Provider struct {
	opts    Options
	client  *elbv2.Client
	log     *slog.Logger
	metrics *metrics

	mu     sync.Mutex
	groups map[string]*group

	lbs lbCache // LoadBalancers' cache
}

var _ lb.Provider = (*Provider)(nil)

// New loads the AWS configuration (no API call is made) and returns a
// Provider for one region.
func New(ctx context.Context, o Options) (*Provider, error) {
	o.defaults()
	if o.MaxAttempts < 1 || o.BatchSize < 1 || o.BatchSize > 1000 || o.RetryBase <= 0 || o.MaxBackoff < o.RetryBase {
		return nil, fmt.Errorf("creating aws provider: max attempts %d, batch size %d, retry base %v, max backoff %v out of range: %w",
			o.MaxAttempts, o.BatchSize, o.RetryBase, o.MaxBackoff, lb.ErrInvalid)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("creating aws provider: %w", err)
	}
	c, err := newClient(ctx, o, m)
	if err != nil {
		return nil, fmt.Errorf("creating aws provider: %w", err)
	}
	return &Provider{opts: o, client: c, log: o.Logger, metrics: m, groups: map[string]*group{}}, nil
}

// Region is the region the provider talks to.
func (p *Provider) Region() string { return p.client.Options().Region }

// group returns the state of a target group, creating it.
func (p *Provider) group(arn string) *group {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.groups[arn]
	if !ok {
		g = &group{arn: arn, mine: map[key]*owned{}}
		p.groups[arn] = g
	}
	return g
}

// Targets implements lb.Provider.
func (p *Provider) Targets(ctx context.Context, arn string) ([]lb.Status, error) {
	if err := validARN(arn); err != nil {
		return nil, fmt.Errorf("listing targets: %w", err)
	}
	g := p.group(arn)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := p.describe(ctx, g); err != nil {
		return nil, fmt.Errorf("listing targets of %s: %w", arn, err)
	}
	if err := p.refresh(ctx, g); err != nil {
		return nil, fmt.Errorf("listing targets of %s: %w", arn, err)
	}
	return g.statuses(), nil
}

// Register implements lb.Provider. Targets are owned from the moment they
// are asked for, so that a call that fails halfway (and may have reached
// AWS) never leaves a target sluice would not deregister.
func (p *Provider) Register(ctx context.Context, arn string, ts []lb.Target) error {
	if err := validARN(arn); err != nil {
		return fmt.Errorf("registering targets: %w", err)
	}
	g := p.group(arn)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := p.describe(ctx, g); err != nil {
		return fmt.Errorf("registering targets in %s: %w", arn, err)
	}
	now := p.opts.Now()
	keys, byKey, errs := g.convert(ts)
	var todo []key
	for _, k := range keys {
		o := g.mine[k]
		if o == nil {
			o = &owned{}
			g.mine[k] = o
		}
		o.target, o.registeredAt = byKey[k], now
		if r, ok := g.row(k); ok && r.active() {
			continue // registered and not draining: nothing to do
		}
		todo = append(todo, k)
	}
	err := p.batches(ctx, todo, func(ctx context.Context, batch []key) error {
		_, err := p.client.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{
			TargetGroupArn: aws.String(arn),
			Targets:        g.descriptions(batch, byKey),
		})
		if err == nil {
			g.setRows(batch, types.TargetHealthStateEnumInitial, "Elb.RegistrationInProgress", byKey)
		}
		return err
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("registering targets in %s: %w", arn, err))
	}
	if len(todo) > 0 {
		p.log.Debug("registered aws targets", "targetGroup", arn, "count", len(todo), "err", err)
	}
	return errors.Join(errs...)
}

// Deregister implements lb.Provider. Only owned targets are deregistered;
// one already draining, or no longer listed, is not sent again.
func (p *Provider) Deregister(ctx context.Context, arn string, ts []lb.Target) error {
	if err := validARN(arn); err != nil {
		return fmt.Errorf("deregistering targets: %w", err)
	}
	g := p.group(arn)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := p.describe(ctx, g); err != nil {
		return fmt.Errorf("deregistering targets from %s: %w", arn, err)
	}
	keys, byKey, errs := g.convert(ts)
	var todo []key
	for _, k := range keys {
		if !g.owns(k) {
			continue // not ours: never touched
		}
		if g.listed {
			if r, ok := g.row(k); !ok || !r.active() {
				continue // draining, unused or gone already
			}
		}
		todo = append(todo, k)
	}
	err := p.batches(ctx, todo, func(ctx context.Context, batch []key) error {
		err := p.deregister(ctx, arn, g.descriptions(batch, byKey))
		if err != nil && isInvalidTarget(err) && len(batch) > 1 {
			// One bad target (e.g. a terminated instance) fails the
			// batch: retry one by one so that the others go.
			var errs []error
			for _, k := range batch {
				errs = append(errs, p.deregister(ctx, arn, g.descriptions([]key{k}, byKey)))
			}
			err = errors.Join(errs...)
		}
		if err == nil {
			g.setRows(batch, types.TargetHealthStateEnumDraining, "Target.DeregistrationInProgress", byKey)
		}
		return err
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("deregistering targets from %s: %w", arn, err))
	}
	if len(todo) > 0 {
		p.log.Debug("deregistered aws targets", "targetGroup", arn, "count", len(todo), "err", err)
	}
	return errors.Join(errs...)
}

// deregister sends one DeregisterTargets; InvalidTarget for a single
// target means it is gone already (terminated instance).
func (p *Provider) deregister(ctx context.Context, arn string, descs []types.TargetDescription) error {
	_, err := p.client.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{
		TargetGroupArn: aws.String(arn),
		Targets:        descs,
	})
	if err != nil && isInvalidTarget(err) && len(descs) == 1 {
		p.log.Info("aws target no longer valid, treating as deregistered", "targetGroup", arn,
			"target", aws.ToString(descs[0].Id), "err", err)
		return nil
	}
	return err
}

// batches runs fn on chunks of keys. It stops at an error that dooms the
// rest (group gone, API unreachable, context over); other errors are
// joined and the remaining chunks still run.
func (p *Provider) batches(ctx context.Context, keys []key, fn func(context.Context, []key) error) error {
	var errs []error
	for batch := range slices.Chunk(keys, p.opts.BatchSize) {
		err := classify(fn(ctx, batch))
		if err == nil {
			continue
		}
		errs = append(errs, err)
		if errors.Is(err, lb.ErrGroupNotFound) || errors.Is(err, lb.ErrUnreachable) || ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}
