// Package awsfake is an in-process stand-in for the Elastic Load Balancing
// v2 API and for the load balancers behind it, so that sluice's aws
// provider (and, end to end, the controller) can be tested without AWS. It
// sits where AWS sits in the data flow:
//
//	controller ─► lb/aws (aws-sdk-go-v2) ─HTTP Query API─► awsfake ─health checks, traffic─► targets
//
// It speaks the real wire protocol (form-encoded Action=...&Version=2015-12-01
// requests, XML replies and XML errors with AWS's codes), so the provider is
// tested through the real SDK. It also behaves like AWS over time: a new
// target is initial while registration runs and until it passes its health
// checks, which are real HTTP GETs against the target; a deregistered
// target is draining for the deregistration delay, then gone. Every
// duration is divided by Options.Speed.
//
// A target group may carry traffic: a TCP listener on 127.0.0.1 forwards to
// its targets like a Network Load Balancer (new connections may still reach
// a deregistered target for a while; existing ones are reset when the delay
// ends) or an Application Load Balancer (request by request; no new
// requests to a deregistered target). Targets must be in 127.0.0.0/8 or
// 10.244.0.0/16: the fake refuses every other address.
//
// Load balancers (AddLoadBalancer) stand in front of target groups: the
// groups list them in LoadBalancerArns and DescribeLoadBalancers gives
// their AWS-shaped DNS names and canonical hosted zone IDs, which is how
// sluice finds what DNS records should point at.
//
// Load balancers, target groups and listeners can also be created,
// changed and deleted through the API (managed.go, listeners.go), as
// sluice's managed mode does: a created listener carries traffic on
// 127.0.0.1 (ListenerAddress) to its target group, terminating TLS for
// TLS/HTTPS listeners with a self-signed stand-in of the ACM certificate
// chosen by SNI. The same endpoint answers ACM's JSON 1.1 protocol
// (ListCertificates, DescribeCertificate; AddCertificate seeds, acm.go) and
// EC2's DescribeSubnets (AddSubnet seeds, ec2.go).
//
// The same endpoint serves Route53 (REST-XML under /2013-04-01/, see
// route53.go): hosted zones (AddHostedZone), record sets (PutRecordSet,
// RecordSets, or the API's ChangeResourceRecordSets with Route53's
// validation) and changes that are PENDING for Options.ChangePropagation,
// then INSYNC:
//
//	dns/route53 (aws-sdk-go-v2) ─HTTP REST-XML─► awsfake ─► hosted zones
//
// Faults (throttling, PriorRequestNotComplete, 5xx, slow
// DescribeTargetHealth) are injected with SetFaults, per action or
// Route53 operation name.
package awsfake

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options configures a Fake.
type Options struct {
	// Speed divides every modelled duration (registration, health-check
	// interval, deregistration delay, the NLB new-connection window).
	// Default 1 (real time).
	Speed float64
	// Region and AccountID go into the ARNs. Defaults "us-east-1" and
	// "123456789012".
	Region, AccountID string
	// Zones are the availability zones IP targets may name (besides
	// "all"). Default the region's "a", "b" and "c".
	Zones []string
	// Address is where the API listens. Default "127.0.0.1:0".
	Address string
	// Networks narrows where targets may be: each prefix must lie within
	// 127.0.0.0/8 or 10.244.0.0/16 (see Allowed). Default both. Tests
	// without the project's network namespaces use 127.0.0.0/8 only.
	Networks []netip.Prefix
	// ChangePropagation is how long a Route53 change is PENDING before
	// GetChange says INSYNC (divided by Speed like every duration).
	// Default 30s; negative: INSYNC at once.
	ChangePropagation time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
}

// TargetGroup describes a target group to create. Zero fields take AWS's
// defaults for the protocol.
type TargetGroup struct {
	// Name of the group (the ARN's middle part). Required, unique.
	Name string
	// TargetType is "ip" (default) or "instance".
	TargetType string
	// Protocol is "TCP" (default; Network Load Balancer behaviour) or
	// "HTTP" (Application Load Balancer behaviour).
	Protocol string
	// Port is the group's traffic port (targets registered without a port
	// get it). Default 80.
	Port int
	// HealthCheckPath is the path of the HTTP health check. Default "/".
	HealthCheckPath string
	// HealthCheckPort is "traffic-port" (default) or a port number.
	HealthCheckPort string
	// HealthCheckInterval: default 30s. HealthCheckTimeout: default 5s
	// (6s for HTTP); the check's timeout is at least 1s after scaling.
	HealthCheckInterval, HealthCheckTimeout time.Duration
	// HealthyThreshold and UnhealthyThreshold: consecutive results that
	// change the health. Defaults 5 and 2 (HTTP) or 3 and 3 (TCP).
	HealthyThreshold, UnhealthyThreshold int
	// RegistrationIntervals is how many health-check intervals a
	// registration takes before the first check. Default 1; negative: none.
	RegistrationIntervals int
	// DeregistrationDelay is how long a deregistered target drains.
	// Default 300s; negative: 0.
	DeregistrationDelay time.Duration
	// NewConnectionWindow is how long after deregistration a TCP group
	// still sends new connections to the target (NLB does for a while).
	// Default 10s for TCP; negative: none. Ignored for HTTP.
	NewConnectionWindow time.Duration
	// Tags on the group.
	Tags map[string]string
	// Listen opens a traffic listener on 127.0.0.1; see Fake.Listener.
	Listen bool
	// CrossZoneOff models an NLB with cross-zone load balancing off (TCP
	// only): with Listen, one more listener per zone of Options.Zones (the
	// zone's load-balancer node; see Fake.ZoneListener) sends only to that
	// zone's targets. A zone without a healthy target resets its
	// connections; with no healthy target in any zone, every node fails
	// open to every target.
	CrossZoneOff bool
}

// Faults are injected API failures. Fractions are applied deterministically
// and per action: a fraction f fails the k-th call of an action when
// ceil(k·f) > ceil((k-1)·f), so 0.5 fails calls 1, 3, 5, ... (every first
// attempt, every retry passes) and 1 fails every call. When both fractions
// hit a call, it is throttled.
type Faults struct {
	// Throttle is the fraction of calls answered 400 Throttling.
	Throttle float64
	// PriorRequestNotComplete is the fraction of Route53 calls answered
	// 400 PriorRequestNotComplete (Route53's "still processing a prior
	// request"); Throttle wins when both hit.
	PriorRequestNotComplete float64
	// ServerError is the fraction of calls answered 500 InternalFailure
	// (before acting).
	ServerError float64
	// DescribeHealthDelay delays every DescribeTargetHealth answer (real
	// time, not scaled).
	DescribeHealthDelay time.Duration
	// Actions limits the faults to these actions; empty: every action.
	Actions []string
}

// Fake is a running fake ELBv2 endpoint. Safe for concurrent use.
type Fake struct {
	opts Options
	log  *slog.Logger
	srv  *http.Server
	ln   net.Listener
	ctx  context.Context // cancelled by Close
	stop context.CancelFunc

	mu        sync.Mutex
	groups    map[string]*group // by ARN
	order     []string          // ARNs in creation order
	instances map[string]netip.Addr
	faults    Faults
	faultN    map[string]int // calls per action since SetFaults
	calls     map[string]int
	reqID     uint64
	wg        sync.WaitGroup

	elb elbState // load balancers (elb.go)
	r53 r53State // Route53 hosted zones and changes (route53.go)
}

// New starts a fake on Options.Address. Stop it with Close.
func New(o Options) (*Fake, error) {
	if o.Speed <= 0 {
		o.Speed = 1
	}
	o.Region = cmp.Or(o.Region, "us-east-1")
	o.AccountID = cmp.Or(o.AccountID, "123456789012")
	if len(o.Zones) == 0 {
		o.Zones = []string{o.Region + "a", o.Region + "b", o.Region + "c"}
	}
	if len(o.Networks) == 0 {
		o.Networks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.244.0.0/16")}
	}
	for _, p := range o.Networks {
		if !p.IsValid() || !Allowed(p.Masked().Addr()) || !Allowed(lastAddr(p)) {
			return nil, fmt.Errorf("starting aws fake: network %v outside 127.0.0.0/8 and 10.244.0.0/16", p)
		}
	}
	o.Networks = slices.Clone(o.Networks)
	ln, err := net.Listen("tcp", cmp.Or(o.Address, "127.0.0.1:0"))
	if err != nil {
		return nil, fmt.Errorf("starting aws fake: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &Fake{
		opts:      o,
		log:       cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil))),
		ln:        ln,
		ctx:       ctx,
		stop:      stop,
		groups:    map[string]*group{},
		instances: map[string]netip.Addr{},
		calls:     map[string]int{},
		faultN:    map[string]int{},
	}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serveAPI), ReadHeaderTimeout: 10 * time.Second}
	f.wg.Go(func() { _ = f.srv.Serve(ln) })
	return f, nil
}

// URL is the API endpoint, for the SDK's BaseEndpoint.
func (f *Fake) URL() string { return "http://" + f.ln.Addr().String() }

// Close stops the API, every listener, health check and forwarded
// connection, and waits for them.
func (f *Fake) Close() error {
	f.stop()
	err := f.srv.Close()
	f.mu.Lock()
	for _, l := range f.elb.listeners {
		l.closeTraffic()
	}
	for _, g := range f.groups {
		g.closeListener()
		for _, t := range g.targets {
			t.remove()
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}

// scale divides d by the speed factor.
func (f *Fake) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) / f.opts.Speed)
}

// AddTargetGroup creates a target group and returns its ARN.
func (f *Fake) AddTargetGroup(tg TargetGroup) (string, error) {
	if tg.Name == "" || strings.ContainsAny(tg.Name, "/: ") {
		return "", fmt.Errorf("adding target group %q: invalid name", tg.Name)
	}
	tg.TargetType = cmp.Or(tg.TargetType, "ip")
	tg.Protocol = strings.ToUpper(cmp.Or(tg.Protocol, "TCP"))
	http := tg.Protocol == "HTTP" || tg.Protocol == "HTTPS"
	if tg.TargetType != "ip" && tg.TargetType != "instance" {
		return "", fmt.Errorf("adding target group %s: target type %q not supported", tg.Name, tg.TargetType)
	}
	tg.Port = cmp.Or(tg.Port, 80)
	tg.HealthCheckPath = cmp.Or(tg.HealthCheckPath, "/")
	tg.HealthCheckPort = cmp.Or(tg.HealthCheckPort, "traffic-port")
	tg.HealthCheckInterval = cmp.Or(tg.HealthCheckInterval, 30*time.Second)
	if http {
		tg.HealthCheckTimeout = cmp.Or(tg.HealthCheckTimeout, 6*time.Second)
		tg.HealthyThreshold = cmp.Or(tg.HealthyThreshold, 5)
		tg.UnhealthyThreshold = cmp.Or(tg.UnhealthyThreshold, 2)
		tg.NewConnectionWindow = 0
	} else {
		tg.HealthCheckTimeout = cmp.Or(tg.HealthCheckTimeout, 5*time.Second)
		tg.HealthyThreshold = cmp.Or(tg.HealthyThreshold, 3)
		tg.UnhealthyThreshold = cmp.Or(tg.UnhealthyThreshold, 3)
		tg.NewConnectionWindow = cmp.Or(tg.NewConnectionWindow, 10*time.Second)
	}
	tg.RegistrationIntervals = cmp.Or(tg.RegistrationIntervals, 1)
	tg.RegistrationIntervals = max(tg.RegistrationIntervals, 0)
	if tg.DeregistrationDelay == 0 {
		tg.DeregistrationDelay = 300 * time.Second
	}
	tg.DeregistrationDelay = max(tg.DeregistrationDelay, 0)
	tg.NewConnectionWindow = max(tg.NewConnectionWindow, 0)
	tg.Tags = cloneMap(tg.Tags)

	id := make([]byte, 8)
	_, _ = rand.Read(id)
	arn := fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:targetgroup/%s/%s",
		f.opts.Region, f.opts.AccountID, tg.Name, hex.EncodeToString(id))
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.groups {
		if g.cfg.Name == tg.Name {
			return "", fmt.Errorf("adding target group %s: %s", tg.Name, "DuplicateTargetGroupName")
		}
	}
	g := &group{f: f, arn: arn, cfg: tg, targets: map[key]*target{}}
	if tg.Listen {
		if err := g.listen(); err != nil {
			return "", fmt.Errorf("adding target group %s: %w", tg.Name, err)
		}
	}
	f.groups[arn] = g
	f.order = append(f.order, arn)
	return arn, nil
}

// AddInstance makes an EC2 instance known: instance targets with this ID
// are health-checked and reached at addr.
func (f *Fake) AddInstance(id string, addr netip.Addr) error {
	if !strings.HasPrefix(id, "i-") {
		return fmt.Errorf("adding instance %q: instance IDs start with i-", id)
	}
	if !f.allowed(addr) {
		return fmt.Errorf("adding instance %s: address %v outside %v", id, addr, f.opts.Networks)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.instances[id] = addr
	return nil
}

// SetTags replaces a target group's tags.
func (f *Fake) SetTags(arn string, tags map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.groups[arn]
	if !ok {
		return fmt.Errorf("setting tags: target group %s not found", arn)
	}
	g.cfg.Tags = cloneMap(tags)
	return nil
}

// SetDeregistrationDelay changes a group's deregistration delay for
// targets deregistered from now on.
func (f *Fake) SetDeregistrationDelay(arn string, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.groups[arn]
	if !ok {
		return fmt.Errorf("setting deregistration delay: target group %s not found", arn)
	}
	g.cfg.DeregistrationDelay = max(d, 0)
	return nil
}

// SetFaults replaces the injected faults (zero Faults: none).
func (f *Fake) SetFaults(x Faults) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = x
	f.faults.Actions = slices.Clone(x.Actions)
	f.faultN = map[string]int{}
}

// Calls returns how many requests each action received (faulted ones
// included).
func (f *Fake) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneMap(f.calls)
}

// Listener returns the traffic address of a group opened with Listen.
func (f *Fake) Listener(arn string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.groups[arn]
	if !ok || g.ln == nil {
		return "", false
	}
	return g.ln.Addr().String(), true
}

// TargetState is one registered target as the fake sees it.
type TargetState struct {
	ID     string
	Port   int
	Zone   string
	State  string
	Reason string
	// Conns is the number of forwarded connections or requests in flight.
	Conns int
}

// Targets lists a group's registered targets (draining ones included),
// sorted by ID and port.
func (f *Fake) Targets(arn string) []TargetState {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.groups[arn]
	if !ok {
		return nil
	}
	out := make([]TargetState, 0, len(g.targets))
	for _, t := range g.sorted() {
		out = append(out, TargetState{ID: t.id, Port: t.port, Zone: t.zone, State: t.state, Reason: t.reason, Conns: len(t.conns)})
	}
	return out
}

// Allowed reports whether the fake may send traffic or health checks to
// addr: only 127.0.0.0/8 and 10.244.0.0/16 (the project's test networks).
func Allowed(addr netip.Addr) bool {
	addr = addr.Unmap()
	return netip.MustParsePrefix("127.0.0.0/8").Contains(addr) ||
		netip.MustParsePrefix("10.244.0.0/16").Contains(addr)
}

// allowed reports whether addr is within Options.Networks (and Allowed).
func (f *Fake) allowed(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !Allowed(addr) {
		return false
	}
	for _, p := range f.opts.Networks {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// lastAddr is the highest IPv4 address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().Unmap()
	if !a.Is4() {
		return a
	}
	b := a.As4()
	for i := p.Bits(); i < 32; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	return netip.AddrFrom4(b)
}

// dial connects only into the allowed networks.
func (f *Fake) dial(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !f.allowed(ap.Addr()) {
		return nil, fmt.Errorf("dialing %s: %w", address, errNotAllowed)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// errNotAllowed refuses a destination outside the allowed networks.
var errNotAllowed = errors.New("destination outside 127.0.0.0/8 and 10.244.0.0/16")

func cloneMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
