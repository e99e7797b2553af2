// Package haproxy is the lb.Provider for an HAProxy (2.4+) that sluice
// drives through its runtime API: each sluice target is a dynamic server in
// a backend (the group), added with "add server" and removed with
// "del server" once drained. It sits at the apply end of the controller's
// target flow (pods → targets.Desired → targets.Diff → Provider).
//
// Everything the provider acts on is read back from HAProxy ("show servers
// state", "show stat"), so a controller restart loses nothing. The one
// memory it keeps is the last listing of each backend and the process that
// answered it: an HAProxy reload or restart forgets dynamic servers, and
// the provider adds them back in their last known state as soon as it sees
// a new process (see restore.go), instead of waiting for the controller's
// next diff and a fresh rise.
//
// Servers are owned by name: sluice's servers are called PREFIX+address
// (e.g. "sluice-10-244-1-5-8080"), and a server counts as sluice's only if
// its name is exactly the name of its current address. Other servers in the
// backend are never listed or touched.
package haproxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"sluice.dev/sluice/internal/lb"
)

// Options configures a Provider.
type Options struct {
	// Address of the runtime API socket: a unix socket path
	// ("/run/haproxy/admin.sock", optionally prefixed "unix:") or a TCP
	// "host:port" ("127.0.0.1:9999"). Required. The socket must be
	// declared with "level admin".
	Address string
	// Prefix starts the name of every server sluice creates and owns.
	// Default "sluice-". Characters [A-Za-z0-9_.-].
	Prefix string
	// CheckInterval is the health-check interval of added servers ("inter").
	// Default 1s. The check itself (e.g. "option httpchk GET /healthz")
	// comes from the backend: dynamic servers inherit backend options, but
	// not "default-server" lines.
	CheckInterval time.Duration
	// Rise and Fall are the consecutive check results that turn a server
	// up or down. Defaults 1 and 2.
	Rise, Fall int
	// Weight of added servers, 1..256. Default 100. (Servers are added
	// with weight 0 and get this weight once forced down; see Register.)
	Weight int
	// ServerArgs are extra "add server" keywords and values, e.g.
	// {"check-ssl", "ssl", "verify", "none"}; each must be a single token
	// of [A-Za-z0-9_.:/@=,+%-]. Default none.
	ServerArgs []string
	// MaxDrain is how long a deregistered server stays in "drain" (sticky
	// sessions may still reach it) while it still has sessions; after that
	// it goes to "maint" (nothing new at all) regardless. A drained server
	// with no sessions goes to maint on the next Deregister. Default 60s.
	MaxDrain time.Duration
	// Timeout bounds one runtime API exchange (dial, send, read) unless
	// the context's deadline is sooner. Default 5s.
	Timeout time.Duration
	// MaxResponse bounds the size of one answer. Default 16 MiB.
	MaxResponse int64
	// WatchInterval is how often Watch asks "show info" whether a new
	// HAProxy process (a reload or restart) took over, so that the servers
	// it forgot are restored. Every listing checks too. Default 250ms;
	// negative turns restoring off (the provider then keeps no state and
	// the controller's next diff re-adds the servers as new).
	WatchInterval time.Duration
	// OnRestore, if not nil, hears of each new process seen and the
	// servers restored into it (it is called with the provider's lock
	// held: it must not call the provider).
	OnRestore func(pid, restored int, took time.Duration)
}

// Provider implements lb.Provider over HAProxy's runtime API. It is safe for
// concurrent use, but calls for the same backend should be serialized by the
// caller (one reconcile per group at a time): each call reads the backend,
// then acts on what it read.
type Provider struct {
	c       client
	prefix  string
	addArgs string // everything after "add server B/N ADDR"
	// restoreArgs: the same at full weight, for servers restored healthy
	restoreArgs string
	weight      string
	maxDrain    time.Duration
	watch       time.Duration // <= 0: no restoring
	onRestore   func(pid, restored int, took time.Duration)

	mu       sync.Mutex
	proc     process             // the process seen last; zero before the first listing
	known    map[string][]server // last listing per backend, by proc
	restarts int
	epoch    uint64           // restores so far: a listing begun before one is stale
	retired  map[process]bool // processes proc replaced (a few)
}

var _ lb.Provider = (*Provider)(nil)

// New validates o and returns a Provider. It does not contact HAProxy.
func New(o Options) (*Provider, error) {
	if o.Address == "" {
		return nil, errors.New("creating haproxy provider: runtime API address is required")
	}
	network, address := "tcp", o.Address
	if strings.HasPrefix(address, "unix:") {
		network, address = "unix", strings.TrimPrefix(address, "unix:")
	} else if strings.Contains(address, "/") {
		network = "unix"
	}
	p := &Provider{
		c: client{
			network:     network,
			address:     address,
			timeout:     cmp.Or(o.Timeout, 5*time.Second),
			maxResponse: cmp.Or(o.MaxResponse, 16<<20),
		},
		prefix:    cmp.Or(o.Prefix, "sluice-"),
		maxDrain:  cmp.Or(o.MaxDrain, 60*time.Second),
		watch:     cmp.Or(o.WatchInterval, 250*time.Millisecond),
		onRestore: o.OnRestore,
		known:     map[string][]server{},
		retired:   map[process]bool{},
	}
	if err := validPrefix(p.prefix); err != nil {
		return nil, fmt.Errorf("creating haproxy provider: %w", err)
	}
	inter := cmp.Or(o.CheckInterval, time.Second)
	rise, fall, weight := cmp.Or(o.Rise, 1), cmp.Or(o.Fall, 2), cmp.Or(o.Weight, 100)
	if inter < time.Millisecond || rise < 1 || fall < 1 || weight < 1 || weight > 256 {
		return nil, fmt.Errorf("creating haproxy provider: check interval %v, rise %d, fall %d, weight %d out of range: %w",
			inter, rise, fall, weight, lb.ErrInvalid)
	}
	args := []string{"check", "inter", strconv.FormatInt(inter.Milliseconds(), 10) + "ms",
		"fall", strconv.Itoa(fall), "rise", strconv.Itoa(rise), "weight", "0"}
	p.weight = strconv.Itoa(weight)
	weightAt := len(args) - 1
	for _, a := range o.ServerArgs {
		if err := checkArg(a); err != nil {
			return nil, fmt.Errorf("creating haproxy provider: %w", err)
		}
		args = append(args, a)
	}
	p.addArgs = strings.Join(args, " ")
	args[weightAt] = p.weight // "weight 0" → "weight W"
	p.restoreArgs = strings.Join(args, " ")
	return p, nil
}

// server is one sluice-owned server as read back from HAProxy.
type server struct {
	name      string
	addr      netip.AddrPort
	checkPort uint16 // 0: the traffic port
	admin     int
	since     int      // seconds since the last state change, -1 unknown
	stat      *statRow // nil if "show stat" did not list it (raced with add/del)
	status    lb.Status
}

// list reads the backend's sluice-owned servers, sorted by address. When
// restoring is on, it first restores the servers a new HAProxy process
// lacks, and remembers what it read.
func (p *Provider) list(ctx context.Context, backend string) ([]server, error) {
	if p.watch <= 0 {
		_, owned, err := p.read(ctx, backend)
		return owned, err
	}
	for attempt := 1; ; attempt++ {
		epoch := p.listing()
		pr, owned, err := p.read(ctx, backend)
		if err != nil {
			return nil, err
		}
		stale, err := p.seen(ctx, pr, epoch)
		if err != nil {
			return nil, err
		}
		if !stale {
			return p.remember(pr, backend, owned), nil
		}
		// Read what the restore left, or ask the new process.
		if attempt >= onAttempts {
			return nil, fmt.Errorf("listing backend %s: %w", backend, errOtherProcess)
		}
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(onPause):
			}
		}
	}
}

// read lists the backend's sluice-owned servers and, when restoring is on,
// the process that answered.
func (p *Provider) read(ctx context.Context, backend string) (process, []server, error) {
	var pr process
	cmds := []string{"show servers state " + backend}
	if p.watch > 0 {
		cmds = append([]string{"show info"}, cmds...)
	}
	out, err := p.c.run(ctx, cmds...)
	if err != nil {
		return pr, nil, err
	}
	if p.watch > 0 {
		info, rest, err := splitInfo(out)
		if err != nil {
			return pr, nil, err
		}
		if pr, err = parseInfo(info); err != nil {
			return pr, nil, err
		}
		out = rest
	}
	states, err := parseServersState(out)
	if err != nil {
		return pr, nil, err
	}
	var owned []server
	for _, r := range states {
		if !strings.HasPrefix(r.Name, p.prefix) || r.Backend != backend || !r.Addr.IsValid() {
			continue
		}
		ap := netip.AddrPortFrom(r.Addr, r.Port)
		if serverName(p.prefix, ap) != r.Name {
			continue // not ours: the name must be the name of its address
		}
		owned = append(owned, server{name: r.Name, addr: ap, checkPort: r.CheckPort, admin: r.Admin, since: r.SinceChange})
	}
	if len(owned) == 0 {
		return pr, nil, nil
	}
	if p.watch > 0 {
		// From the process that listed the servers (see on).
		out, err = p.on(ctx, pr, "show stat "+backend+" 4 -1")
	} else {
		out, err = p.c.run(ctx, "show stat "+backend+" 4 -1")
	}
	if err != nil {
		return pr, nil, err
	}
	stats, err := parseShowStat(out)
	if err != nil {
		return pr, nil, err
	}
	byName := make(map[string]*statRow, len(stats))
	for i := range stats {
		if stats[i].Proxy == backend {
			byName[stats[i].Name] = &stats[i]
		}
	}
	for i := range owned {
		s := &owned[i]
		s.stat = byName[s.name]
		state, reason := health(s.admin, s.stat)
		s.status = lb.Status{Target: lb.Target{Address: s.addr}, State: state, Reason: reason, Connections: -1}
		if s.stat != nil {
			s.status.Connections = s.stat.Sessions
		}
	}
	slices.SortFunc(owned, func(a, b server) int { return a.addr.Compare(b.addr) })
	return pr, owned, nil
}

// health maps HAProxy's view of a server onto lb.State.
func health(admin int, st *statRow) (lb.State, string) {
	switch {
	case admin&admMaint != 0:
		return lb.Draining, "maint"
	case admin&admDrain != 0:
		return lb.Draining, "drain"
	case st == nil:
		return lb.Unavailable, "not in stats"
	}
	switch s := st.Status; {
	case s == "no check":
		return lb.Unavailable, "no check"
	case strings.HasPrefix(s, "MAINT"):
		return lb.Draining, "maint"
	case strings.HasPrefix(s, "DRAIN"):
		return lb.Draining, "drain"
	case strings.HasPrefix(s, "NOLB"):
		return lb.Draining, "nolb"
	case st.CheckStatus == "" || st.CheckStatus == "INI":
		return lb.Initial, ""
	case s == "UP":
		return lb.Healthy, ""
	case strings.HasPrefix(s, "UP"): // "UP 1/2": up, but failing checks
		return lb.Healthy, checkReason(st)
	case strings.HasPrefix(s, "DOWN"):
		return lb.Unhealthy, checkReason(st)
	default:
		return lb.Unavailable, truncate(s, 40)
	}
}

func checkReason(st *statRow) string {
	r := strings.TrimSpace(st.CheckStatus + " " + st.CheckCode)
	if st.CheckDesc != "" {
		r += ": " + st.CheckDesc
	}
	return truncate(r, 200)
}

// Targets implements lb.Provider.
func (p *Provider) Targets(ctx context.Context, group string) ([]lb.Status, error) {
	if err := validBackend(group); err != nil {
		return nil, fmt.Errorf("listing targets: %w", err)
	}
	servers, err := p.list(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("listing targets of backend %s: %w", group, err)
	}
	out := make([]lb.Status, len(servers))
	for i, s := range servers {
		out[i] = s.status
	}
	return out, nil
}

// prepare validates group and targets and reads the current servers.
func (p *Provider) prepare(ctx context.Context, group string, ts []lb.Target) ([]netip.AddrPort, map[netip.AddrPort]server, error) {
	if err := validBackend(group); err != nil {
		return nil, nil, err
	}
	var errs []error
	addrs := make([]netip.AddrPort, 0, len(ts))
	seen := map[netip.AddrPort]bool{}
	for _, t := range ts {
		ap, err := checkAddr(t.Address)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[ap] {
			seen[ap] = true
			addrs = append(addrs, ap)
		}
	}
	if len(addrs) == 0 {
		return nil, nil, errors.Join(errs...)
	}
	servers, err := p.list(ctx, group)
	if err != nil {
		return nil, nil, err
	}
	current := make(map[netip.AddrPort]server, len(servers))
	for _, s := range servers {
		current[s.addr] = s
	}
	return addrs, current, errors.Join(errs...)
}

// fatal reports errors that doom every further command on the group.
func fatal(err error) bool {
	return errors.Is(err, lb.ErrGroupNotFound) || errors.Is(err, lb.ErrNotDynamic) || errors.Is(err, lb.ErrUnreachable)
}

// Register implements lb.Provider. A new server is added in maintenance
// with weight 0, gets its health check enabled, and is then set ready,
// forced down and given its weight in one command line, so it receives no
// traffic before its first passing check: HAProxy 2.6 treats a server that
// leaves maintenance as up until a check says otherwise, and the weight of
// 0 covers the instant between "state ready" and "health down".
func (p *Provider) Register(ctx context.Context, group string, ts []lb.Target) error {
	addrs, current, err := p.prepare(ctx, group, ts)
	if err != nil && (addrs == nil || fatal(err)) {
		return fmt.Errorf("registering targets in backend %s: %w", group, err)
	}
	checkPorts := map[netip.AddrPort]uint16{}
	for _, t := range ts {
		if t.CheckPort != 0 {
			checkPorts[t.Address] = t.CheckPort
		}
	}
	errs := []error{err}
	for _, ap := range addrs {
		err := p.register(ctx, group, ap, checkPorts[ap], current)
		if err != nil {
			err = fmt.Errorf("registering %v in backend %s: %w", ap, group, err)
			if fatal(err) {
				return errors.Join(append(errs, err)...)
			}
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (p *Provider) register(ctx context.Context, group string, ap netip.AddrPort, checkPort uint16, current map[netip.AddrPort]server) error {
	s, exists := current[ap]
	ref := group + "/" + serverName(p.prefix, ap)
	if exists {
		ref = group + "/" + s.name
		switch {
		case s.admin&admMaint != 0:
			// Checks stopped in maintenance; the last result is stale.
			return p.activate(ctx, ref)
		case s.admin&admDrain != 0:
			// Checks kept running while draining; trust them.
			return p.do(ctx, []string{"set server " + ref + " state ready"})
		default:
			return nil
		}
	}
	if err := p.do(ctx, []string{"add server " + ref + " " + formatAddr(ap) + " " + p.addArgs + withCheckPort(checkPort)}, msgNewServer); err != nil {
		return err
	}
	return p.activate(ctx, ref)
}

// withCheckPort is the "add server" keyword that health-checks port
// instead of the traffic port; "" for 0.
func withCheckPort(port uint16) string {
	if port == 0 {
		return ""
	}
	return " port " + strconv.Itoa(int(port))
}

// activate takes a server out of maintenance with health checks on, forced
// down until a check passes.
func (p *Provider) activate(ctx context.Context, ref string) error {
	if err := p.do(ctx, []string{"enable health " + ref}); err != nil {
		return err
	}
	return p.do(ctx, activation(ref, p.weight))
}

// activation is the command line of activate after "enable health".
func activation(ref, weight string) []string {
	return []string{
		"set weight " + ref + " 0",
		"set server " + ref + " state ready",
		"set server " + ref + " health down",
		"set weight " + ref + " " + weight,
	}
}

// do runs commands on one line and classifies the answer.
func (p *Provider) do(ctx context.Context, cmds []string, ok ...string) error {
	out, err := p.c.run(ctx, cmds...)
	if err != nil {
		return err
	}
	return classify(out, ok...)
}

// Deregister implements lb.Provider. Each call moves a target one step
// along ready → drain → maint → deleted:
//   - a server taking traffic is set to "drain" (no new load-balanced
//     traffic; sticky sessions and health checks continue);
//   - a draining server with no sessions, or draining for longer than
//     MaxDrain, is set to "maint" (nothing new at all);
//   - a server in maintenance for maintSettle is deleted once HAProxy
//     agrees it has no connections left ("del server" refuses otherwise;
//     that refusal is not an error, the target simply stays Draining with
//     its connection count).
func (p *Provider) Deregister(ctx context.Context, group string, ts []lb.Target) error {
	addrs, current, err := p.prepare(ctx, group, ts)
	if err != nil && (addrs == nil || fatal(err)) {
		return fmt.Errorf("deregistering targets from backend %s: %w", group, err)
	}
	errs := []error{err}
	for _, ap := range addrs {
		s, ok := current[ap]
		if !ok {
			continue
		}
		if err := p.deregister(ctx, group, s); err != nil {
			err = fmt.Errorf("deregistering %v from backend %s: %w", ap, group, err)
			if fatal(err) {
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// maintSettle is how many seconds, as HAProxy counts them
// (srv_time_since_last_change, whole seconds: 2 is more than one second),
// a server stays in maintenance before "del server". HAProxy before the
// fix of haproxy/haproxy#2298 (in 2.6.16 and 2.8.4; Debian 12 ships
// 2.6.12) counts a stream's session back before the stream lets go of the
// server, and a "del server" in that moment frees a server the stream
// still points at: the process crashes. Seen in sluice's e2e tests when
// drain, maint and delete came within a second. In maintenance nothing
// new goes to the server, so a second there outlasts that moment.
const maintSettle = 2

func (p *Provider) deregister(ctx context.Context, group string, s server) error {
	ref := group + "/" + s.name
	switch {
	case s.admin&admMaint != 0:
		if s.since >= 0 && s.since < maintSettle {
			return nil // deleted once settled in maintenance
		}
	case s.admin&admDrain != 0:
		sessions := s.status.Connections
		if sessions != 0 && (s.since < 0 || time.Duration(s.since)*time.Second < p.maxDrain) {
			return nil // still draining
		}
		// Maintenance now, deleted by a later call (maintSettle).
		return ignoreGone(p.do(ctx, []string{"set server " + ref + " state maint"}))
	default:
		return ignoreGone(p.do(ctx, []string{"set server " + ref + " state drain"}))
	}
	err := p.do(ctx, []string{"del server " + ref}, msgServerDeleted)
	if errors.Is(err, errBusy) {
		return nil // in-flight requests still finishing
	}
	return ignoreGone(err)
}

func ignoreGone(err error) error {
	if errors.Is(err, errServerGone) {
		return nil
	}
	return err
}
