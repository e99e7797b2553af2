package dns

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Policy says which changes a plan may make.
type Policy string

const (
	// PolicySync creates, updates and deletes owned records (the default).
	PolicySync Policy = "sync"
	// PolicyUpsertOnly creates and updates, never deletes.
	PolicyUpsertOnly Policy = "upsert-only"
	// PolicyCreateOnly only creates names that hold nothing yet.
	PolicyCreateOnly Policy = "create-only"
)

// ParsePolicy checks a --dns-policy value.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicySync, PolicyUpsertOnly, PolicyCreateOnly:
		return p, nil
	}
	return "", fmt.Errorf("parsing DNS policy %q: must be sync, upsert-only or create-only", s)
}

// Name states, for metrics and reports.
const (
	StatePublished = "published" // owned, holds what is wanted
	StatePending   = "pending"   // owned or free, a change is planned
	StateConflict  = "conflict"  // held by someone else: left alone
	StateKept      = "kept"      // wanted, but left as it is (unknown address, host conflict)
	StateUnwanted  = "unwanted"  // owned, no longer wanted, waiting out the delete delay
	StateDeleting  = "deleting"  // owned, delete planned
)

// PlanOptions configures Plan.
type PlanOptions struct {
	// OwnerID is --dns-owner-id. Required.
	OwnerID string
	// Keys sign the ownership records the plan writes and verify the
	// ones it reads: a record no key verifies is not ours. Required (nil:
	// nothing verifies, so nothing is ever ours).
	Keys   *Keys
	Policy Policy
	// AdoptUnsigned (--dns-adopt-unsigned) takes an unsigned ownership
	// record with our owner ID as ours and re-signs it, for wanted names
	// only: an unwanted unsigned name is never deleted. For the upgrade
	// from unsigned records; false: such a record is foreign.
	AdoptUnsigned bool
	// TTL of the ownership records, seconds.
	TTL int64
	// DeleteDelay is how long a name stays after it stopped being wanted.
	DeleteDelay time.Duration
	// UnwantedSeen is when this controller first saw each owned name
	// unwanted (by name). A name not in it is first seen at Now. The
	// delete delay runs from the later of this and the signed
	// unwanted-since stamp, so a stamp can delay a deletion but never
	// hasten it.
	UnwantedSeen map[string]time.Time
	// Now is the plan's time.
	Now time.Time
}

// Status is what the plan found for one name.
type Status struct {
	Name    string
	State   string
	Owner   Ref    // the owning Ingress (wanted names; unwanted owned names: the last one)
	Message string // for conflicts and pending deletions
	// DeleteAt is when an unwanted name may be deleted (StateUnwanted).
	DeleteAt time.Time
}

// Plan is the changes for one zone and the state of every name it saw.
type Plan struct {
	Batches  []Batch
	Statuses []Status
}

// MakePlan compares the wanted names of zone (from Desired) with the
// zone's current records and returns the batches that bring the owned
// names where they should be. A name is ours only while its ownership
// record carries our owner ID and a signature one of the Keys verifies,
// and it holds no record type sluice does not manage (MX, NS, SRV, CAA,
// TXT, ...; the zone's own SOA and NS and any type at the apex aside).
// It never touches any other name, and deletes an owned name only once
// it has been unwanted for DeleteDelay. It is pure.
func MakePlan(wants []Want, current []Record, o PlanOptions) Plan {
	z := readZone(current)
	var p Plan
	wanted := map[string]bool{}
	for _, w := range wants {
		wanted[w.Name] = true
		p.want(w, z, o)
	}
	var unwanted []string
	for n := range z.txt {
		if !wanted[n] {
			unwanted = append(unwanted, n)
		}
	}
	slices.Sort(unwanted)
	for _, n := range unwanted {
		p.unwant(n, z, o)
	}
	slices.SortFunc(p.Statuses, func(a, b Status) int { return cmp.Compare(a.Name, b.Name) })
	return p
}

// zoneState is a zone's records sorted for the plan.
type zoneState struct {
	cur   map[string][]Record // name → its A, AAAA, CNAME sets, by type
	txt   map[string]Record   // owned name → its ownership TXT set
	other map[string][]string // name → the types sluice does not manage
	apex  map[string]bool     // names holding an SOA record
}

func readZone(current []Record) zoneState {
	z := zoneState{cur: map[string][]Record{}, txt: map[string]Record{}, other: map[string][]string{}, apex: map[string]bool{}}
	for _, r := range current {
		switch r.Type {
		case TypeA, TypeAAAA, TypeCNAME:
			z.cur[r.Name] = append(z.cur[r.Name], r)
		case TypeTXT:
			if n, ok := OwnedName(r.Name); ok {
				z.txt[n] = r
			} else {
				z.other[r.Name] = append(z.other[r.Name], r.Type)
			}
		case "SOA":
			z.apex[r.Name] = true
		case "RRSIG", "NSEC", "NSEC3":
			// DNSSEC signs every name, sluice's too: not someone else's data.
		default:
			z.other[r.Name] = append(z.other[r.Name], r.Type)
		}
	}
	for n := range z.cur {
		slices.SortFunc(z.cur[n], func(a, b Record) int { return cmp.Compare(a.Type, b.Type) })
	}
	return z
}

// foreignTypes are the types at name sluice does not manage, sorted; none
// at the zone apex, which always holds the zone's SOA and NS records
// (and usually MX, TXT, CAA) and is published only with --dns-allow-apex.
func (z zoneState) foreignTypes(name string) []string {
	if z.apex[name] || len(z.other[name]) == 0 {
		return nil
	}
	return sortedUnique(z.other[name])
}

// delegation returns the closest name above name and below the zone's
// apex that holds NS records: a subzone delegated elsewhere, whose names
// this zone does not serve. "" when there is none.
func (z zoneState) delegation(name, apex string) string {
	n := strings.TrimPrefix(name, "*.")
	for {
		_, parent, ok := strings.Cut(n, ".")
		if !ok || parent == apex || z.apex[parent] {
			return ""
		}
		if slices.Contains(z.other[parent], "NS") {
			return parent
		}
		n = parent
	}
}

// Who holds a name, as its ownership record says.
const (
	heldAbsent   = "absent"   // no ownership record
	heldForeign  = "foreign"  // another owner's, or no sluice record
	heldForged   = "forged"   // our owner ID, a signature no key verifies
	heldUnsigned = "unsigned" // our owner ID, no signature (before signing)
	heldOurs     = "ours"     // our owner ID, signed by one of our keys
)

// ownership reads the ownership record t of name.
func ownership(name string, t Record, present bool, o PlanOptions) (Owner, string) {
	if !present {
		return Owner{}, heldAbsent
	}
	if len(t.Values) != 1 {
		return Owner{}, heldForeign
	}
	own, err := ParseOwner(t.Values[0])
	switch {
	case err != nil || own.ID != o.OwnerID:
		return own, heldForeign
	case own.Sig == "":
		return own, heldUnsigned
	case !o.Keys.Verify(name, own):
		return own, heldForged
	}
	return own, heldOurs
}

func (p *Plan) want(w Want, z zoneState, o PlanOptions) {
	cur := z.cur[w.Name]
	t, hasTXT := z.txt[w.Name]
	own, who := ownership(w.Name, t, hasTXT, o)
	adopt := who == heldUnsigned && o.AdoptUnsigned
	st := Status{Name: w.Name, Owner: w.Owner}
	if types := z.foreignTypes(w.Name); len(types) > 0 {
		st.State = StateConflict
		st.Message = fmt.Sprintf("%s holds %s records, which sluice does not manage: left untouched", w.Name, strings.Join(types, ", "))
		p.Statuses = append(p.Statuses, st)
		return
	}
	if cut := z.delegation(w.Name, w.Zone.Name); cut != "" {
		st.State = StateConflict
		st.Message = fmt.Sprintf("%s is below %s, which is delegated to other name servers (NS records): left untouched", w.Name, cut)
		p.Statuses = append(p.Statuses, st)
		return
	}
	if who == heldForeign || who == heldForged || (who == heldUnsigned && !adopt) || (who == heldAbsent && len(cur) > 0) {
		st.State = StateConflict
		st.Message = foreignMessage(w.Name, who, own)
		p.Statuses = append(p.Statuses, st)
		return
	}
	// held: the name's records stay as they are (addresses unknown, host
	// in conflict; create-only and the name holds records already).
	held := w.Keep || (o.Policy == PolicyCreateOnly && len(cur) > 0)
	b := Batch{Name: w.Name}
	if !held {
		b.Changes = append(b.Changes, recordChanges(cur, w.Records)...)
	}
	// A held name's ownership record is still rewritten when it is
	// adopted, or signed by a key that no longer signs (rotation), so it
	// stays ours once the old key is gone.
	resign := adopt || (who == heldOurs && o.Keys.Sign(w.Name, own).Sig != own.Sig)
	if !held || resign {
		wantTXT := Record{Name: OwnerName(w.Name), Type: TypeTXT, TTL: o.TTL,
			Values: []string{o.Keys.Sign(w.Name, Owner{ID: o.OwnerID, Ingress: w.Owner}).Format()}}
		if !hasTXT {
			b.Changes = append(b.Changes, Change{New: &wantTXT})
		} else if !equalRecord(t, wantTXT) {
			old := t
			b.Changes = append(b.Changes, Change{Old: &old, New: &wantTXT})
		}
	}
	switch {
	case w.Keep:
		st.State = StateKept
	case len(b.Changes) > 0:
		st.State = StatePending
	default:
		st.State = StatePublished // create-only never updates what it created
	}
	if len(b.Changes) > 0 {
		p.Batches = append(p.Batches, b)
	}
	p.Statuses = append(p.Statuses, st)
}

func foreignMessage(name, who string, own Owner) string {
	switch {
	case who == heldAbsent:
		return fmt.Sprintf("%s holds records sluice did not create (no %s record): left untouched", name, OwnerName(name))
	case who == heldForged:
		return fmt.Sprintf("%s has an ownership record at %s with this sluice's owner ID but a signature none of its ownership keys verifies (forged, or signed with a key no longer in --dns-ownership-key-file): left untouched", name, OwnerName(name))
	case who == heldUnsigned:
		return fmt.Sprintf("%s has an unsigned ownership record at %s with this sluice's owner ID (written before ownership records were signed, or forged): left untouched; run the controller once with --dns-adopt-unsigned to re-sign the records it made", name, OwnerName(name))
	case own.ID != "":
		return fmt.Sprintf("%s is owned by another sluice (owner %q, %s): left untouched", name, own.ID, own.Ingress.Object())
	default:
		return fmt.Sprintf("%s has a TXT record at %s that is not this sluice's: left untouched", name, OwnerName(name))
	}
}

// recordChanges turns cur into want: the sets of a type in both are
// updated when they differ, the others deleted or created.
func recordChanges(cur, want []Record) []Change {
	var out []Change
	for i := range cur {
		c := cur[i]
		j := slices.IndexFunc(want, func(w Record) bool { return w.Type == c.Type })
		switch {
		case j < 0:
			out = append(out, Change{Old: &c})
		case !equalRecord(c, want[j]):
			w := want[j]
			out = append(out, Change{Old: &c, New: &w})
		}
	}
	for i := range want {
		w := want[i]
		if !slices.ContainsFunc(cur, func(c Record) bool { return c.Type == w.Type }) {
			out = append(out, Change{New: &w})
		}
	}
	// Deletions first: a CNAME cannot be added beside the A it replaces.
	slices.SortStableFunc(out, func(a, b Change) int { return cmp.Compare(rank(a), rank(b)) })
	return out
}

func rank(c Change) int {
	if c.New == nil {
		return 0
	}
	return 1
}

// unwant handles an owned name no Ingress of ours wants any more: its
// ownership record is stamped with the time it became unwanted, and once
// DeleteDelay has passed since (the later of the signed stamp and when
// this controller first saw it unwanted), the name's records and
// ownership record are deleted (PolicySync only).
func (p *Plan) unwant(name string, z zoneState, o PlanOptions) {
	cur, t := z.cur[name], z.txt[name]
	own, who := ownership(name, t, true, o)
	switch who {
	case heldOurs:
	case heldUnsigned:
		// Possibly ours from before signing, possibly forged: never
		// deleted on the word of an unsigned record. No Ingress named:
		// the record's fields are not to be trusted.
		p.Statuses = append(p.Statuses, Status{Name: name, State: StateConflict,
			Message: fmt.Sprintf("%s has an unsigned ownership record with this sluice's owner ID and nothing of ours wants it: not deleted (adoption re-signs wanted names only); delete %s and its records by hand if sluice made them", name, OwnerName(name))})
		return
	default:
		return // another owner's name, or forged: not ours to report
	}
	st := Status{Name: name, Owner: own.Ingress, State: StateUnwanted}
	if types := z.foreignTypes(name); len(types) > 0 {
		st.State = StateConflict
		st.Message = fmt.Sprintf("%s is wanted by no Ingress or Gateway API object any more, but holds %s records, which sluice does not manage: not deleted", name, strings.Join(types, ", "))
		p.Statuses = append(p.Statuses, st)
		return
	}
	if o.Policy != PolicySync {
		st.Message = fmt.Sprintf("%s is wanted by no Ingress or Gateway API object any more; policy %s never deletes it", name, o.Policy)
		p.Statuses = append(p.Statuses, st)
		return
	}
	seen := o.Now
	if t0, ok := o.UnwantedSeen[name]; ok && t0.Before(seen) {
		seen = t0
	}
	since := seen
	if own.UnwantedSince.After(since) {
		since = own.UnwantedSince
	}
	st.DeleteAt = since.Add(o.DeleteDelay)
	if o.Now.Before(st.DeleteAt) {
		// Stamp the record, or re-sign it with the signing key (after a
		// key rotation), so it still verifies once the old key is gone.
		stamped := own
		if stamped.UnwantedSince.IsZero() {
			stamped.UnwantedSince = seen
		}
		if text := o.Keys.Sign(name, stamped).Format(); text != t.Values[0] {
			old := t
			p.Batches = append(p.Batches, Batch{Name: name, Changes: []Change{{Old: &old, New: &Record{
				Name: t.Name, Type: TypeTXT, TTL: o.TTL, Values: []string{text}}}}})
		}
		st.Message = fmt.Sprintf("%s is wanted by no Ingress or Gateway API object any more (last: %s); it is deleted at %s, after the delete delay",
			name, own.Ingress, st.DeleteAt.UTC().Format(time.RFC3339))
		p.Statuses = append(p.Statuses, st)
		return
	}
	b := Batch{Name: name}
	for i := range cur {
		c := cur[i]
		b.Changes = append(b.Changes, Change{Old: &c})
	}
	old := t
	b.Changes = append(b.Changes, Change{Old: &old})
	p.Batches = append(p.Batches, b)
	st.State = StateDeleting
	st.Message = fmt.Sprintf("%s was wanted by no Ingress or Gateway API object for the delete delay (last: %s): deleting", name, own.Ingress)
	p.Statuses = append(p.Statuses, st)
}

// Describe renders a batch for logs and dry runs.
func (b Batch) Describe() string {
	var parts []string
	for _, c := range b.Changes {
		switch {
		case c.Old == nil:
			parts = append(parts, "create "+c.New.String())
		case c.New == nil:
			parts = append(parts, "delete "+c.Old.String())
		default:
			parts = append(parts, "update "+c.Old.String()+" -> "+c.New.String())
		}
	}
	return strings.Join(parts, "; ")
}

// String renders a record set in zone-file style.
func (r Record) String() string {
	if r.Alias != nil {
		return fmt.Sprintf("%s ALIAS %s %s (%s)", r.Name, r.Type, r.Alias.DNSName, r.Alias.HostedZoneID)
	}
	return fmt.Sprintf("%s %d %s %s", r.Name, r.TTL, r.Type, strings.Join(quoteTXT(r), " "))
}

func quoteTXT(r Record) []string {
	if r.Type != TypeTXT {
		return r.Values
	}
	out := make([]string, len(r.Values))
	for i, v := range r.Values {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}
