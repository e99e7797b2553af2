package aws

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"sluice.dev/sluice/internal/lb"
)

// key identifies a registration as AWS does: target ID (an IP or an
// instance ID) and port.
type key struct {
	id   string
	port uint16
}

// owned is a target this process registered (or adopted).
type owned struct {
	target       lb.Target // as the controller gave it (address, zone)
	registeredAt time.Time
}

// row is one target as DescribeTargetHealth listed it (or as a successful
// write predicts it).
type row struct {
	key    key
	zone   string
	state  types.TargetHealthStateEnum
	reason string
}

// active: registered and not leaving (the target counts as in service).
func (r row) active() bool {
	switch r.state {
	case types.TargetHealthStateEnumDraining, types.TargetHealthStateEnumUnused:
		return false
	}
	return true
}

// group is the provider's view of one target group. mu serializes the
// calls for the group, so that concurrent Targets calls share one refresh.
type group struct {
	arn string
	mu  sync.Mutex

	// From DescribeTargetGroups and DescribeTags, refreshed every GroupTTL.
	described   time.Time
	instance    bool // target type instance (else ip)
	ownedWholly bool // tagged sluice.dev/owned=true
	// healthCheckPort is the group's HealthCheckPort: "traffic-port" or
	// a number.
	healthCheckPort string

	listed   bool // rows hold a listing
	listedAt time.Time
	rows     []row // sorted by key
	mine     map[key]*owned
}

// validARN checks the shape of a target group ARN before any call.
func validARN(arn string) error {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "elasticloadbalancing" ||
		!strings.HasPrefix(parts[5], "targetgroup/") || strings.ContainsAny(arn, " \t\r\n") || len(arn) > 512 {
		return fmt.Errorf("target group ARN %q: want arn:PARTITION:elasticloadbalancing:REGION:ACCOUNT:targetgroup/NAME/ID: %w", arn, lb.ErrInvalid)
	}
	return nil
}

// describe loads the group's type and tags unless known for GroupTTL.
// Caller holds g.mu.
func (p *Provider) describe(ctx context.Context, g *group) error {
	now := p.opts.Now()
	if !g.described.IsZero() && now.Sub(g.described) < p.opts.GroupTTL {
		return nil
	}
	out, err := p.client.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: []string{g.arn}})
	if err == nil && len(out.TargetGroups) != 1 {
		err = &types.TargetGroupNotFoundException{Message: aws.String("target group not in the answer")}
	}
	if err != nil {
		return p.forget(g, fmt.Errorf("describing target group: %w", classify(err)))
	}
	tg := out.TargetGroups[0]
	switch tg.TargetType {
	case types.TargetTypeEnumIp, types.TargetTypeEnumInstance:
	default:
		return fmt.Errorf("target group has target type %q, want ip or instance: %w", tg.TargetType, lb.ErrInvalid)
	}
	tags, err := p.client.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{g.arn}})
	if err != nil {
		return p.forget(g, fmt.Errorf("reading target group tags: %w", classify(err)))
	}
	g.instance = tg.TargetType == types.TargetTypeEnumInstance
	g.healthCheckPort = aws.ToString(tg.HealthCheckPort)
	g.ownedWholly = false
	for _, d := range tags.TagDescriptions {
		for _, t := range d.Tags {
			if aws.ToString(t.Key) == OwnedTag && strings.EqualFold(aws.ToString(t.Value), "true") {
				g.ownedWholly = true
			}
		}
	}
	g.described = now
	return nil
}

// forget drops what is known of a group that no longer exists (its
// ownership records included: a new group with the same name gets a new
// ARN). Caller holds g.mu.
func (p *Provider) forget(g *group, err error) error {
	if errors.Is(err, lb.ErrGroupNotFound) {
		g.described, g.listed, g.rows = time.Time{}, false, nil
		clear(g.mine)
	}
	return err
}

// ttl is how long the current listing may be reused.
func (p *Provider) ttl(g *group) time.Duration {
	for _, r := range g.rows {
		switch r.state {
		case types.TargetHealthStateEnumInitial, types.TargetHealthStateEnumDraining,
			types.TargetHealthStateEnumUnhealthyDraining:
			return p.opts.FastTTL
		}
	}
	return p.opts.SlowTTL
}

// refresh lists the group's targets unless the listing is fresh. On error
// the listing is dropped, never kept half. Caller holds g.mu.
func (p *Provider) refresh(ctx context.Context, g *group) error {
	now := p.opts.Now()
	if g.listed && now.Sub(g.listedAt) < p.ttl(g) {
		return nil
	}
	out, err := p.client.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(g.arn)})
	if err != nil {
		g.listed, g.rows = false, nil
		return p.forget(g, fmt.Errorf("describing target health: %w", classify(err)))
	}
	rows := make([]row, 0, len(out.TargetHealthDescriptions))
	for _, d := range out.TargetHealthDescriptions {
		if d.Target == nil || d.Target.Id == nil || d.Target.Port == nil {
			continue
		}
		port := aws.ToInt32(d.Target.Port)
		if port < 1 || port > 65535 {
			continue
		}
		r := row{key: key{id: aws.ToString(d.Target.Id), port: uint16(port)}, zone: aws.ToString(d.Target.AvailabilityZone)}
		if h := d.TargetHealth; h != nil {
			r.state, r.reason = h.State, string(h.Reason)
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b row) int { return compareKeys(a.key, b.key) })
	rows = slices.CompactFunc(rows, func(a, b row) bool { return a.key == b.key })
	g.rows, g.listed, g.listedAt = rows, true, now
	// Forget targets that have left and that no recent Register protects
	// (listings lag registrations).
	for k, o := range g.mine {
		if _, ok := g.row(k); !ok && now.Sub(o.registeredAt) >= p.opts.OwnGrace {
			delete(g.mine, k)
		}
	}
	return nil
}

func compareKeys(a, b key) int {
	if c := strings.Compare(a.id, b.id); c != 0 {
		return c
	}
	return int(a.port) - int(b.port)
}

// row finds k in the listing. Caller holds g.mu.
func (g *group) row(k key) (row, bool) {
	i, ok := slices.BinarySearchFunc(g.rows, k, func(r row, k key) int { return compareKeys(r.key, k) })
	if !ok {
		return row{}, false
	}
	return g.rows[i], true
}

// setRows records the predicted state of targets after a successful write,
// so that repeated calls within the TTL are not sent again. Caller holds
// g.mu.
func (g *group) setRows(keys []key, state types.TargetHealthStateEnum, reason string, byKey map[key]lb.Target) {
	if !g.listed {
		return
	}
	for _, k := range keys {
		i, ok := slices.BinarySearchFunc(g.rows, k, func(r row, k key) int { return compareKeys(r.key, k) })
		if !ok {
			if state == types.TargetHealthStateEnumDraining {
				continue
			}
			g.rows = slices.Insert(g.rows, i, row{key: k, zone: byKey[k].Zone})
		}
		g.rows[i].state, g.rows[i].reason = state, reason
	}
}

// owns reports whether sluice may list and deregister k. Caller holds g.mu.
func (g *group) owns(k key) bool {
	_, ok := g.mine[k]
	return ok || g.ownedWholly
}

// convert maps lb targets to keys for this group's target type, dropping
// (with an error each) those it cannot address and duplicates. Caller
// holds g.mu.
func (g *group) convert(ts []lb.Target) ([]key, map[key]lb.Target, []error) {
	var errs []error
	keys := make([]key, 0, len(ts))
	byKey := make(map[key]lb.Target, len(ts))
	for _, t := range ts {
		k, err := g.keyOf(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := byKey[k]; !dup {
			keys = append(keys, k)
			byKey[k] = t
		}
	}
	return keys, byKey, errs
}

func (g *group) keyOf(t lb.Target) (key, error) {
	port := t.Address.Port()
	if port == 0 {
		return key{}, fmt.Errorf("target %v has no port: %w", t, lb.ErrInvalid)
	}
	if g.instance {
		if !validInstanceID(t.ID) {
			return key{}, fmt.Errorf("target %v: instance target group %s needs an EC2 instance ID (i-...): %w", t, g.arn, lb.ErrInvalid)
		}
		return key{id: t.ID, port: port}, nil
	}
	a := t.Address.Addr().Unmap()
	if !a.IsValid() || a.IsUnspecified() || a.Zone() != "" {
		return key{}, fmt.Errorf("target %v: ip target group %s needs an IP address: %w", t, g.arn, lb.ErrInvalid)
	}
	return key{id: a.String(), port: port}, nil
}

func validInstanceID(id string) bool {
	if !strings.HasPrefix(id, "i-") || len(id) < 3 || len(id) > 64 {
		return false
	}
	for _, c := range id[2:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// descriptions builds the API's target list. The availability zone of an
// IP target comes from lb.Target.Zone when set ("all" for addresses
// outside the VPC).
func (g *group) descriptions(keys []key, byKey map[key]lb.Target) []types.TargetDescription {
	out := make([]types.TargetDescription, 0, len(keys))
	for _, k := range keys {
		d := types.TargetDescription{Id: aws.String(k.id), Port: aws.Int32(int32(k.port))}
		if z := byKey[k].Zone; z != "" && !g.instance {
			d.AvailabilityZone = aws.String(z)
		}
		out = append(out, d)
	}
	return out
}

// statuses is the owned part of the listing, sorted (lb.Target.Compare).
// Caller holds g.mu.
func (g *group) statuses() []lb.Status {
	out := []lb.Status{}
	for _, r := range g.rows {
		if !g.owns(r.key) {
			continue
		}
		t := lb.Target{Zone: r.zone}
		if o := g.mine[r.key]; o != nil {
			t = o.target
			t.Zone = cmpOr(r.zone, t.Zone)
		}
		if g.instance {
			t.ID = r.key.id
			t.Address = netip.AddrPortFrom(t.Address.Addr(), r.key.port)
		} else {
			a, err := netip.ParseAddr(r.key.id)
			if err != nil {
				continue
			}
			t.ID, t.Address = "", netip.AddrPortFrom(a, r.key.port)
		}
		out = append(out, lb.Status{Target: t, State: state(r.state), Reason: r.reason, Connections: -1})
	}
	slices.SortFunc(out, func(a, b lb.Status) int { return a.Target.Compare(b.Target) })
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// state maps ELBv2 target health onto lb.State (the same words).
func state(s types.TargetHealthStateEnum) lb.State {
	switch s {
	case types.TargetHealthStateEnumInitial:
		return lb.Initial
	case types.TargetHealthStateEnumHealthy:
		return lb.Healthy
	case types.TargetHealthStateEnumUnhealthy, types.TargetHealthStateEnumUnhealthyDraining:
		return lb.Unhealthy
	case types.TargetHealthStateEnumDraining:
		return lb.Draining
	case types.TargetHealthStateEnumUnused:
		return lb.Unused
	default:
		return lb.Unavailable
	}
}

// RegionOf returns the region field of a target group ARN, so that a
// caller can pick the provider for a group when no region is configured.
func RegionOf(arn string) (string, error) {
	if err := validARN(arn); err != nil {
		return "", err
	}
	r := strings.SplitN(arn, ":", 6)[3]
	if r == "" {
		return "", fmt.Errorf("target group ARN %q has no region: %w", arn, lb.ErrInvalid)
	}
	return r, nil
}
