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
	Policy  Policy
	// TTL of the ownership records, seconds.
	TTL int64
	// DeleteDelay is how long a name stays after it stopped being wanted.
	DeleteDelay time.Duration
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
// names where they should be. It never touches a name whose ownership
// record is missing or names another owner, and deletes an owned name
// only once it has been unwanted for DeleteDelay, as recorded in its
// ownership record. It is pure.
func MakePlan(wants []Want, current []Record, o PlanOptions) Plan {
	cur := map[string][]Record{} // name → A, AAAA, CNAME sets
	txt := map[string]Record{}   // owned name → its ownership TXT set
	for _, r := range current {
		if r.Type == TypeTXT {
			if n, ok := OwnedName(r.Name); ok {
				txt[n] = r
			}
			continue
		}
		cur[r.Name] = append(cur[r.Name], r)
	}
	for n := range cur {
		slices.SortFunc(cur[n], func(a, b Record) int { return cmp.Compare(a.Type, b.Type) })
	}
	var p Plan
	wanted := map[string]bool{}
	for _, w := range wants {
		wanted[w.Name] = true
		p.want(w, cur[w.Name], txt, o)
	}
	var unwanted []string
	for n := range txt {
		if !wanted[n] {
			unwanted = append(unwanted, n)
		}
	}
	slices.Sort(unwanted)
	for _, n := range unwanted {
		p.unwant(n, cur[n], txt[n], o)
	}
	slices.SortFunc(p.Statuses, func(a, b Status) int { return cmp.Compare(a.Name, b.Name) })
	return p
}

// ownership reads the ownership record of a name: ours (with its
// content), foreign (someone else's or not ours to parse) or absent.
func ownership(t Record, present bool, id string) (Owner, string) {
	if !present {
		return Owner{}, "absent"
	}
	if len(t.Values) != 1 {
		return Owner{}, "foreign"
	}
	own, err := ParseOwner(t.Values[0])
	if err != nil || own.ID != id {
		return own, "foreign"
	}
	return own, "ours"
}

func (p *Plan) want(w Want, cur []Record, txts map[string]Record, o PlanOptions) {
	t, hasTXT := txts[w.Name]
	own, who := ownership(t, hasTXT, o.OwnerID)
	st := Status{Name: w.Name, Owner: w.Owner}
	switch {
	case who == "foreign" || (who == "absent" && len(cur) > 0):
		st.State = StateConflict
		st.Message = foreignMessage(w.Name, who, own)
		p.Statuses = append(p.Statuses, st)
		return
	case w.Keep:
		st.State = StateKept
		p.Statuses = append(p.Statuses, st)
		return
	case o.Policy == PolicyCreateOnly && (who == "ours" && len(cur) > 0):
		st.State = StatePublished // created once; create-only never updates
		p.Statuses = append(p.Statuses, st)
		return
	}
	b := Batch{Name: w.Name}
	b.Changes = append(b.Changes, recordChanges(cur, w.Records)...)
	wantTXT := Record{Name: OwnerName(w.Name), Type: TypeTXT, TTL: o.TTL,
		Values: []string{Owner{ID: o.OwnerID, Ingress: w.Owner}.Format()}}
	if !hasTXT {
		b.Changes = append(b.Changes, Change{New: &wantTXT})
	} else if !equalRecord(t, wantTXT) {
		old := t
		b.Changes = append(b.Changes, Change{Old: &old, New: &wantTXT})
	}
	st.State = StatePublished
	if len(b.Changes) > 0 {
		st.State = StatePending
		p.Batches = append(p.Batches, b)
	}
	p.Statuses = append(p.Statuses, st)
}

func foreignMessage(name, who string, own Owner) string {
	switch {
	case who == "absent":
		return fmt.Sprintf("%s holds records sluice did not create (no %s record): left untouched", name, OwnerName(name))
	case own.ID != "":
		return fmt.Sprintf("%s is owned by another sluice (owner %q, Ingress %s): left untouched", name, own.ID, own.Ingress)
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
// DeleteDelay has passed since, the name's records and ownership record
// are deleted (PolicySync only).
func (p *Plan) unwant(name string, cur []Record, t Record, o PlanOptions) {
	own, who := ownership(t, true, o.OwnerID)
	if who != "ours" {
		return // another owner's name: not ours to report
	}
	st := Status{Name: name, Owner: own.Ingress, State: StateUnwanted}
	if o.Policy != PolicySync {
		st.Message = fmt.Sprintf("%s is wanted by no Ingress any more; policy %s never deletes it", name, o.Policy)
		p.Statuses = append(p.Statuses, st)
		return
	}
	since := own.UnwantedSince
	if since.IsZero() {
		since = o.Now
	}
	st.DeleteAt = since.Add(o.DeleteDelay)
	if o.Now.Before(st.DeleteAt) {
		if own.UnwantedSince.IsZero() {
			stamped := own
			stamped.UnwantedSince = o.Now
			old := t
			p.Batches = append(p.Batches, Batch{Name: name, Changes: []Change{{Old: &old, New: &Record{
				Name: t.Name, Type: TypeTXT, TTL: o.TTL, Values: []string{stamped.Format()}}}}})
		}
		st.Message = fmt.Sprintf("%s is wanted by no Ingress any more (last: %s); it is deleted at %s, after the delete delay",
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
	st.Message = fmt.Sprintf("%s was wanted by no Ingress for the delete delay (last: %s): deleting", name, own.Ingress)
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
