package dns

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Address is one address of the load balancer serving an Ingress (a
// binding's status.addresses).
type Address struct {
	// IP is an IPv4 or IPv6 address; empty for a name.
	IP string
	// Hostname is the load balancer's DNS name; empty for an IP.
	Hostname string
	// HostedZoneID is the canonical hosted zone of Hostname (AWS): with
	// it, and a provider that supports aliases, the host gets Route53
	// ALIAS records instead of a CNAME.
	HostedZoneID string
}

// Source is one host of one Ingress of ours, or of one Gateway of ours
// or a route attached to it (package gatewayhosts).
type Source struct {
	// Host is the Ingress rule host, the listener hostname or the route
	// hostname, lower case ("*.x" allowed).
	Host string
	// Ingress is the object the host is in (Ref.Kind: an Ingress or a
	// Gateway API object).
	Ingress Ref
	// Addresses are the addresses of the binding(s) of the Ingress's
	// class, or the Gateway's status.addresses. Known false: they are not
	// known now (the binding is missing or has no address yet, the
	// Gateway is not Programmed): the host is still wanted, and its
	// records are left as they are.
	Addresses []Address
	Known     bool
}

// Problem kinds, also the reasons of Events on the Ingress.
const (
	ProblemNoZone          = "HostInNoZone"
	ProblemHostConflict    = "HostConflict"
	ProblemForeignRecord   = "ForeignRecord"
	ProblemUnknownAddress  = "AddressUnknown"
	ProblemInvalidAddress  = "InvalidAddress"
	ProblemCNAMEAtApex     = "CNAMEAtApex"
	ProblemDeletionPending = "DeletionPending"
	ProblemHostNotAllowed  = "HostNotAllowed"
	ProblemApexNotAllowed  = "ApexNotAllowed"
	ProblemHostReserved    = "HostReserved"
)

// Problem is something about a host the plan did not do, to report on
// the Ingress(es) named.
type Problem struct {
	Kind     string
	Host     string
	Ingress  []Ref
	Message  string
	NoChange bool // the host's records were left as they are
}

// Want is the desired state of one name.
type Want struct {
	Name string
	Zone Zone
	// Owner is the Ingress the ownership record names: the first (by
	// namespace/name) of the Ingresses that have the host.
	Owner Ref
	// Records are the record sets the name should hold; nil while the
	// addresses are unknown or the host is in conflict (Keep).
	Records []Record
	// Keep: leave whatever the name holds now (addresses unknown, two
	// Ingresses disagree); the name still counts as wanted.
	Keep bool
	// Ingresses are all Ingresses that have the host.
	Ingresses []Ref
}

// DesiredOptions configures Desired.
type DesiredOptions struct {
	// Zones are the zones records may go into (longest suffix wins).
	Zones []Zone
	// TTL of the records, seconds.
	TTL int64
	// Aliases: the provider supports Route53 ALIAS records.
	Aliases bool
	// AllowApex lets a zone's apex be published (--dns-allow-apex);
	// false: a host that is a zone apex gets a problem and no record.
	AllowApex bool
	// Namespaces are the hosts each namespace may publish
	// (--dns-namespace-domains). Nil: any host in the zones.
	Namespaces NamespaceDomains
}

// Desired turns the hosts of our Ingresses into the record sets each name
// should hold, sorted by name, and the problems found. It is pure.
//
// Sources are taken as they come: a caller that decides which Ingress
// owns a host (the namespace of the oldest one) passes only the owner's
// sources. A source whose namespace may not publish its host
// (Namespaces) is dropped with a problem before hosts are grouped, so it
// cannot hold up the records of a namespace that may.
func Desired(sources []Source, o DesiredOptions) ([]Want, []Problem) {
	byHost := map[string][]Source{}
	refused := map[string][]Source{}
	for _, s := range sources {
		h := strings.TrimSuffix(strings.ToLower(s.Host), ".")
		if h == "" {
			continue
		}
		s.Host = h
		if !o.Namespaces.Allows(s.Ingress.Namespace, h) || strings.HasPrefix(h, OwnerPrefix+".") {
			refused[h] = append(refused[h], s)
			continue
		}
		byHost[h] = append(byHost[h], s)
	}
	hosts := make([]string, 0, len(byHost)+len(refused))
	for h := range byHost {
		hosts = append(hosts, h)
	}
	for h := range refused {
		if byHost[h] == nil {
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	var wants []Want
	var problems []Problem
	for _, h := range hosts {
		problems = append(problems, refusals(h, refused[h])...)
		srcs := byHost[h]
		if len(srcs) == 0 {
			continue
		}
		slices.SortFunc(srcs, func(a, b Source) int {
			return cmp.Or(cmp.Compare(a.Ingress.Namespace, b.Ingress.Namespace), cmp.Compare(a.Ingress.Name, b.Ingress.Name),
				cmp.Compare(a.Ingress.Kind, b.Ingress.Kind))
		})
		refs := refsOf(srcs)
		zone, ok := ZoneFor(h, o.Zones)
		if !ok {
			problems = append(problems, Problem{Kind: ProblemNoZone, Host: h, Ingress: refs, NoChange: true,
				Message: fmt.Sprintf("host %s is in none of the DNS zones sluice manages", h)})
			continue
		}
		if h == zone.Name && !o.AllowApex {
			problems = append(problems, Problem{Kind: ProblemApexNotAllowed, Host: h, Ingress: refs, NoChange: true,
				Message: fmt.Sprintf("host %s is the apex of zone %s: sluice publishes a zone apex only with --dns-allow-apex", h, zone.Name)})
			continue
		}
		w := Want{Name: h, Zone: zone, Owner: srcs[0].Ingress, Ingresses: refs}
		recs, p := wantRecords(h, zone, srcs, o)
		if p != nil {
			problems = append(problems, *p)
		}
		if recs == nil {
			w.Keep = true
		}
		w.Records = recs
		wants = append(wants, w)
	}
	return wants, problems
}

// refusals are the problems of the sources of host h that may not
// publish it, one per Ingress.
func refusals(h string, srcs []Source) []Problem {
	var out []Problem
	refs := refsOf(srcs)
	slices.SortFunc(refs, func(a, b Ref) int { return cmp.Compare(a.String(), b.String()) })
	for _, ref := range refs {
		if strings.HasPrefix(h, OwnerPrefix+".") {
			out = append(out, Problem{Kind: ProblemHostReserved, Host: h, Ingress: []Ref{ref}, NoChange: true,
				Message: fmt.Sprintf("host %s is refused: names starting with %q hold sluice's ownership records", h, OwnerPrefix+".")})
			continue
		}
		out = append(out, Problem{Kind: ProblemHostNotAllowed, Host: h, Ingress: []Ref{ref}, NoChange: true,
			Message: fmt.Sprintf("host %s is not among the DNS domains namespace %s may publish (--dns-namespace-domains): no record", h, ref.Namespace)})
	}
	return out
}

// wantRecords is the record sets for host h from its sources; nil (keep
// what is there) with a problem when they cannot be decided.
func wantRecords(h string, zone Zone, srcs []Source, o DesiredOptions) ([]Record, *Problem) {
	refs := refsOf(srcs)
	var known [][]Record
	var unknown []Ref
	for _, s := range srcs {
		if !s.Known || len(s.Addresses) == 0 {
			unknown = append(unknown, s.Ingress)
			continue
		}
		recs, err := recordsFor(h, zone, s.Addresses, o)
		if err != nil {
			return nil, &Problem{Kind: err.kind, Host: h, Ingress: refs, NoChange: true, Message: err.msg}
		}
		known = append(known, recs)
	}
	for _, k := range known[min(1, len(known)):] {
		if !slices.EqualFunc(k, known[0], equalRecord) {
			return nil, &Problem{Kind: ProblemHostConflict, Host: h, Ingress: refs, NoChange: true,
				Message: fmt.Sprintf("host %s is in %s served by different load balancers; its records are left as they are until one of them gives it up", h, joinRefs(refs))}
		}
	}
	if len(unknown) > 0 {
		return nil, &Problem{Kind: ProblemUnknownAddress, Host: h, Ingress: unknown, NoChange: true,
			Message: fmt.Sprintf("the load balancer address of host %s is not known (the binding is missing or without status.addresses, or the Gateway is not Programmed with an address); its records are left as they are, nothing is deleted", h)}
	}
	return known[0], nil
}

type recordErr struct{ kind, msg string }

// recordsFor: IPs give A and AAAA sets; otherwise the first hostname (by
// name) gives ALIAS A and AAAA sets (aliases supported, zone ID known) or
// a CNAME.
func recordsFor(h string, zone Zone, addrs []Address, o DesiredOptions) ([]Record, *recordErr) {
	var v4, v6, names []string
	zoneIDs := map[string]string{}
	for _, a := range addrs {
		switch {
		case a.IP != "":
			ip, err := netip.ParseAddr(a.IP)
			if err != nil || ip.Zone() != "" {
				return nil, &recordErr{ProblemInvalidAddress, fmt.Sprintf("load balancer address %q of host %s is not an IP address", a.IP, h)}
			}
			ip = ip.Unmap()
			if ip.Is4() {
				v4 = append(v4, ip.String())
			} else {
				v6 = append(v6, ip.String())
			}
		case a.Hostname != "":
			n := strings.TrimSuffix(strings.ToLower(a.Hostname), ".")
			names = append(names, n)
			if a.HostedZoneID != "" {
				zoneIDs[n] = a.HostedZoneID
			}
		}
	}
	var out []Record
	if len(v4)+len(v6) > 0 {
		if len(v4) > 0 {
			out = append(out, Record{Name: h, Type: TypeA, TTL: o.TTL, Values: sortedUnique(v4)})
		}
		if len(v6) > 0 {
			out = append(out, Record{Name: h, Type: TypeAAAA, TTL: o.TTL, Values: sortedUnique(v6)})
		}
		return out, nil
	}
	if len(names) == 0 {
		return nil, &recordErr{ProblemUnknownAddress, fmt.Sprintf("the load balancer of host %s has no address", h)}
	}
	slices.Sort(names)
	target := names[0]
	if id := zoneIDs[target]; o.Aliases && id != "" {
		al := &Alias{DNSName: target, HostedZoneID: id}
		return []Record{{Name: h, Type: TypeA, Alias: al}, {Name: h, Type: TypeAAAA, Alias: al}}, nil
	}
	if h == zone.Name {
		return nil, &recordErr{ProblemCNAMEAtApex, fmt.Sprintf("host %s is the apex of its zone: it cannot be a CNAME to %s (only IP addresses or a Route53 alias can go there)", h, target)}
	}
	return []Record{{Name: h, Type: TypeCNAME, TTL: o.TTL, Values: []string{target}}}, nil
}

// ZoneFor returns the zone of name: the one whose apex is the longest
// suffix of it (label-wise). A wildcard "*.x" is in the zones of "x".
func ZoneFor(name string, zones []Zone) (Zone, bool) {
	n := strings.TrimPrefix(name, "*.")
	var best Zone
	found := false
	for _, z := range zones {
		if (n == z.Name || strings.HasSuffix(n, "."+z.Name)) && (!found || len(z.Name) > len(best.Name)) {
			best, found = z, true
		}
	}
	return best, found
}

func refsOf(srcs []Source) []Ref {
	out := make([]Ref, 0, len(srcs))
	for _, s := range srcs {
		if !slices.Contains(out, s.Ingress) {
			out = append(out, s.Ingress)
		}
	}
	return out
}

// joinRefs is "Ingresses a/x, b/y" when every ref is an Ingress, else
// each with its kind ("Ingress a/x, HTTPRoute b/y").
func joinRefs(refs []Ref) string {
	s := make([]string, len(refs))
	ingresses := !slices.ContainsFunc(refs, func(r Ref) bool { return r.Kind != "" })
	for i, r := range refs {
		if ingresses {
			s[i] = r.String()
		} else {
			s[i] = r.Object()
		}
	}
	if ingresses {
		return "Ingresses " + strings.Join(s, ", ")
	}
	return strings.Join(s, ", ")
}

func sortedUnique(v []string) []string {
	v = slices.Clone(v)
	slices.Sort(v)
	return slices.Compact(v)
}

// equalRecord: same name, type, values and alias (TTL aside for aliases).
func equalRecord(a, b Record) bool {
	if a.Name != b.Name || a.Type != b.Type || !slices.Equal(a.Values, b.Values) {
		return false
	}
	if (a.Alias == nil) != (b.Alias == nil) {
		return false
	}
	if a.Alias != nil {
		return *a.Alias == *b.Alias
	}
	return a.TTL == b.TTL
}
