// Package dnstest is an in-memory dns.Provider for unit tests: zones of
// record sets with the compare-and-swap semantics of the real providers
// (a batch applies only while every Old record matches the zone exactly,
// and a create only where the name holds no set of that type), and
// injectable failures. It stands in for RFC2136 and Route53 in the tests
// of the DNS controller.
package dnstest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"sluice.dev/sluice/internal/dns"
)

// Memory is an in-memory dns.Provider. Safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	zones   []dns.Zone
	records map[string][]dns.Record // zone ID → record sets
	fail    error
	applies int
	batches int
}

var _ dns.Provider = (*Memory)(nil)

// New returns a Memory serving empty zones with the given names (the
// zone ID is the name).
func New(zones ...string) *Memory {
	m := &Memory{records: map[string][]dns.Record{}}
	for _, z := range zones {
		m.zones = append(m.zones, dns.Zone{ID: z, Name: z})
	}
	return m
}

// Fail makes every call return err (nil: succeed again): a provider that
// is down.
func (m *Memory) Fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

// Set puts a record set into zone, replacing any of its name and type:
// someone else writing the zone.
func (m *Memory) Set(zone string, r dns.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[zone] = append(slices.DeleteFunc(m.records[zone], func(c dns.Record) bool { return same(c, r) }), clone(r))
}

// Delete removes the set of name and type from zone.
func (m *Memory) Delete(zone, name, typ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[zone] = slices.DeleteFunc(m.records[zone], func(c dns.Record) bool { return c.Name == name && c.Type == typ })
}

// Get returns the set of name and type in zone, or nil.
func (m *Memory) Get(zone, name, typ string) *dns.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.records[zone] {
		if r.Name == name && r.Type == typ {
			c := clone(r)
			return &c
		}
	}
	return nil
}

// Calls returns how many Apply calls and batches were made.
func (m *Memory) Calls() (applies, batches int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applies, m.batches
}

// Zones implements dns.Provider.
func (m *Memory) Zones(context.Context) ([]dns.Zone, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, fmt.Errorf("listing zones: %w", m.fail)
	}
	return slices.Clone(m.zones), nil
}

// Records implements dns.Provider.
func (m *Memory) Records(_ context.Context, z dns.Zone) ([]dns.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, fmt.Errorf("reading zone %s: %w", z.Name, m.fail)
	}
	out := make([]dns.Record, 0, len(m.records[z.ID]))
	for _, r := range m.records[z.ID] {
		out = append(out, clone(r))
	}
	slices.SortFunc(out, func(a, b dns.Record) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Type, b.Type)) })
	return out, nil
}

// Apply implements dns.Provider: each batch atomically, with the
// compare-and-swap on its Old records.
func (m *Memory) Apply(_ context.Context, z dns.Zone, batches []dns.Batch) []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applies++
	errs := make([]error, len(batches))
	for i, b := range batches {
		m.batches++
		if m.fail != nil {
			errs[i] = fmt.Errorf("applying changes to %s: %w", b.Name, m.fail)
			continue
		}
		next, err := apply(m.records[z.ID], b)
		if err != nil {
			errs[i] = fmt.Errorf("applying changes to %s: %w", b.Name, err)
			continue
		}
		m.records[z.ID] = next
	}
	return errs
}

// errCNAME is the server's refusal of a CNAME beside other data.
var errCNAME = errors.New("a CNAME cannot share its name with other records")

func apply(cur []dns.Record, b dns.Batch) ([]dns.Record, error) {
	next := slices.Clone(cur)
	for _, c := range b.Changes {
		if c.Old != nil {
			i := slices.IndexFunc(next, func(r dns.Record) bool { return same(r, *c.Old) })
			if i < 0 || !equal(next[i], *c.Old) {
				return nil, fmt.Errorf("%s %s: %w", c.Old.Name, c.Old.Type, dns.ErrConflict)
			}
			next = slices.Delete(next, i, i+1)
		}
		if c.New != nil {
			if slices.ContainsFunc(next, func(r dns.Record) bool { return same(r, *c.New) }) {
				return nil, fmt.Errorf("%s %s exists: %w", c.New.Name, c.New.Type, dns.ErrConflict)
			}
			if slices.ContainsFunc(next, func(r dns.Record) bool {
				return r.Name == c.New.Name && (r.Type == dns.TypeCNAME) != (c.New.Type == dns.TypeCNAME)
			}) {
				return nil, fmt.Errorf("%s: %w", c.New.Name, errCNAME)
			}
			next = append(next, clone(*c.New))
		}
	}
	return next, nil
}

func same(a, b dns.Record) bool { return a.Name == b.Name && a.Type == b.Type }

func equal(a, b dns.Record) bool {
	if !slices.Equal(a.Values, b.Values) || (a.Alias == nil) != (b.Alias == nil) {
		return false
	}
	if a.Alias != nil {
		return *a.Alias == *b.Alias
	}
	return a.TTL == b.TTL
}

func clone(r dns.Record) dns.Record {
	r.Values = slices.Clone(r.Values)
	if r.Alias != nil {
		a := *r.Alias
		r.Alias = &a
	}
	return r
}
