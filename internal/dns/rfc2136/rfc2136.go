// Package rfc2136 is the dns.Provider for DNS servers that take dynamic
// updates (RFC 2136: BIND, Knot, PowerDNS), on github.com/miekg/dns. It
// sits at the end of the DNS flow (desired records → plan of owned changes
// → Provider.Apply → UPDATE messages), between sluice's DNS planner and
// the server.
//
// Zones are read with AXFR and written with UPDATE, both over TCP and
// signed with TSIG (hmac-sha256 by default). Every change carries
// prerequisites on the record sets it replaces, so an UPDATE applies only
// while the zone holds exactly what the plan was made from: Old record
// sets as "RRset exists (value dependent)", creates as "RRset does not
// exist". A server answering YXRRSET or NXRRSET (the prerequisite failed)
// becomes dns.ErrConflict. Several batches go in one UPDATE (an UPDATE is
// atomic); when it fails, each batch is sent alone, so one conflicting
// or bad name does not hold up the others.
package rfc2136

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	model "sluice.dev/sluice/internal/dns"
)

// Options configures a Provider.
type Options struct {
	// Server is the primary's host:port. Required.
	Server string
	// Zones are the zone names to manage, from --dns-zone. Required.
	Zones []string
	// KeyName and Secret (base64, as in a tsig-keygen key clause) sign
	// every message. Empty KeyName: unsigned (tests only; servers should
	// require TSIG for updates).
	KeyName, Secret string
	// Algorithm is the TSIG algorithm: hmac-sha256 (default), hmac-sha512,
	// hmac-sha384, hmac-sha224 or hmac-sha1.
	Algorithm string
	// Timeout bounds each exchange and transfer. Default 10s.
	Timeout time.Duration
	// BatchesPerUpdate bounds how many batches share one UPDATE. Default 50.
	BatchesPerUpdate int
	// Logger: nil discards.
	Logger *slog.Logger
}

// Provider implements dns.Provider over RFC 2136 and AXFR. Safe for
// concurrent use.
type Provider struct {
	opts  Options
	zones []model.Zone
	log   *slog.Logger
}

var _ model.Provider = (*Provider)(nil)

// Algorithms maps --rfc2136-tsig-algorithm values to TSIG algorithm names.
var algorithms = map[string]string{
	"hmac-sha1": dns.HmacSHA1, "hmac-sha224": dns.HmacSHA224, "hmac-sha256": dns.HmacSHA256,
	"hmac-sha384": dns.HmacSHA384, "hmac-sha512": dns.HmacSHA512,
}

// New checks the options and returns a Provider. It makes no request.
func New(o Options) (*Provider, error) {
	if _, _, err := net.SplitHostPort(o.Server); err != nil {
		return nil, fmt.Errorf("creating RFC2136 provider: server %q is not host:port: %w", o.Server, err)
	}
	if len(o.Zones) == 0 {
		return nil, errors.New("creating RFC2136 provider: at least one zone is required")
	}
	o.Algorithm = cmp.Or(strings.ToLower(o.Algorithm), "hmac-sha256")
	alg, ok := algorithms[strings.TrimSuffix(o.Algorithm, ".")]
	if !ok {
		return nil, fmt.Errorf("creating RFC2136 provider: unknown TSIG algorithm %q (hmac-sha256, hmac-sha512, hmac-sha384, hmac-sha224, hmac-sha1)", o.Algorithm)
	}
	o.Algorithm = alg
	if o.KeyName != "" {
		if o.Secret == "" {
			return nil, fmt.Errorf("creating RFC2136 provider: TSIG key %q has no secret", o.KeyName)
		}
		o.KeyName = dns.Fqdn(strings.ToLower(o.KeyName))
	}
	o.Timeout = cmp.Or(o.Timeout, 10*time.Second)
	o.BatchesPerUpdate = cmp.Or(o.BatchesPerUpdate, 50)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p := &Provider{opts: o, log: o.Logger}
	for _, z := range o.Zones {
		name := normalize(z)
		if _, ok := dns.IsDomainName(name); !ok || name == "" {
			return nil, fmt.Errorf("creating RFC2136 provider: zone %q is not a domain name", z)
		}
		p.zones = append(p.zones, model.Zone{ID: name, Name: name})
	}
	return p, nil
}

// Zones implements dns.Provider: the configured zones.
func (p *Provider) Zones(context.Context) ([]model.Zone, error) {
	return slices.Clone(p.zones), nil
}

func (p *Provider) secrets() map[string]string {
	if p.opts.KeyName == "" {
		return nil
	}
	return map[string]string{p.opts.KeyName: p.opts.Secret}
}

func (p *Provider) sign(m *dns.Msg) {
	if p.opts.KeyName != "" {
		m.SetTsig(p.opts.KeyName, p.opts.Algorithm, 300, time.Now().Unix())
	}
}

// transferTimeout bounds one zone transfer.
const transferTimeout = 2 * time.Minute

// Records implements dns.Provider: a signed AXFR of the zone, every
// record set (types other than A, AAAA, CNAME and TXT with their values
// in presentation form).
func (p *Provider) Records(ctx context.Context, z model.Zone) ([]model.Record, error) {
	// A whole transfer gets a deadline (the read timeout only bounds each
	// message), so a server that trickles answers cannot hold the DNS
	// reconciler forever.
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(z.Name))
	p.sign(m)
	conn, err := p.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("transferring zone %s: %w", z.Name, err)
	}
	defer conn.Close()
	t := &dns.Transfer{Conn: conn, TsigSecret: p.secrets(), DialTimeout: p.opts.Timeout, ReadTimeout: p.opts.Timeout, WriteTimeout: p.opts.Timeout}
	envs, err := t.In(m, p.opts.Server)
	if err != nil {
		return nil, fmt.Errorf("transferring zone %s from %s: %w", z.Name, p.opts.Server, err)
	}
	var rrs []dns.RR
	for env := range envs {
		if env.Error != nil {
			for range envs { // drain: In closes the channel when done
			}
			return nil, fmt.Errorf("transferring zone %s from %s: %w", z.Name, p.opts.Server, env.Error)
		}
		rrs = append(rrs, env.RR...)
	}
	if len(rrs) == 0 {
		return nil, fmt.Errorf("transferring zone %s from %s: empty transfer (is the server authoritative for it?)", z.Name, p.opts.Server)
	}
	return fromRRs(rrs), nil
}

func (p *Provider) dial(ctx context.Context) (*dns.Conn, error) {
	d := net.Dialer{Timeout: p.opts.Timeout}
	c, err := d.DialContext(ctx, "tcp", p.opts.Server)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", p.opts.Server, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	return &dns.Conn{Conn: c, TsigSecret: p.secrets()}, nil
}

// fromRRs groups resource records into record sets, sorted by name and
// type, values sorted.
func fromRRs(rrs []dns.RR) []model.Record {
	type key struct{ name, typ string }
	sets := map[key]*model.Record{}
	var keys []key
	for _, rr := range rrs {
		h := rr.Header()
		var typ, value string
		switch r := rr.(type) {
		case *dns.A:
			typ, value = model.TypeA, r.A.String()
		case *dns.AAAA:
			typ, value = model.TypeAAAA, r.AAAA.String()
		case *dns.CNAME:
			typ, value = model.TypeCNAME, normalize(r.Target)
		case *dns.TXT:
			typ, value = model.TypeTXT, strings.Join(r.Txt, "")
		default:
			// Types sluice does not manage (SOA, NS, MX, CAA, ...): read so
			// the plan sees the name is someone else's, never written.
			typ = dns.TypeToString[h.Rrtype]
			if typ == "" {
				typ = fmt.Sprintf("TYPE%d", h.Rrtype)
			}
			value = strings.TrimSpace(strings.TrimPrefix(rr.String(), h.String()))
		}
		k := key{normalize(h.Name), typ}
		s := sets[k]
		if s == nil {
			s = &model.Record{Name: k.name, Type: typ, TTL: int64(h.Ttl)}
			sets[k] = s
			keys = append(keys, k)
		}
		if !slices.Contains(s.Values, value) {
			s.Values = append(s.Values, value)
		}
	}
	out := make([]model.Record, 0, len(keys))
	for _, k := range keys {
		s := sets[k]
		slices.Sort(s.Values)
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b model.Record) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Type, b.Type)) })
	return out
}

// normalize: lower case, no trailing dot.
func normalize(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// Apply implements dns.Provider: up to BatchesPerUpdate batches per
// UPDATE; an UPDATE that fails is retried batch by batch.
func (p *Provider) Apply(ctx context.Context, z model.Zone, batches []model.Batch) []error {
	errs := make([]error, len(batches))
	for start := 0; start < len(batches); start += p.opts.BatchesPerUpdate {
		end := min(start+p.opts.BatchesPerUpdate, len(batches))
		chunk := batches[start:end]
		err := p.update(ctx, z, chunk)
		if err == nil || len(chunk) == 1 {
			for i := range chunk {
				errs[start+i] = err
			}
			continue
		}
		p.log.Debug("rfc2136 update failed; retrying batch by batch", "zone", z.Name, "batches", len(chunk), "err", err)
		for i, b := range chunk {
			errs[start+i] = p.update(ctx, z, []model.Batch{b})
		}
	}
	return errs
}

// update sends one UPDATE with the prerequisites and changes of batches.
func (p *Provider) update(ctx context.Context, z model.Zone, batches []model.Batch) error {
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(z.Name))
	names := make([]string, 0, len(batches))
	for _, b := range batches {
		names = append(names, b.Name)
		for _, c := range b.Changes {
			if err := addChange(m, c); err != nil {
				return fmt.Errorf("updating %s: %w", b.Name, err)
			}
		}
	}
	p.sign(m)
	what := strings.Join(names, ", ")
	if len(names) > 3 {
		what = fmt.Sprintf("%s, ... (%d names)", strings.Join(names[:3], ", "), len(names))
	}
	conn, err := p.dial(ctx)
	if err != nil {
		return fmt.Errorf("updating %s: %w", what, err)
	}
	defer conn.Close()
	c := &dns.Client{Net: "tcp", TsigSecret: p.secrets(), Timeout: p.opts.Timeout}
	r, _, err := c.ExchangeWithConnContext(ctx, m, conn)
	if err != nil {
		return fmt.Errorf("updating %s in zone %s at %s: %w", what, z.Name, p.opts.Server, err)
	}
	switch r.Rcode {
	case dns.RcodeSuccess:
		return nil
	case dns.RcodeYXRrset, dns.RcodeNXRrset, dns.RcodeYXDomain, dns.RcodeNameError:
		return fmt.Errorf("updating %s in zone %s: server answered %s: %w", what, z.Name, dns.RcodeToString[r.Rcode], model.ErrConflict)
	case dns.RcodeNotAuth:
		return fmt.Errorf("updating %s in zone %s: server answered NOTAUTH (wrong TSIG key, or the zone's update-policy does not grant it)", what, z.Name)
	default:
		return fmt.Errorf("updating %s in zone %s: server answered %s", what, z.Name, rcode(r.Rcode))
	}
}

func rcode(c int) string {
	if s, ok := dns.RcodeToString[c]; ok {
		return s
	}
	return fmt.Sprintf("rcode %d", c)
}

// addChange adds one change: its prerequisite (Old exactly, or no set of
// New's type) and its update (delete the set, add New's records).
func addChange(m *dns.Msg, c model.Change) error {
	switch {
	case c.Old != nil:
		old, err := toRRs(*c.Old)
		if err != nil {
			return err
		}
		m.Used(old)
		m.RemoveRRset(old[:1])
	case c.New != nil:
		n, err := toRRs(*c.New)
		if err != nil {
			return err
		}
		m.RRsetNotUsed(n[:1])
	}
	if c.New != nil {
		n, err := toRRs(*c.New)
		if err != nil {
			return err
		}
		m.Insert(n)
	}
	return nil
}

// toRRs converts a record set to resource records (at least one).
func toRRs(r model.Record) ([]dns.RR, error) {
	if r.Alias != nil {
		return nil, fmt.Errorf("%s %s is an ALIAS: RFC2136 servers have no ALIAS records", r.Name, r.Type)
	}
	if len(r.Values) == 0 {
		return nil, fmt.Errorf("%s %s has no values", r.Name, r.Type)
	}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: dns.Fqdn(r.Name), Rrtype: t, Class: dns.ClassINET, Ttl: uint32(max(r.TTL, 0))}
	}
	out := make([]dns.RR, 0, len(r.Values))
	for _, v := range r.Values {
		switch r.Type {
		case model.TypeA:
			ip := net.ParseIP(v).To4()
			if ip == nil {
				return nil, fmt.Errorf("%s A %q is not an IPv4 address", r.Name, v)
			}
			out = append(out, &dns.A{Hdr: hdr(dns.TypeA), A: ip})
		case model.TypeAAAA:
			ip := net.ParseIP(v)
			if ip == nil || ip.To4() != nil {
				return nil, fmt.Errorf("%s AAAA %q is not an IPv6 address", r.Name, v)
			}
			out = append(out, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: ip})
		case model.TypeCNAME:
			out = append(out, &dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: dns.Fqdn(v)})
		case model.TypeTXT:
			out = append(out, &dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: split(v)})
		default:
			return nil, fmt.Errorf("%s: record type %q is not supported", r.Name, r.Type)
		}
	}
	return out, nil
}

// split cuts a TXT value into character strings of at most 255 bytes
// (values are in miekg/dns presentation form: an escape sequence is kept
// whole).
func split(v string) []string {
	var out []string
	for len(v) > 255 {
		cut := 255
		if i := strings.LastIndexByte(v[:cut], '\\'); i >= cut-4 {
			cut = i
		}
		out = append(out, v[:cut])
		v = v[cut:]
	}
	return append(out, v)
}
