package awsfake

import (
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Route53's limits on one ChangeResourceRecordSets request: values
// (ResourceRecord elements) and their characters, an UPSERT counting
// twice.
const (
	maxChangeRecords = 1000
	maxChangeChars   = 32000
	maxListRecords   = 300
)

// canonicalName turns a DNS name into Route53's form: lower case, the
// trailing dot, escapes (\052 or \*) decoded and every character but
// a-z, 0-9, "-" and "_" escaped as \ooo.
func canonicalName(s string) (string, error) {
	if s == "" || len(s) > 1024 {
		return "", errors.New("empty or too long")
	}
	var raw []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]):
			n, _ := strconv.ParseUint(s[i+1:i+4], 8, 16)
			if n > 255 {
				return "", fmt.Errorf("escape %q out of range", s[i:i+4])
			}
			raw = append(raw, byte(n))
			i += 3
		case c == '\\' && i+1 < len(s):
			raw = append(raw, s[i+1])
			i++
		case c == '\\':
			return "", errors.New("trailing backslash")
		default:
			raw = append(raw, c)
		}
	}
	name := string(raw)
	if name == "." {
		return ".", nil
	}
	name = strings.TrimSuffix(name, ".")
	var b strings.Builder
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("empty or too long label in %q", s)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
				b.WriteByte(c)
			case c < 0x21 || c > 0x7e:
				return "", fmt.Errorf("character %q not allowed in %q", c, s)
			default:
				fmt.Fprintf(&b, "\\%03o", c)
			}
		}
		b.WriteByte('.')
	}
	if len(name) > 253 {
		return "", fmt.Errorf("name %q longer than 255 octets", s)
	}
	return b.String(), nil
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// inZone reports whether a canonical name is the zone's apex or below it.
func inZone(name, zone string) bool {
	return name == zone || strings.HasSuffix(name, "."+zone)
}

// canonicalSet puts a record set's name, type and alias target in
// Route53's form.
func canonicalSet(rs RecordSet) (RecordSet, error) {
	n, err := canonicalName(rs.Name)
	if err != nil {
		return rs, fmt.Errorf("record set name %q: %w", rs.Name, err)
	}
	rs = cloneSet(rs)
	rs.Name, rs.Type = n, strings.ToUpper(rs.Type)
	if rs.Alias != nil {
		if rs.Alias.DNSName, err = canonicalName(rs.Alias.DNSName); err != nil {
			return rs, fmt.Errorf("alias target %q: %w", rs.Alias.DNSName, err)
		}
	}
	return rs, nil
}

// xmlSet is a ResourceRecordSet element of a request.
type xmlSet struct {
	Name          string   `xml:"Name"`
	Type          string   `xml:"Type"`
	SetIdentifier string   `xml:"SetIdentifier"`
	TTL           *int64   `xml:"TTL"`
	Values        []string `xml:"ResourceRecords>ResourceRecord>Value"`
	Alias         *struct {
		HostedZoneID         string `xml:"HostedZoneId"`
		DNSName              string `xml:"DNSName"`
		EvaluateTargetHealth bool   `xml:"EvaluateTargetHealth"`
	} `xml:"AliasTarget"`
}

type changeRequest struct {
	Batch struct {
		Comment string `xml:"Comment"`
		Changes []struct {
			Action string `xml:"Action"`
			Set    xmlSet `xml:"ResourceRecordSet"`
		} `xml:"Changes>Change"`
	} `xml:"ChangeBatch"`
}

var recordTypes = []string{"A", "AAAA", "CAA", "CNAME", "DS", "HTTPS", "MX", "NAPTR", "NS", "PTR", "SOA", "SPF", "SRV", "SSHFP", "SVCB", "TLSA", "TXT"}

// recordSet converts and checks a request's record set: the problems
// Route53 answers InvalidInput for come back as an error, those it answers
// InvalidChangeBatch for as messages.
func recordSet(x xmlSet, action string) (RecordSet, []string, *apiError) {
	rs := RecordSet{Name: x.Name, Type: strings.ToUpper(x.Type), SetIdentifier: x.SetIdentifier, Values: x.Values}
	if !slices.Contains(recordTypes, rs.Type) {
		return rs, nil, invalidInput("Invalid XML ; value '%s' at 'type' is not a valid RRType", x.Type)
	}
	n, err := canonicalName(x.Name)
	if err != nil {
		return rs, nil, invalidInput("Invalid XML ; DNS name %q is invalid: %v", x.Name, err)
	}
	rs.Name = n
	desc := fmt.Sprintf("Change with [Action=%s, Name=%s, Type=%s, SetIdentifier=%s]", action, n, rs.Type, cmpNull(x.SetIdentifier))
	switch {
	case x.Alias != nil && (x.TTL != nil || len(x.Values) > 0):
		return rs, nil, invalidInput("Invalid request: Expected exactly one of [AliasTarget, all of [TTL, and ResourceRecords], or TrafficPolicyInstanceId], but found more than one in %s", desc)
	case x.Alias == nil && (x.TTL == nil || len(x.Values) == 0):
		return rs, nil, invalidInput("Invalid request: Expected exactly one of [AliasTarget, all of [TTL, and ResourceRecords], or TrafficPolicyInstanceId], but found none in %s", desc)
	case x.Alias != nil:
		t, err := canonicalName(x.Alias.DNSName)
		if err != nil || x.Alias.HostedZoneID == "" {
			return rs, nil, invalidInput("Invalid request: alias target %q in zone %q is invalid in %s", x.Alias.DNSName, x.Alias.HostedZoneID, desc)
		}
		rs.Alias = &AliasTarget{HostedZoneID: x.Alias.HostedZoneID, DNSName: t, EvaluateTargetHealth: x.Alias.EvaluateTargetHealth}
		return rs, nil, nil
	case *x.TTL < 0 || *x.TTL > 2147483647:
		return rs, nil, invalidInput("Invalid XML ; TTL %d out of range in %s", *x.TTL, desc)
	}
	rs.TTL = *x.TTL
	var msgs []string
	bad := func(problem, what, v string) {
		msgs = append(msgs, fmt.Sprintf("Invalid Resource Record: 'FATAL problem: %s (%s) encountered with '%s''", problem, what, v))
	}
	for _, v := range x.Values {
		switch rs.Type {
		case "A":
			if a, err := netip.ParseAddr(v); err != nil || !a.Is4() {
				bad("ARRDATAIllegalIPv4Address", "Value is not a valid IPv4 address", v)
			}
		case "AAAA":
			if a, err := netip.ParseAddr(v); err != nil || !a.Is6() || a.Is4In6() {
				bad("AAAARRDATAIllegalIPv6Address", "Value is not a valid IPv6 address", v)
			}
		case "CNAME":
			if _, err := canonicalName(v); err != nil {
				bad("DomainLabelEmpty", "Domain label is empty", v)
			}
		case "TXT", "SPF":
			if !validTXT(v) {
				bad("InvalidCharacterString", "Value should be enclosed in quotation marks", v)
			}
		}
	}
	if rs.Type == "CNAME" && len(x.Values) > 1 {
		msgs = append(msgs, fmt.Sprintf("RRSet of type CNAME with DNS name %s has more than one resource record", n))
	}
	return rs, msgs, nil
}

func cmpNull(s string) string {
	if s == "" {
		return "null"
	}
	return s
}

// validTXT checks a TXT value: one or more quoted character strings of at
// most 255 characters each, separated by spaces.
func validTXT(v string) bool {
	if v == "" {
		return false
	}
	for v != "" {
		if v[0] != '"' {
			return false
		}
		n, i := 0, 1
		for ; i < len(v) && v[i] != '"'; i++ {
			if v[i] == '\\' {
				i++
			}
			n++
		}
		if i >= len(v) || n > 255 {
			return false
		}
		v = strings.TrimLeft(v[i+1:], " ")
	}
	return true
}

// sameSet reports whether a DELETE's record set matches the stored one
// exactly (values in any order), as Route53 requires.
func sameSet(a, b RecordSet) bool {
	if (a.Alias == nil) != (b.Alias == nil) {
		return false
	}
	if a.Alias != nil {
		return a.Alias.DNSName == b.Alias.DNSName && a.Alias.HostedZoneID == b.Alias.HostedZoneID &&
			a.Alias.EvaluateTargetHealth == b.Alias.EvaluateTargetHealth
	}
	return a.TTL == b.TTL && slices.Equal(slices.Sorted(slices.Values(a.Values)), slices.Sorted(slices.Values(b.Values)))
}

func setName(rs RecordSet) string {
	return fmt.Sprintf("[name='%s', type='%s'%s]", rs.Name, rs.Type, map[bool]string{true: ", set-identifier='" + rs.SetIdentifier + "'"}[rs.SetIdentifier != ""])
}

func (f *Fake) changeResourceRecordSets(r *http.Request, parts []string, w *xw) *apiError {
	var req changeRequest
	if err := xml.NewDecoder(r.Body).Decode(&req); err != nil {
		return &apiError{status: http.StatusBadRequest, code: "MalformedXML", message: "The XML you provided was not well-formed: " + err.Error()}
	}
	changes := req.Batch.Changes
	if len(changes) == 0 {
		return invalidInput("1 validation error detected: Value null at 'changeBatch.changes' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	if len(req.Batch.Comment) > 256 {
		return invalidInput("Invalid XML ; comment longer than 256 characters")
	}
	type step struct {
		action string
		set    RecordSet
	}
	var (
		steps        []step
		msgs         []string
		records, chs int
		seen         = map[rrKey][]string{}
	)
	for _, c := range changes {
		if c.Action != "CREATE" && c.Action != "DELETE" && c.Action != "UPSERT" {
			return invalidInput("Invalid XML ; value '%s' at 'action' must be CREATE, DELETE or UPSERT", c.Action)
		}
		rs, m, e := recordSet(c.Set, c.Action)
		if e != nil {
			return e
		}
		msgs = append(msgs, m...)
		weight := 1
		if c.Action == "UPSERT" {
			weight = 2
		}
		records += weight * max(1, len(rs.Values))
		for _, v := range rs.Values {
			chs += weight * len(v)
		}
		seen[rs.key()] = append(seen[rs.key()], c.Action)
		steps = append(steps, step{c.Action, rs})
	}
	if records > maxChangeRecords {
		return senderErr("InvalidChangeBatch", "[Number of records limit of %d exceeded.]", maxChangeRecords)
	}
	if chs > maxChangeChars {
		return senderErr("InvalidChangeBatch", "[Number of characters in the request (%d) exceeds the limit of %d.]", chs, maxChangeChars)
	}
	dup := map[rrKey]bool{}
	for _, st := range steps {
		k := st.set.key()
		if a := seen[k]; len(a) > 1 && !slices.Equal(a, []string{"DELETE", "CREATE"}) && !dup[k] {
			msgs = append(msgs, fmt.Sprintf("The request contains an invalid set of changes for a resource record set '%s %s'", st.set.Type, st.set.Name))
			dup[k] = true
		}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	z, e := f.zone(parts[1])
	if e != nil {
		return e
	}
	next := maps.Clone(z.sets)
	touched := map[string]bool{}
	for _, st := range steps {
		rs, k := st.set, st.set.key()
		if dup[k] {
			continue // reported once above
		}
		if !inZone(rs.Name, z.Name) {
			msgs = append(msgs, fmt.Sprintf("RRSet with DNS name %s is not permitted in zone %s", rs.Name, z.Name))
			continue
		}
		touched[rs.Name] = true
		old, exists := next[k]
		switch st.action {
		case "CREATE":
			if exists {
				msgs = append(msgs, fmt.Sprintf("Tried to create resource record set %s but it already exists", setName(rs)))
				continue
			}
			next[k] = rs
		case "UPSERT":
			next[k] = rs
		case "DELETE":
			switch {
			case !exists:
				msgs = append(msgs, fmt.Sprintf("Tried to delete resource record set %s but it was not found", setName(rs)))
			case !sameSet(old, rs):
				msgs = append(msgs, fmt.Sprintf("Tried to delete resource record set %s but the values provided do not match the current values", setName(rs)))
			case rs.Name == z.Name && (rs.Type == "SOA" || rs.Type == "NS"):
				msgs = append(msgs, fmt.Sprintf("A HostedZone must contain at least one NS record and one SOA record for the zone itself; %s cannot be deleted", setName(rs)))
			default:
				delete(next, k)
			}
		}
		if rs.Alias != nil && st.action != "DELETE" {
			if m := f.checkAlias(rs); m != "" {
				msgs = append(msgs, m)
			}
		}
	}
	// A CNAME stands alone at its name, and never at the apex: checked on
	// the zone as the batch leaves it.
	for _, name := range slices.Sorted(maps.Keys(touched)) {
		var types []string
		for k := range next {
			if k.name == name {
				types = append(types, k.typ)
			}
		}
		if !slices.Contains(types, "CNAME") {
			continue
		}
		if name == z.Name {
			msgs = append(msgs, fmt.Sprintf("RRSet of type CNAME with DNS name %s is not permitted at apex in zone %s", name, z.Name))
		} else if slices.ContainsFunc(types, func(t string) bool { return t != "CNAME" }) {
			msgs = append(msgs, fmt.Sprintf("RRSet of type CNAME with DNS name %s is not permitted as it conflicts with other records with the same DNS name in zone %s", name, z.Name))
		}
	}
	if len(msgs) > 0 {
		return senderErr("InvalidChangeBatch", "[%s]", strings.Join(msgs, ", "))
	}
	z.sets = next
	f.r53.init()
	now := time.Now()
	c := &r53Change{id: f.r53.newID("C"), submitted: now, insync: now.Add(f.scale(f.propagation())), comment: req.Batch.Comment}
	f.r53.changes[c.id] = c
	writeChange(w, c, now)
	return nil
}

// checkAlias checks an alias target as Route53 does for targets it knows:
// a load balancer of this fake (in its canonical zone) or a record set in
// one of its hosted zones. Other targets are accepted. Caller holds f.mu.
func (f *Fake) checkAlias(rs RecordSet) string {
	a := rs.Alias
	target := strings.TrimPrefix(a.DNSName, "dualstack.")
	bad := fmt.Sprintf("Tried to create an alias that targets %s, type %s in zone %s, but the alias target name does not lie within the target zone", a.DNSName, rs.Type, a.HostedZoneID)
	if a.HostedZoneID == canonicalZone(f.opts.Region, "network") || a.HostedZoneID == canonicalZone(f.opts.Region, "application") {
		for _, l := range f.elb.lbs {
			if l.info.DNSName+"." == target && l.info.CanonicalHostedZoneID == a.HostedZoneID {
				return ""
			}
		}
		return bad
	}
	if z, ok := f.r53.zones[strings.TrimPrefix(a.HostedZoneID, "/hostedzone/")]; ok {
		for k := range z.sets {
			if k.name == a.DNSName {
				return ""
			}
		}
		return bad
	}
	return ""
}

// propagation is how long a change stays PENDING, before scaling.
// Caller holds f.mu.
func (f *Fake) propagation() time.Duration {
	switch d := f.opts.ChangePropagation; {
	case d < 0:
		return 0
	case d == 0:
		return defaultPropagation
	default:
		return d
	}
}

func (f *Fake) listResourceRecordSets(r *http.Request, parts []string, w *xw) *apiError {
	q := r.URL.Query()
	limit, e := maxItems(q, maxListRecords)
	if e != nil {
		return e
	}
	var start rrKey
	name, typ, id := q.Get("name"), strings.ToUpper(q.Get("type")), q.Get("identifier")
	switch {
	case typ != "" && name == "":
		return invalidInput("The input is not valid: a type requires a name")
	case id != "" && typ == "":
		return invalidInput("The input is not valid: an identifier requires a type")
	case typ != "" && !slices.Contains(recordTypes, typ):
		return invalidInput("Invalid XML ; value '%s' at 'type' is not a valid RRType", typ)
	case name != "":
		n, err := canonicalName(name)
		if err != nil {
			return invalidInput("DNS name %s is invalid: %v", name, err)
		}
		start = rrKey{n, typ, id}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	z, e := f.zone(parts[1])
	if e != nil {
		return e
	}
	sets := z.sorted()
	i := 0
	if start.name != "" {
		i, _ = slices.BinarySearchFunc(sets, start, func(rs RecordSet, k rrKey) int { return compareKeys(rs.key(), k) })
	}
	end := min(i+limit, len(sets))
	w.open("ResourceRecordSets")
	for _, rs := range sets[i:end] {
		writeSet(w, rs)
	}
	w.close("ResourceRecordSets")
	w.elem("IsTruncated", strconv.FormatBool(end < len(sets)))
	if end < len(sets) {
		w.elem("NextRecordName", sets[end].Name)
		w.elem("NextRecordType", sets[end].Type)
		if sets[end].SetIdentifier != "" {
			w.elem("NextRecordIdentifier", sets[end].SetIdentifier)
		}
	}
	w.elem("MaxItems", strconv.Itoa(limit))
	return nil
}

func writeSet(w *xw, rs RecordSet) {
	w.open("ResourceRecordSet")
	w.elem("Name", rs.Name)
	w.elem("Type", rs.Type)
	if rs.SetIdentifier != "" {
		w.elem("SetIdentifier", rs.SetIdentifier)
	}
	if rs.Alias != nil {
		w.open("AliasTarget")
		w.elem("HostedZoneId", rs.Alias.HostedZoneID)
		w.elem("DNSName", rs.Alias.DNSName)
		w.elem("EvaluateTargetHealth", strconv.FormatBool(rs.Alias.EvaluateTargetHealth))
		w.close("AliasTarget")
	} else {
		w.elem("TTL", strconv.FormatInt(rs.TTL, 10))
		w.open("ResourceRecords")
		for _, v := range rs.Values {
			w.open("ResourceRecord")
			w.elem("Value", v)
			w.close("ResourceRecord")
		}
		w.close("ResourceRecords")
	}
	w.close("ResourceRecordSet")
}
