package awsfake

import (
	"crypto/rand"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Route53 serves the Route53 REST-XML API (paths under /2013-04-01/) on
// the same endpoint as ELBv2: the hosted zones, record sets and changes
// tests create with AddHostedZone and PutRecordSet, and these operations:
// ListHostedZones, ListHostedZonesByName, GetHostedZone,
// ListResourceRecordSets, ChangeResourceRecordSets and GetChange. A change
// is PENDING for Options.ChangePropagation (divided by Speed), then INSYNC.
// SetFaults applies to them by operation name, with PriorRequestNotComplete
// besides Throttle and ServerError.

const (
	route53Version = "2013-04-01"
	route53NS      = "https://route53.amazonaws.com/doc/2013-04-01/"
	// defaultPropagation is how long a change is PENDING at Speed 1:
	// Route53 usually takes well under a minute.
	defaultPropagation = 30 * time.Second
)

// route53Ops are the Route53 operations the fake serves.
var route53Ops = map[string]bool{
	"ListHostedZones": true, "ListHostedZonesByName": true, "GetHostedZone": true,
	"ListResourceRecordSets": true, "ChangeResourceRecordSets": true, "GetChange": true,
}

// RecordSet is a Route53 resource record set, as Route53 stores it.
type RecordSet struct {
	// Name, lower case, fully qualified with the trailing dot, "*" and
	// other special characters escaped as \ooo ("\052.example.com.").
	// Methods taking a RecordSet accept any case and "*".
	Name string
	// Type: A, AAAA, CNAME, TXT, MX, NS, SOA, ...
	Type string
	// SetIdentifier of weighted, latency, ... sets; empty for simple ones.
	SetIdentifier string
	// TTL in seconds; 0 for an alias.
	TTL int64
	// Values as Route53 holds them (TXT values quoted).
	Values []string
	// Alias, if set, makes this an alias record set (no TTL, no values).
	Alias *AliasTarget
}

// AliasTarget is the target of an alias record set.
type AliasTarget struct {
	HostedZoneID         string
	DNSName              string // lower case, trailing dot
	EvaluateTargetHealth bool
}

// HostedZone is a hosted zone as the fake holds it.
type HostedZone struct {
	// ID without the "/hostedzone/" prefix.
	ID string
	// Name, lower case, with the trailing dot.
	Name    string
	Private bool
}

type rrKey struct{ name, typ, setID string }

type hostedZone struct {
	HostedZone
	callerRef string
	sets      map[rrKey]RecordSet
}

type r53Change struct {
	id        string
	submitted time.Time
	insync    time.Time
	comment   string
}

// r53State holds the fake's Route53 data. Guarded by Fake.mu.
type r53State struct {
	zones   map[string]*hostedZone // by ID
	order   []string               // zone IDs in creation order
	changes map[string]*r53Change
	ids     int
}

// newID makes a Route53-style ID: a prefix and 13 to 21 upper-case
// letters and digits.
func (s *r53State) newID(prefix string) string {
	s.ids++
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return strings.ToUpper(fmt.Sprintf("%s%04d%x", prefix, s.ids, b))[:min(21, len(prefix)+4+16)]
}

func (s *r53State) init() {
	if s.zones == nil {
		s.zones, s.changes = map[string]*hostedZone{}, map[string]*r53Change{}
	}
}

// AddHostedZone creates a public hosted zone with its SOA and NS record
// sets, as Route53 does, and returns its ID (without "/hostedzone/").
// Several zones may have the same name, as in Route53.
func (f *Fake) AddHostedZone(name string) (string, error) {
	n, err := canonicalName(name)
	if err != nil || n == "." {
		return "", fmt.Errorf("adding hosted zone %q: invalid name", name)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.r53.init()
	id := f.r53.newID("Z")
	z := &hostedZone{HostedZone: HostedZone{ID: id, Name: n}, callerRef: id, sets: map[rrKey]RecordSet{}}
	ns := []string{"ns-1.awsdns-01.org.", "ns-2.awsdns-02.co.uk.", "ns-3.awsdns-03.com.", "ns-4.awsdns-04.net."}
	z.sets[rrKey{n, "NS", ""}] = RecordSet{Name: n, Type: "NS", TTL: 172800, Values: ns}
	z.sets[rrKey{n, "SOA", ""}] = RecordSet{Name: n, Type: "SOA", TTL: 900,
		Values: []string{ns[0] + " awsdns-hostmaster.amazon.com. 1 7200 900 1209600 86400"}}
	f.r53.zones[id] = z
	f.r53.order = append(f.r53.order, id)
	return id, nil
}

// HostedZones lists the hosted zones in creation order.
func (f *Fake) HostedZones() []HostedZone {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []HostedZone
	for _, id := range f.r53.order {
		out = append(out, f.r53.zones[id].HostedZone)
	}
	return out
}

// PutRecordSet creates or replaces a record set in a zone, without the
// API's checks beyond the name (tests plant foreign records with it).
func (f *Fake) PutRecordSet(zoneID string, rs RecordSet) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	z, ok := f.r53.zones[strings.TrimPrefix(zoneID, "/hostedzone/")]
	if !ok {
		return fmt.Errorf("putting record set: hosted zone %s not found", zoneID)
	}
	rs, err := canonicalSet(rs)
	if err != nil {
		return fmt.Errorf("putting record set: %w", err)
	}
	if !inZone(rs.Name, z.Name) {
		return fmt.Errorf("putting record set: %s is not in zone %s", rs.Name, z.Name)
	}
	z.sets[rs.key()] = rs
	return nil
}

// DeleteRecordSet removes a record set (of any set identifier) from a
// zone; it reports whether there was one.
func (f *Fake) DeleteRecordSet(zoneID, name, typ string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	z, ok := f.r53.zones[strings.TrimPrefix(zoneID, "/hostedzone/")]
	n, err := canonicalName(name)
	if !ok || err != nil {
		return false
	}
	found := false
	for k := range z.sets {
		if k.name == n && k.typ == strings.ToUpper(typ) {
			delete(z.sets, k)
			found = true
		}
	}
	return found
}

// RecordSets returns a zone's record sets in Route53's order (names by
// reversed labels, then type, then set identifier); nil for an unknown
// zone.
func (f *Fake) RecordSets(zoneID string) []RecordSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	z, ok := f.r53.zones[strings.TrimPrefix(zoneID, "/hostedzone/")]
	if !ok {
		return nil
	}
	return z.sorted()
}

// RecordSet returns one simple record set (empty set identifier).
func (f *Fake) RecordSet(zoneID, name, typ string) (RecordSet, bool) {
	n, err := canonicalName(name)
	if err != nil {
		return RecordSet{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	z, ok := f.r53.zones[strings.TrimPrefix(zoneID, "/hostedzone/")]
	if !ok {
		return RecordSet{}, false
	}
	rs, ok := z.sets[rrKey{n, strings.ToUpper(typ), ""}]
	return cloneSet(rs), ok
}

func (z *hostedZone) sorted() []RecordSet {
	out := make([]RecordSet, 0, len(z.sets))
	for _, rs := range z.sets {
		out = append(out, cloneSet(rs))
	}
	slices.SortFunc(out, func(a, b RecordSet) int { return compareKeys(a.key(), b.key()) })
	return out
}

func (rs RecordSet) key() rrKey { return rrKey{rs.Name, rs.Type, rs.SetIdentifier} }

func cloneSet(rs RecordSet) RecordSet {
	rs.Values = slices.Clone(rs.Values)
	if rs.Alias != nil {
		a := *rs.Alias
		rs.Alias = &a
	}
	return rs
}

// compareKeys orders record sets as ListResourceRecordSets does.
func compareKeys(a, b rrKey) int {
	if c := strings.Compare(reversedLabels(a.name), reversedLabels(b.name)); c != 0 {
		return c
	}
	if c := strings.Compare(a.typ, b.typ); c != 0 {
		return c
	}
	return strings.Compare(a.setID, b.setID)
}

// reversedLabels turns "www.example.com." into "com.example.www", the
// order of Route53's listings.
func reversedLabels(name string) string {
	labels := strings.Split(strings.TrimSuffix(name, "."), ".")
	slices.Reverse(labels)
	return strings.Join(labels, ".")
}

// serveRoute53 handles one Route53 REST request.
func (f *Fake) serveRoute53(w http.ResponseWriter, r *http.Request) {
	reqID := f.nextRequestID()
	path := strings.TrimPrefix(r.URL.Path, "/"+route53Version+"/")
	parts := strings.Split(strings.TrimSuffix(path, "/"), "/")
	var (
		op      string
		handler func(*http.Request, []string, *xw) *apiError
	)
	switch {
	case r.Method == http.MethodGet && len(parts) == 1 && parts[0] == "hostedzone":
		op, handler = "ListHostedZones", f.listHostedZones
	case r.Method == http.MethodGet && len(parts) == 1 && parts[0] == "hostedzonesbyname":
		op, handler = "ListHostedZonesByName", f.listHostedZonesByName
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "hostedzone":
		op, handler = "GetHostedZone", f.getHostedZone
	case r.Method == http.MethodGet && len(parts) == 3 && parts[0] == "hostedzone" && parts[2] == "rrset":
		op, handler = "ListResourceRecordSets", f.listResourceRecordSets
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "hostedzone" && parts[2] == "rrset":
		op, handler = "ChangeResourceRecordSets", f.changeResourceRecordSets
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "change":
		op, handler = "GetChange", f.getChange
	default:
		f.writeRoute53Error(w, reqID, &apiError{status: http.StatusNotFound, code: "UnknownOperationException",
			message: fmt.Sprintf("no Route53 operation for %s %s", r.Method, r.URL.Path)})
		return
	}
	f.log.Debug("aws fake request", "action", op, "requestID", reqID)
	if e := f.fault(op); e != nil {
		f.writeRoute53Error(w, reqID, e)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<20)
	var body xw
	if e := handler(r, parts, &body); e != nil {
		f.writeRoute53Error(w, reqID, e)
		return
	}
	var out xw
	out.WriteString(xml.Header)
	out.WriteString(`<` + op + `Response xmlns="` + route53NS + `">`)
	out.WriteString(body.String())
	out.close(op + "Response")
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	w.Header().Set("x-amzn-RequestId", reqID)
	_, _ = io.WriteString(w, out.String())
}

func (f *Fake) writeRoute53Error(w http.ResponseWriter, reqID string, e *apiError) {
	writeErrorNS(w, reqID, e, route53NS)
}

func invalidInput(format string, args ...any) *apiError {
	return senderErr("InvalidInput", format, args...)
}

func noSuchZone(id string) *apiError {
	return &apiError{status: http.StatusNotFound, code: "NoSuchHostedZone", message: "No hosted zone found with ID: " + id}
}

// maxItems reads the maxitems parameter (1 to limit; default limit).
func maxItems(q url.Values, limit int) (int, *apiError) {
	s := q.Get("maxitems")
	if s == "" {
		return limit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, invalidInput("1 validation error detected: Value '%s' at 'maxItems' failed to satisfy constraint", s)
	}
	return min(n, limit), nil
}

// zone looks up a hosted zone by ID. Caller holds f.mu.
func (f *Fake) zone(id string) (*hostedZone, *apiError) {
	z, ok := f.r53.zones[id]
	if !ok {
		return nil, noSuchZone(id)
	}
	return z, nil
}

func writeZone(w *xw, z *hostedZone) {
	w.open("HostedZone")
	w.elem("Id", "/hostedzone/"+z.ID)
	w.elem("Name", z.Name)
	w.elem("CallerReference", z.callerRef)
	w.open("Config")
	w.elem("PrivateZone", strconv.FormatBool(z.Private))
	w.close("Config")
	w.elem("ResourceRecordSetCount", strconv.Itoa(len(z.sets)))
	w.close("HostedZone")
}

func (f *Fake) listHostedZones(r *http.Request, _ []string, w *xw) *apiError {
	q := r.URL.Query()
	limit, e := maxItems(q, 100)
	if e != nil {
		return e
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	start := 0
	if m := q.Get("marker"); m != "" {
		start = slices.Index(f.r53.order, m)
		if start < 0 {
			return invalidInput("Invalid marker: %s", m)
		}
	}
	end := min(start+limit, len(f.r53.order))
	w.open("HostedZones")
	for _, id := range f.r53.order[start:end] {
		writeZone(w, f.r53.zones[id])
	}
	w.close("HostedZones")
	if m := q.Get("marker"); m != "" {
		w.elem("Marker", m)
	}
	w.elem("IsTruncated", strconv.FormatBool(end < len(f.r53.order)))
	if end < len(f.r53.order) {
		w.elem("NextMarker", f.r53.order[end])
	}
	w.elem("MaxItems", strconv.Itoa(limit))
	return nil
}

func (f *Fake) listHostedZonesByName(r *http.Request, _ []string, w *xw) *apiError {
	q := r.URL.Query()
	limit, e := maxItems(q, 100)
	if e != nil {
		return e
	}
	dnsName, startID := q.Get("dnsname"), q.Get("hostedzoneid")
	if startID != "" && dnsName == "" {
		return invalidInput("HostedZoneId can only be specified with DNSName")
	}
	var start string
	if dnsName != "" {
		n, err := canonicalName(dnsName)
		if err != nil {
			return invalidInput("DNS name %s is invalid: %v", dnsName, err)
		}
		start = reversedLabels(n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	zones := make([]*hostedZone, 0, len(f.r53.zones))
	for _, id := range f.r53.order {
		zones = append(zones, f.r53.zones[id])
	}
	slices.SortStableFunc(zones, func(a, b *hostedZone) int {
		if c := strings.Compare(reversedLabels(a.Name), reversedLabels(b.Name)); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	i := 0
	for i < len(zones) {
		z := zones[i]
		c := strings.Compare(reversedLabels(z.Name), start)
		if c > 0 || c == 0 && z.ID >= startID {
			break
		}
		i++
	}
	end := min(i+limit, len(zones))
	w.open("HostedZones")
	for _, z := range zones[i:end] {
		writeZone(w, z)
	}
	w.close("HostedZones")
	if dnsName != "" {
		w.elem("DNSName", dnsName)
	}
	if startID != "" {
		w.elem("HostedZoneId", startID)
	}
	w.elem("IsTruncated", strconv.FormatBool(end < len(zones)))
	if end < len(zones) {
		w.elem("NextDNSName", zones[end].Name)
		w.elem("NextHostedZoneId", zones[end].ID)
	}
	w.elem("MaxItems", strconv.Itoa(limit))
	return nil
}

func (f *Fake) getHostedZone(_ *http.Request, parts []string, w *xw) *apiError {
	f.mu.Lock()
	defer f.mu.Unlock()
	z, e := f.zone(parts[1])
	if e != nil {
		return e
	}
	writeZone(w, z)
	w.open("DelegationSet")
	w.open("NameServers")
	for _, ns := range z.sets[rrKey{z.Name, "NS", ""}].Values {
		w.elem("NameServer", strings.TrimSuffix(ns, "."))
	}
	w.close("NameServers")
	w.close("DelegationSet")
	return nil
}

func writeChange(w *xw, c *r53Change, now time.Time) {
	status := "PENDING"
	if !now.Before(c.insync) {
		status = "INSYNC"
	}
	w.open("ChangeInfo")
	w.elem("Id", "/change/"+c.id)
	w.elem("Status", status)
	w.elem("SubmittedAt", c.submitted.UTC().Format("2006-01-02T15:04:05.000Z"))
	if c.comment != "" {
		w.elem("Comment", c.comment)
	}
	w.close("ChangeInfo")
}

func (f *Fake) getChange(_ *http.Request, parts []string, w *xw) *apiError {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.r53.changes[parts[1]]
	if !ok {
		return &apiError{status: http.StatusNotFound, code: "NoSuchChange", message: "A change with the specified change ID does not exist: " + parts[1]}
	}
	writeChange(w, c, time.Now())
	return nil
}
