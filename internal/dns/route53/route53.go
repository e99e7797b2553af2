// Package route53 is the dns.Provider for Amazon Route53, on
// aws-sdk-go-v2. It sits at the end of the DNS flow, between sluice's DNS
// planner and AWS:
//
//	desired records ─► plan of owned changes ─► Provider.Apply ─► Route53 API
//
// Route53 allows 5 API requests a second per account: every call, retries
// included, waits on one token bucket (Options.RequestsPerSecond), and
// Throttling and PriorRequestNotComplete answers are retried with
// full-jitter exponential backoff. Changes go out in as few
// ChangeResourceRecordSets requests as Route53's limits allow (1000
// records, 32,000 characters of values), several dns.Batch per request; a
// request Route53 rejects is split (in halves, down to single batches) and
// sent again, so that one bad record does not hold up the others. Apply returns once the changes
// are INSYNC (GetChange).
//
// The compare-and-swap of dns.Change is Route53's own: a change with Old
// becomes DELETE(Old exactly) + CREATE(New) in one atomic change batch,
// and a change without Old a CREATE. Route53 rejects the batch when the
// zone no longer holds Old, or already holds New's name and type: that
// becomes dns.ErrConflict.
//
// Only simple record sets of types A, AAAA, CNAME and TXT are read;
// weighted, latency and other routing-policy sets (with a set identifier)
// are left out of Records and never written.
package route53

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"

	"sluice.dev/sluice/internal/dns"
)

// Options configures a Provider.
type Options struct {
	// Endpoint overrides the Route53 endpoint URL (the SDK's
	// BaseEndpoint), e.g. an awsfake's URL. Empty: AWS (or
	// AWS_ENDPOINT_URL_ROUTE_53 if set).
	Endpoint string
	// Region signs the requests (Route53 is global). Default us-east-1.
	Region string
	// Zones are the hosted zones to manage, from --dns-zone: domain names
	// ("example.com") or hosted-zone IDs ("Z0123456789ABC" or
	// "/hostedzone/Z0123456789ABC"). A name must match exactly one hosted
	// zone of the account; give the ID when a public and a private zone
	// share it. Required.
	Zones []string
	// RequestsPerSecond bounds every Route53 API call, retries included,
	// shared by all calls of the provider. Default 5: Route53's limit per
	// account.
	RequestsPerSecond float64
	// MaxAttempts is the number of attempts per call, retries included.
	// Default 10.
	MaxAttempts int
	// RetryBase is the backoff before the first retry; it doubles per
	// attempt up to MaxBackoff, each delay drawn uniformly below it (full
	// jitter). Defaults 200ms and 20s.
	RetryBase, MaxBackoff time.Duration
	// PollInterval is how often, at most, Apply asks GetChange whether
	// its changes are INSYNC: the first poll comes after an eighth of it,
	// the interval doubling up to it. Default 2s.
	PollInterval time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
	// HTTPClient sends the requests. Nil: the SDK's default client.
	HTTPClient aws.HTTPClient
	// Credentials overrides the standard credential chain (IRSA web
	// identity, environment, shared config, instance role); tests use
	// credentials.NewStaticCredentialsProvider. Nil: the standard chain.
	Credentials aws.CredentialsProvider
}

func (o *Options) defaults() {
	o.Region = cmp.Or(o.Region, "us-east-1")
	if o.RequestsPerSecond <= 0 {
		o.RequestsPerSecond = 5
	}
	o.MaxAttempts = cmp.Or(o.MaxAttempts, 10)
	o.RetryBase = cmp.Or(o.RetryBase, 200*time.Millisecond)
	o.MaxBackoff = cmp.Or(o.MaxBackoff, 20*time.Second)
	o.PollInterval = cmp.Or(o.PollInterval, 2*time.Second)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// Provider implements dns.Provider over the Route53 API. Safe for
// concurrent use.
type Provider struct {
	opts   Options
	client *route53.Client
	log    *slog.Logger

	mu    sync.Mutex
	zones []dns.Zone // resolved once, by the first successful Zones
}

var _ dns.Provider = (*Provider)(nil)

// ErrInvalid is returned (wrapped) for bad options and for records
// Route53 cannot hold.
var ErrInvalid = errors.New("invalid route53 input")

// New loads the AWS configuration and returns a Provider. No API call is
// made: zones are resolved by the first Zones call.
func New(ctx context.Context, o Options) (*Provider, error) {
	o.defaults()
	if len(o.Zones) == 0 {
		return nil, fmt.Errorf("creating route53 provider: no zones: %w", ErrInvalid)
	}
	if o.MaxAttempts < 1 || o.RetryBase <= 0 || o.MaxBackoff < o.RetryBase || o.PollInterval <= 0 {
		return nil, fmt.Errorf("creating route53 provider: max attempts %d, retry base %v, max backoff %v, poll interval %v out of range: %w",
			o.MaxAttempts, o.RetryBase, o.MaxBackoff, o.PollInterval, ErrInvalid)
	}
	for _, z := range o.Zones {
		if _, _, err := zoneRef(z); err != nil {
			return nil, fmt.Errorf("creating route53 provider: %w", err)
		}
	}
	c, err := newClient(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("creating route53 provider: %w", err)
	}
	return &Provider{opts: o, client: c, log: o.Logger}, nil
}

var zoneIDPattern = regexp.MustCompile(`^Z[A-Z0-9]{1,31}$`)

// zoneRef reads a --dns-zone value: a hosted-zone ID (id set) or a domain
// name (name set, normalised).
func zoneRef(s string) (id, name string, err error) {
	if t := strings.TrimPrefix(s, "/hostedzone/"); zoneIDPattern.MatchString(t) {
		return t, "", nil
	}
	n := normalizeName(s)
	if n == "" || len(n) > 253 || strings.Contains(n, "..") || strings.ContainsAny(n, " /\\\t\r\n") {
		return "", "", fmt.Errorf("zone %q: want a domain name or a hosted-zone ID: %w", s, ErrInvalid)
	}
	return "", n, nil
}

// Zones implements dns.Provider: the configured zones resolved to hosted
// zones, in the order given. Resolved once; a failure is retried by the
// next call.
func (p *Provider) Zones(ctx context.Context) ([]dns.Zone, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.zones != nil {
		return slices.Clone(p.zones), nil
	}
	var zones []dns.Zone
	for _, ref := range p.opts.Zones {
		z, err := p.resolve(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("resolving route53 zone %q: %w", ref, err)
		}
		if !slices.Contains(zones, z) {
			zones = append(zones, z)
		}
	}
	p.zones = zones
	return slices.Clone(zones), nil
}

// resolve finds one configured zone: GetHostedZone for an ID,
// ListHostedZonesByName for a name.
func (p *Provider) resolve(ctx context.Context, ref string) (dns.Zone, error) {
	id, name, _ := zoneRef(ref)
	if id != "" {
		out, err := p.client.GetHostedZone(ctx, &route53.GetHostedZoneInput{Id: aws.String(id)})
		if err != nil {
			return dns.Zone{}, fmt.Errorf("getting hosted zone: %w", err)
		}
		return dns.Zone{ID: id, Name: normalizeName(aws.ToString(out.HostedZone.Name))}, nil
	}
	var found []dns.Zone
	in := &route53.ListHostedZonesByNameInput{DNSName: aws.String(name), MaxItems: aws.Int32(100)}
	for {
		out, err := p.client.ListHostedZonesByName(ctx, in)
		if err != nil {
			return dns.Zone{}, fmt.Errorf("listing hosted zones by name: %w", err)
		}
		more := out.IsTruncated
		for _, hz := range out.HostedZones {
			n := normalizeName(aws.ToString(hz.Name))
			if n != name {
				more = false // sorted by name: past it
				break
			}
			found = append(found, dns.Zone{ID: strings.TrimPrefix(aws.ToString(hz.Id), "/hostedzone/"), Name: n})
		}
		if !more {
			break
		}
		in.DNSName, in.HostedZoneId = out.NextDNSName, out.NextHostedZoneId
	}
	switch len(found) {
	case 0:
		return dns.Zone{}, fmt.Errorf("no hosted zone named %s: %w", name, ErrInvalid)
	case 1:
		return found[0], nil
	default:
		var ids []string
		for _, z := range found {
			ids = append(ids, z.ID)
		}
		return dns.Zone{}, fmt.Errorf("%d hosted zones named %s (%s): give the ID: %w", len(found), name, strings.Join(ids, ", "), ErrInvalid)
	}
}

// Records implements dns.Provider: every record set of the zone, paged
// through ListResourceRecordSets.
func (p *Provider) Records(ctx context.Context, z dns.Zone) ([]dns.Record, error) {
	var out []dns.Record
	in := &route53.ListResourceRecordSetsInput{HostedZoneId: aws.String(z.ID), MaxItems: aws.Int32(300)}
	for {
		page, err := p.client.ListResourceRecordSets(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing route53 records of %s: %w", z.Name, err)
		}
		for _, rs := range page.ResourceRecordSets {
			out = append(out, fromSet(rs))
		}
		if !page.IsTruncated {
			break
		}
		in.StartRecordName, in.StartRecordType, in.StartRecordIdentifier = page.NextRecordName, page.NextRecordType, page.NextRecordIdentifier
	}
	return out, nil
}

// fromSet converts a listed record set into a dns.Record. A set with a
// routing policy (weighted, latency, failover, ...) becomes type
// TYPE/policy: someone else's routing at that name, which sluice never
// writes and which makes the name foreign.
func fromSet(rs types.ResourceRecordSet) dns.Record {
	r := dns.Record{Name: normalizeName(aws.ToString(rs.Name)), Type: string(rs.Type), TTL: aws.ToInt64(rs.TTL)}
	switch {
	case rs.SetIdentifier != nil:
		r.Type += "/policy"
		r.Values = []string{aws.ToString(rs.SetIdentifier)}
		return r
	case r.Type != dns.TypeA && r.Type != dns.TypeAAAA && r.Type != dns.TypeCNAME && r.Type != dns.TypeTXT && rs.AliasTarget != nil:
		r.Values = []string{"ALIAS " + normalizeName(aws.ToString(rs.AliasTarget.DNSName))}
		return r
	case rs.AliasTarget != nil:
		r.TTL = 0
		r.Alias = &dns.Alias{
			DNSName:      normalizeName(aws.ToString(rs.AliasTarget.DNSName)),
			HostedZoneID: aws.ToString(rs.AliasTarget.HostedZoneId),
		}
		return r
	}
	for _, v := range rs.ResourceRecords {
		s := aws.ToString(v.Value)
		switch r.Type {
		case dns.TypeTXT:
			s = unquoteTXT(s)
		case dns.TypeCNAME:
			s = normalizeName(s)
		}
		r.Values = append(r.Values, s)
	}
	slices.Sort(r.Values)
	return r
}

// normalizeName turns a Route53 name ("\052.Example.com.") into the dns
// package's form ("*.example.com"): \ooo escapes decoded, lower case, no
// trailing dot.
func normalizeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			c = (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			i += 3
		} else if c == '\\' && i+1 < len(s) {
			c = s[i+1]
			i++
		}
		b.WriteByte(c)
	}
	return strings.ToLower(strings.TrimSuffix(b.String(), "."))
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// quoteTXT makes one TXT value into Route53's form: character strings of
// at most 255 bytes, quoted and escaped, separated by spaces.
func quoteTXT(s string) string {
	var parts []string
	for len(s) > 255 || len(parts) == 0 {
		n := min(len(s), 255)
		parts = append(parts, s[:n])
		s = s[n:]
	}
	if s != "" {
		parts = append(parts, s)
	}
	for i, p := range parts {
		var b strings.Builder
		b.WriteByte('"')
		for j := 0; j < len(p); j++ {
			switch c := p[j]; {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c < 0x20 || c > 0x7e:
				fmt.Fprintf(&b, "\\%03o", c)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
		parts[i] = b.String()
	}
	return strings.Join(parts, " ")
}

// unquoteTXT reads a Route53 TXT value back: its character strings,
// unescaped and concatenated. Text outside quotes is kept as is.
func unquoteTXT(s string) string {
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			in = !in
		case c == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]):
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
		case c == '\\' && i+1 < len(s):
			b.WriteByte(s[i+1])
			i++
		case c == ' ' && !in:
			// between character strings
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
