// Package lbcache turns a LoadBalancerBinding's spec.provider into an
// lb.Provider and the groups to use, caching one provider per load-balancer
// API (an HAProxy runtime API address; an AWS region and endpoint) so that
// bindings sharing one share its client, caches and rate limits. It sits at
// the apply end of the binding reconciler:
//
//	binding spec ─► Cache.For ─► lb.Provider (haproxy, aws) + groups ─► Targets/Register/Deregister per group
//
// An HAProxy binding has one group, its backend. An AWS binding has one
// group per target group: the ARNs it lists or, when it lists none, the
// target groups tagged sluice.dev/cluster=<Options.AWSCluster> and
// sluice.dev/frontend=<binding name>.
package lbcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/aws"
	"sluice.dev/sluice/internal/lb/haproxy"
)

// ErrNotSupported: the binding names a provider this build cannot drive.
var ErrNotSupported = errors.New("load-balancer provider not supported")

// Options configures a Cache.
type Options struct {
	// HAProxy is the template for HAProxy providers; Address is filled in
	// from each binding's runtimeAPI. Zero: the haproxy package defaults.
	HAProxy haproxy.Options
	// AWS is the template for AWS providers. Region is filled in per
	// binding: spec.provider.aws.region, else the region of its first
	// target group ARN, else the environment's (AWS_REGION). Endpoint,
	// when set, is used for every region (tests, the awsfake). Zero: the
	// aws package defaults and the standard credential chain.
	AWS aws.Options
	// AWSCluster is the cluster name that tag discovery matches
	// (sluice.dev/cluster) for AWS bindings that list no target group.
	// Empty: such bindings are invalid.
	AWSCluster string
	// DiscoveryTTL is how long discovered target groups are reused before
	// the tags are read again. Default 1m.
	DiscoveryTTL time.Duration
	// Now is the clock of the discovery cache. Nil: time.Now.
	Now func() time.Time
	// Logger hears about HAProxy watch errors. Nil: discarded.
	Logger *slog.Logger
}

// Cache builds providers and keeps them by configuration. Safe for
// concurrent use.
type Cache struct {
	opts Options
	mu   sync.Mutex
	byID map[string]lb.Provider
	aws  map[string]*aws.Provider
	// discovered target groups by region, endpoint, cluster and frontend
	discovered map[string]discovery
	// watch is the context of Start: HAProxy providers created while it
	// runs watch for a reload or restart (haproxy.Provider.Watch). Nil
	// before Start.
	watch   context.Context
	watched []*haproxy.Provider
}

type discovery struct {
	arns []string
	at   time.Time
}

// New returns an empty Cache.
func New(o Options) *Cache {
	o.DiscoveryTTL = cmp.Or(o.DiscoveryTTL, time.Minute)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Cache{opts: o, byID: map[string]lb.Provider{}, aws: map[string]*aws.Provider{}, discovered: map[string]discovery{}}
}

// For returns the provider and groups for a binding. Errors that a retry
// cannot fix (a malformed address or ARN, no target group listed and no
// cluster to discover by) wrap lb.ErrInvalid; discovery errors are the
// provider's (lb.ErrUnreachable, ...), and finding no tagged target group
// is lb.ErrGroupNotFound.
func (c *Cache) For(ctx context.Context, b *v1alpha1.LoadBalancerBinding) (lb.Provider, []string, error) {
	spec := b.Spec.Provider
	switch {
	case spec.HAProxy != nil && spec.AWS == nil:
		p, err := c.haproxy(spec.HAProxy.RuntimeAPI, spec.HAProxy.ProxyProtocol)
		if err != nil {
			return nil, nil, err
		}
		return p, []string{spec.HAProxy.Backend}, nil
	case spec.AWS != nil && spec.HAProxy == nil:
		return c.forAWS(ctx, b.Name, spec.AWS)
	default:
		return nil, nil, fmt.Errorf("choosing a provider: exactly one of haproxy or aws must be set: %w", lb.ErrInvalid)
	}
}

// haproxy returns the provider of a runtime API address; with
// proxyProtocol, one of its own that adds servers with send-proxy-v2 (a
// provider's "add server" arguments are its own).
func (c *Cache) haproxy(runtimeAPI string, proxyProtocol bool) (lb.Provider, error) {
	addr, err := RuntimeAddress(runtimeAPI)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := "haproxy " + addr
	if proxyProtocol {
		id += " send-proxy-v2"
	}
	if p, ok := c.byID[id]; ok {
		return p, nil
	}
	o := c.opts.HAProxy
	o.Address = addr
	if proxyProtocol {
		o.ServerArgs = append(slices.Clone(o.ServerArgs), "send-proxy-v2")
	}
	log := c.opts.Logger
	o.OnRestore = func(pid, restored int, took time.Duration) {
		log.Info("new haproxy process: servers restored", "runtimeAPI", addr, "pid", pid, "restored", restored, "took", took)
	}
	p, err := haproxy.New(o)
	if err != nil {
		return nil, fmt.Errorf("creating provider for %s: %w", runtimeAPI, err)
	}
	c.byID[id] = p
	c.watched = append(c.watched, p)
	if c.watch != nil {
		go p.Watch(c.watch, c.watchError(addr))
	}
	return p, nil
}

// Start makes every HAProxy provider, existing and future, watch for a
// reload or restart of its HAProxy until ctx ends, so that the servers a
// new process forgot are restored within haproxy.Options.WatchInterval.
// It blocks until ctx ends (a controller-runtime Runnable: with leader
// election, only the leader watches and restores).
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	c.watch = ctx
	for _, p := range c.watched {
		go p.Watch(ctx, c.watchError(p.Address()))
	}
	c.mu.Unlock()
	<-ctx.Done()
	c.mu.Lock()
	c.watch = nil
	c.mu.Unlock()
	return nil
}

func (c *Cache) watchError(addr string) func(error) {
	return func(err error) { c.opts.Logger.Debug("haproxy watch", "runtimeAPI", addr, "err", err) }
}

// forAWS resolves an AWS binding: region, provider, target groups.
func (c *Cache) forAWS(ctx context.Context, frontend string, spec *v1alpha1.AWSProvider) (lb.Provider, []string, error) {
	region, arns, err := Region(spec)
	if err != nil {
		return nil, nil, err
	}
	p, err := c.awsProvider(ctx, region)
	if err != nil {
		return nil, nil, err
	}
	if len(arns) == 0 {
		arns, err = c.discover(ctx, p, region, frontend)
		if err != nil {
			return nil, nil, err
		}
	}
	return p, arns, nil
}

// Region returns the region an AWS binding's target groups live in and
// its ARNs without duplicates: spec.region if set, else the region of the
// first ARN ("" when there is neither: the environment's). Every ARN must
// be well-formed and in that region.
func Region(spec *v1alpha1.AWSProvider) (string, []string, error) {
	region := spec.Region
	arns := make([]string, 0, len(spec.TargetGroupARNs))
	seen := map[string]bool{}
	for _, arn := range spec.TargetGroupARNs {
		r, err := aws.RegionOf(arn)
		if err != nil {
			return "", nil, fmt.Errorf("using aws target groups: %w", err)
		}
		switch {
		case region == "":
			region = r
		case r != region:
			return "", nil, fmt.Errorf("using aws target groups: %s is in region %s, not %s (one binding, one region): %w", arn, r, region, lb.ErrInvalid)
		}
		if !seen[arn] {
			seen[arn] = true
			arns = append(arns, arn)
		}
	}
	return region, arns, nil
}

// awsProvider returns the provider for region (and the configured
// endpoint), creating it.
func (c *Cache) awsProvider(ctx context.Context, region string) (*aws.Provider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := "aws " + region + " " + c.opts.AWS.Endpoint
	if p, ok := c.aws[id]; ok {
		return p, nil
	}
	o := c.opts.AWS
	o.Region = region
	p, err := aws.New(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("using aws target groups: %w", err)
	}
	c.aws[id] = p
	return p, nil
}

// discover finds a frontend's target groups by tag, reusing an answer for
// DiscoveryTTL. Failures and empty answers are not kept.
func (c *Cache) discover(ctx context.Context, p *aws.Provider, region, frontend string) ([]string, error) {
	if c.opts.AWSCluster == "" {
		return nil, fmt.Errorf("using aws target groups: the binding lists no targetGroupARNs and the controller has no --aws-cluster to discover them by: %w", lb.ErrInvalid)
	}
	id := strings.Join([]string{region, c.opts.AWS.Endpoint, c.opts.AWSCluster, frontend}, "\x00")
	now := c.opts.Now()
	c.mu.Lock()
	d, ok := c.discovered[id]
	c.mu.Unlock()
	if ok && now.Sub(d.at) < c.opts.DiscoveryTTL {
		return d.arns, nil
	}
	arns, err := p.Discover(ctx, c.opts.AWSCluster, frontend)
	if err != nil {
		return nil, err
	}
	if len(arns) == 0 {
		return nil, fmt.Errorf("discovering target groups: none in %s tagged %s=%s and %s=%s: %w",
			p.Region(), aws.ClusterTag, c.opts.AWSCluster, aws.FrontendTag, frontend, lb.ErrGroupNotFound)
	}
	c.mu.Lock()
	c.discovered[id] = discovery{arns: arns, at: now}
	c.mu.Unlock()
	return arns, nil
}

// RuntimeAddress converts a runtimeAPI URL ("unix:///path", "tcp://host:port")
// into a haproxy.Options.Address.
func RuntimeAddress(u string) (string, error) {
	switch {
	case strings.HasPrefix(u, "unix://") && len(u) > len("unix://"):
		return "unix:" + strings.TrimPrefix(u, "unix://"), nil
	case strings.HasPrefix(u, "tcp://") && len(u) > len("tcp://") && !strings.Contains(u[len("tcp://"):], "/"):
		return strings.TrimPrefix(u, "tcp://"), nil
	default:
		return "", fmt.Errorf("parsing runtime API address %q: want unix:///path or tcp://host:port: %w", u, lb.ErrInvalid)
	}
}

// GroupKeys names the load-balancer groups a provider spec drives, so that
// two bindings driving one group can be told apart: "haproxy ADDRESS
// BACKEND" for HAProxy, "aws ARN" for each listed target group. Bindings
// whose AWS groups are discovered by tag have no keys here (their groups
// are only known at run time: AWSGroupKeys names those For found), nor do
// invalid specs.
func GroupKeys(spec v1alpha1.ProviderSpec) []string {
	var keys []string
	if h := spec.HAProxy; h != nil {
		if addr, err := RuntimeAddress(h.RuntimeAPI); err == nil {
			keys = append(keys, "haproxy "+addr+" "+h.Backend)
		}
	}
	if a := spec.AWS; a != nil {
		keys = append(keys, AWSGroupKeys(a.TargetGroupARNs)...)
	}
	return keys
}

// AWSGroupKeys names AWS target groups (ARNs, e.g. discovered by For) as
// GroupKeys does.
func AWSGroupKeys(arns []string) []string {
	keys := make([]string, 0, len(arns))
	for _, arn := range arns {
		keys = append(keys, "aws "+arn)
	}
	return keys
}
