package route53

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"

	"sluice.dev/sluice/internal/dns"
)

// Route53's limits on one ChangeResourceRecordSets request: ResourceRecord
// elements and the characters of their values.
const (
	maxRecords = 1000
	maxChars   = 32000
)

// prepared is one dns.Batch as Route53 changes, with what it costs
// against the request limits.
type prepared struct {
	changes []types.Change
	keys    []string // "name type" of every record set the batch touches
	records int
	chars   int
}

// prepare turns a batch into Route53 changes: every DELETE (of an Old,
// exactly as read) before every CREATE (of a New), so that Route53 applies
// a replacement only while the zone still holds Old.
func prepare(b dns.Batch) (prepared, error) {
	var p prepared
	var creates []types.Change
	for _, c := range b.Changes {
		for _, x := range []struct {
			r      *dns.Record
			action types.ChangeAction
		}{{c.Old, types.ChangeActionDelete}, {c.New, types.ChangeActionCreate}} {
			if x.r == nil {
				continue
			}
			rs, records, chars, err := toSet(*x.r)
			if err != nil {
				return prepared{}, err
			}
			ch := types.Change{Action: x.action, ResourceRecordSet: &rs}
			if x.action == types.ChangeActionDelete {
				p.changes = append(p.changes, ch)
			} else {
				creates = append(creates, ch)
			}
			p.records += records
			p.chars += chars
			if k := x.r.Name + " " + x.r.Type; !slices.Contains(p.keys, k) {
				p.keys = append(p.keys, k)
			}
		}
	}
	p.changes = append(p.changes, creates...)
	if p.records > maxRecords || p.chars > maxChars {
		return prepared{}, fmt.Errorf("%d records of %d characters exceed one route53 request (%d, %d): %w", p.records, p.chars, maxRecords, maxChars, ErrInvalid)
	}
	return p, nil
}

// toSet converts a record into a Route53 record set, with its number of
// ResourceRecord elements and characters.
func toSet(r dns.Record) (rs types.ResourceRecordSet, records, chars int, err error) {
	bad := func(why string) error {
		return fmt.Errorf("record %s %s: %s: %w", r.Name, r.Type, why, ErrInvalid)
	}
	switch r.Type {
	case dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeTXT:
	default:
		return rs, 0, 0, bad("type not supported")
	}
	if r.Name == "" || strings.HasSuffix(r.Name, ".") || r.Name != strings.ToLower(r.Name) {
		return rs, 0, 0, bad("name must be lower case, without the trailing dot")
	}
	rs = types.ResourceRecordSet{Name: aws.String(r.Name + "."), Type: types.RRType(r.Type)}
	if r.Alias != nil {
		if r.Type != dns.TypeA && r.Type != dns.TypeAAAA || len(r.Values) > 0 || r.Alias.DNSName == "" || r.Alias.HostedZoneID == "" {
			return rs, 0, 0, bad("an alias is an A or AAAA record with a target name and zone and no values")
		}
		rs.AliasTarget = &types.AliasTarget{
			DNSName:      aws.String(strings.TrimSuffix(r.Alias.DNSName, ".") + "."),
			HostedZoneId: aws.String(r.Alias.HostedZoneID),
		}
		return rs, 1, len(r.Alias.DNSName), nil
	}
	if len(r.Values) == 0 || r.TTL < 0 || r.Type == dns.TypeCNAME && len(r.Values) != 1 {
		return rs, 0, 0, bad("want a TTL and values (one for a CNAME)")
	}
	rs.TTL = aws.Int64(r.TTL)
	for _, v := range r.Values {
		switch r.Type {
		case dns.TypeTXT:
			v = quoteTXT(v)
		case dns.TypeCNAME:
			v = strings.TrimSuffix(v, ".") + "."
		}
		rs.ResourceRecords = append(rs.ResourceRecords, types.ResourceRecord{Value: aws.String(v)})
		chars += len(v)
	}
	return rs, len(r.Values), chars, nil
}

// group packs batches into requests, in order, each within Route53's
// limits and touching every record set at most once (Route53 rejects a
// request that changes one set from two batches).
func group(ps []prepared, todo []int, maxRecords, maxChars int) [][]int {
	var out [][]int
	var cur []int
	records, chars := 0, 0
	keys := map[string]bool{}
	for _, i := range todo {
		p := ps[i]
		clash := slices.ContainsFunc(p.keys, func(k string) bool { return keys[k] })
		if len(cur) > 0 && (records+p.records > maxRecords || chars+p.chars > maxChars || clash) {
			out = append(out, cur)
			cur, records, chars = nil, 0, 0
			clear(keys)
		}
		cur = append(cur, i)
		records += p.records
		chars += p.chars
		for _, k := range p.keys {
			keys[k] = true
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// Apply implements dns.Provider: the batches go out in as few requests as
// the limits allow; a rejected request is split and retried batch by
// batch; then Apply waits until every accepted change is INSYNC.
func (p *Provider) Apply(ctx context.Context, z dns.Zone, batches []dns.Batch) []error {
	errs := make([]error, len(batches))
	ps := make([]prepared, len(batches))
	var todo []int
	for i, b := range batches {
		pb, err := prepare(b)
		if err != nil {
			errs[i] = fmt.Errorf("preparing route53 changes for %s: %w", b.Name, err)
			continue
		}
		if len(pb.changes) == 0 {
			continue
		}
		ps[i] = pb
		todo = append(todo, i)
	}
	pending := map[int]string{} // batch → change ID
	for _, req := range group(ps, todo, maxRecords, maxChars) {
		p.send(ctx, z, batches, ps, req, errs, pending)
	}
	p.wait(ctx, z, batches, errs, pending)
	return errs
}

// send sends one request of batches. Rejected as a whole, it is split in
// halves and sent again, down to single batches, so that only the bad
// batches fail; other failures (throttled past every retry, the
// zone gone, the context over) fail every batch of it.
func (p *Provider) send(ctx context.Context, z dns.Zone, batches []dns.Batch, ps []prepared, req []int, errs []error, pending map[int]string) {
	var changes []types.Change
	for _, i := range req {
		changes = append(changes, ps[i].changes...)
	}
	out, err := p.client.ChangeResourceRecordSets(ctx, &route53.ChangeResourceRecordSetsInput{
		HostedZoneId: aws.String(z.ID),
		ChangeBatch:  &types.ChangeBatch{Changes: changes, Comment: aws.String("sluice")},
	})
	if err == nil {
		id := aws.ToString(out.ChangeInfo.Id)
		for _, i := range req {
			pending[i] = id
		}
		p.log.Debug("route53 changes submitted", "zone", z.Name, "batches", len(req), "changes", len(changes), "change", id)
		return
	}
	if len(req) > 1 && rejected(err) {
		// Halves, down to single batches: a few bad batches among many
		// cost a few requests each (Route53 allows 5 a second), not one
		// request per batch.
		p.log.Debug("route53 rejected a request, splitting it", "zone", z.Name, "batches", len(req), "err", err)
		p.send(ctx, z, batches, ps, req[:len(req)/2], errs, pending)
		p.send(ctx, z, batches, ps, req[len(req)/2:], errs, pending)
		return
	}
	for _, i := range req {
		errs[i] = batchError(batches[i].Name, z, err)
	}
}

// rejected reports an answer about the content of a request (as opposed
// to throttling, access or transport): splitting it may help.
func rejected(err error) bool {
	var (
		icb *types.InvalidChangeBatch
		ii  *types.InvalidInput
	)
	return errors.As(err, &icb) || errors.As(err, &ii)
}

// batchError wraps a failed batch's error; Route53's answers that the zone
// does not hold what the batch expected become dns.ErrConflict.
func batchError(name string, z dns.Zone, err error) error {
	var icb *types.InvalidChangeBatch
	if errors.As(err, &icb) {
		msg := strings.Join(append([]string{icb.ErrorMessage()}, icb.Messages...), "; ")
		for _, s := range []string{"but it already exists", "but it was not found", "values provided do not match"} {
			if strings.Contains(msg, s) {
				return fmt.Errorf("applying route53 changes for %s in %s: %w: %w", name, z.Name, dns.ErrConflict, err)
			}
		}
	}
	return fmt.Errorf("applying route53 changes for %s in %s: %w", name, z.Name, err)
}

// wait polls GetChange, every PollInterval at most, until every submitted
// change is INSYNC. Batches whose change does not get there before ctx ends, or
// cannot be asked about, get an error (their records may well be
// written).
func (p *Provider) wait(ctx context.Context, z dns.Zone, batches []dns.Batch, errs []error, pending map[int]string) {
	ids := map[string]bool{}
	for _, id := range pending {
		ids[id] = true
	}
	fail := func(id string, err error) {
		delete(ids, id)
		for i, pid := range pending {
			if pid == id {
				errs[i] = fmt.Errorf("waiting for route53 change %s for %s in %s to be INSYNC: %w", id, batches[i].Name, z.Name, err)
			}
		}
	}
	// The first poll comes soon (a fast endpoint is seen fast), then the
	// interval doubles up to PollInterval (Route53 takes tens of seconds,
	// and every poll spends the shared rate).
	interval := max(p.opts.PollInterval/8, time.Millisecond)
	t := time.NewTimer(interval)
	defer t.Stop()
	for len(ids) > 0 {
		select {
		case <-ctx.Done():
			for id := range ids {
				fail(id, ctx.Err())
			}
			return
		case <-t.C:
		}
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			out, err := p.client.GetChange(ctx, &route53.GetChangeInput{Id: aws.String(id)})
			switch {
			case err != nil:
				fail(id, err)
			case out.ChangeInfo.Status == types.ChangeStatusInsync:
				delete(ids, id)
			}
		}
		interval = min(2*interval, p.opts.PollInterval)
		t.Reset(interval)
	}
}
