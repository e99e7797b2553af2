// Package dns holds sluice's DNS model: the record sets it wants for the
// hosts of the Ingresses it serves, and the small interface its DNS
// providers (RFC2136, Route53) implement. It sits at the end of the third
// data flow:
//
//	ingresses + binding addresses ─► desired records (pure) ─► plan vs zone (owned records only) ─► Provider.Apply
//
// A name is owned only through an ownership TXT record signed with one of
// the controller's keys (Keys): the owner ID alone is public, so anybody
// who may write TXT records could copy it. Names holding record types
// sluice does not write are someone else's.
//
// Names are lower-case fully qualified names without the trailing dot
// ("www.example.com", "*.apps.example.com").
package dns

import (
	"context"
	"errors"
)

// Record types sluice writes.
const (
	TypeA     = "A"
	TypeAAAA  = "AAAA"
	TypeCNAME = "CNAME"
	TypeTXT   = "TXT"
)

// Record is one resource record set: every record of one name and type.
type Record struct {
	// Name is the owner name: lower case, fully qualified, no trailing dot.
	Name string
	// Type is A, AAAA, CNAME or TXT for the sets sluice writes; any other
	// type ("MX", "NS", ...) for sets it only reads.
	Type string
	// TTL in seconds. Ignored for an Alias (Route53 uses the target's).
	TTL int64
	// Values, sorted: addresses (A, AAAA), one target name (CNAME, no
	// trailing dot) or character strings, unquoted (TXT). Empty when Alias
	// is set.
	Values []string
	// Alias, for Route53 only, makes an A or AAAA set an ALIAS to an AWS
	// load balancer. Nil: an ordinary record set.
	Alias *Alias
}

// Alias is a Route53 ALIAS target.
type Alias struct {
	// DNSName is the load balancer's DNS name, lower case, no trailing dot.
	DNSName string
	// HostedZoneID is the load balancer's canonical hosted zone ID.
	HostedZoneID string
}

// Zone is one DNS zone a provider manages.
type Zone struct {
	// ID identifies the zone to the provider: the Route53 hosted-zone ID
	// ("Z123..."), or the zone name for RFC2136.
	ID string
	// Name is the zone's apex: lower case, no trailing dot.
	Name string
}

// Change replaces one record set. Old is what the zone held when the plan
// was made (nil: create); New is what it should hold (nil: delete).
// Providers apply a change only while the zone still holds Old exactly:
// that is the compare-and-swap that keeps two writers from overwriting
// each other.
type Change struct {
	Old *Record
	New *Record
}

// Batch is every change for one owned name: its records and its ownership
// TXT record. A provider applies a batch atomically (one RFC2136 UPDATE
// with prerequisites, one Route53 change batch) or not at all. Providers
// may send several batches in one request, but one failing batch must not
// hold up the others: on a failure they split and retry batch by batch.
type Batch struct {
	// Name is the owned name the batch is about (for errors and Events).
	Name    string
	Changes []Change
}

// ErrConflict is returned (wrapped) for a batch whose Old records no longer
// match the zone: someone else wrote the name since it was read. The
// caller reports it and plans again from fresh zone contents.
var ErrConflict = errors.New("dns records changed since they were read")

// Provider reads and writes the record sets of DNS zones. Implementations
// are safe for concurrent use, retry throttling themselves with backoff,
// and wrap every error with what they were doing.
type Provider interface {
	// Zones returns the zones the provider was configured with, resolved
	// (Route53: names to hosted-zone IDs).
	Zones(ctx context.Context) ([]Zone, error)
	// Records returns every record set of the zone, names normalised as
	// in Record. Sets of other types than the ones above (SOA, NS, MX,
	// CAA, ...; Route53 sets with a routing policy as TYPE/policy) come
	// with their type and values in presentation form: sluice never
	// writes them, but a name holding them is not sluice's.
	Records(ctx context.Context, z Zone) ([]Record, error)
	// Apply applies the batches in z and returns one error per batch, in
	// order: nil when the batch was applied (and, for Route53, is INSYNC),
	// an error wrapping ErrConflict when its Old records did not match, or
	// another error.
	Apply(ctx context.Context, z Zone, batches []Batch) []error
}
