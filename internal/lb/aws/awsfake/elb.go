package awsfake

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LoadBalancer describes a load balancer to create in front of target
// groups. It carries no traffic of its own (a group's Listen does); it is
// what DescribeLoadBalancers lists and what DNS records point at.
type LoadBalancer struct {
	// Name of the load balancer (the ARN's middle part and the start of
	// its DNS name). Required, unique, at most 32 letters, digits and
	// hyphens.
	Name string
	// Type is "network" (default) or "application".
	Type string
	// Scheme is "internet-facing" (default) or "internal".
	Scheme string
	// TargetGroups are the ARNs of the groups it forwards to; they list
	// the load balancer in their LoadBalancerArns.
	TargetGroups []string
}

// LoadBalancerInfo is what AWS assigned to a created load balancer.
type LoadBalancerInfo struct {
	ARN string
	// DNSName as AWS forms it: "name-<16 hex>.elb.REGION.amazonaws.com"
	// for a network load balancer, "name-<digits>.REGION.elb.amazonaws.com"
	// for an application one ("internal-" in front when internal).
	DNSName string
	// CanonicalHostedZoneID is AWS's real zone ID of the region's load
	// balancer names of that type (e.g. Z26RNL4JYFTOTI for a network load
	// balancer in us-east-1); for a region the fake does not know, a
	// made-up but stable one.
	CanonicalHostedZoneID string
}

// loadBalancer is a created load balancer.
type loadBalancer struct {
	cfg     LoadBalancer
	info    LoadBalancerInfo
	created time.Time
	tags    map[string]string
	subnets []string // as CreateLoadBalancer named them
}

// elbState holds the fake's load balancers. Guarded by Fake.mu.
type elbState struct {
	lbs   map[string]*loadBalancer // by ARN
	order []string                 // ARNs in creation order

	listeners map[string]*listener // by ARN (listeners.go)
	lorder    []string             // listener ARNs in creation order
	certs     map[string]*cert     // ACM certificates by ARN (acm.go)
	corder    []string             // certificate ARNs in creation order
	subnets   []Subnet             // EC2 subnets (ec2.go)
}

// canonicalZones are AWS's canonical hosted zone IDs of load balancer DNS
// names, per region: {application (and classic), network}.
var canonicalZones = map[string][2]string{
	"us-east-1":      {"Z35SXDOTRQ7X7K", "Z26RNL4JYFTOTI"},
	"us-east-2":      {"Z3AADJGX6KTTL2", "ZLMOA37VPKANP"},
	"us-west-1":      {"Z368ELLRRE2KJ0", "Z24FKFUX50B4VW"},
	"us-west-2":      {"Z1H1FL5HABSF5", "Z18D5FSROUN65G"},
	"eu-west-1":      {"Z32O12XQLNTSW2", "Z2IFOLAFXWLO4F"},
	"eu-west-2":      {"ZHURV8PSTC4K8", "ZD4D7Y8KGAS4G"},
	"eu-central-1":   {"Z215JYRZR1TBD5", "Z3F0SRJ5LGBH90"},
	"ap-southeast-1": {"Z1LMS91P8CMLE5", "ZKVM4W9LS7TM"},
	"ap-southeast-2": {"Z1GM3OXH4ZPM65", "ZCT6FZBF4DROD"},
	"ap-northeast-1": {"Z14GRHDCWA56QT", "Z31USIVHYNEOWT"},
}

// canonicalZone is the canonical hosted zone ID for a load balancer type
// in a region.
func canonicalZone(region, typ string) string {
	i := 0
	if typ == "network" {
		i = 1
	}
	if z, ok := canonicalZones[region]; ok {
		return z[i]
	}
	return strings.ToUpper(fmt.Sprintf("Z%x%d", region, i))[:min(32, 3+2*len(region))]
}

// AddLoadBalancer creates a load balancer in front of target groups.
func (f *Fake) AddLoadBalancer(l LoadBalancer) (LoadBalancerInfo, error) {
	l.Type = cmp.Or(l.Type, "network")
	l.Scheme = cmp.Or(l.Scheme, "internet-facing")
	if l.Name == "" || len(l.Name) > 32 || strings.HasPrefix(l.Name, "-") || strings.HasSuffix(l.Name, "-") ||
		strings.HasPrefix(l.Name, "internal-") || strings.Trim(l.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
		return LoadBalancerInfo{}, fmt.Errorf("adding load balancer %q: invalid name", l.Name)
	}
	if l.Type != "network" && l.Type != "application" {
		return LoadBalancerInfo{}, fmt.Errorf("adding load balancer %s: type %q not supported", l.Name, l.Type)
	}
	if l.Scheme != "internet-facing" && l.Scheme != "internal" {
		return LoadBalancerInfo{}, fmt.Errorf("adding load balancer %s: scheme %q not supported", l.Name, l.Scheme)
	}
	l.TargetGroups = slices.Clone(l.TargetGroups)

	id := make([]byte, 8)
	_, _ = rand.Read(id)
	short := map[string]string{"network": "net", "application": "app"}[l.Type]
	info := LoadBalancerInfo{
		ARN: fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:loadbalancer/%s/%s/%s",
			f.opts.Region, f.opts.AccountID, short, l.Name, hex.EncodeToString(id)),
		CanonicalHostedZoneID: canonicalZone(f.opts.Region, l.Type),
	}
	prefix := strings.ToLower(l.Name)
	if l.Scheme == "internal" {
		prefix = "internal-" + prefix
	}
	if l.Type == "network" {
		info.DNSName = fmt.Sprintf("%s-%s.elb.%s.amazonaws.com", prefix, hex.EncodeToString(id), f.opts.Region)
	} else {
		n, _ := rand.Int(rand.Reader, big.NewInt(9e9))
		info.DNSName = fmt.Sprintf("%s-%d.%s.elb.amazonaws.com", prefix, 1e9+n.Int64(), f.opts.Region)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	for _, arn := range l.TargetGroups {
		if _, ok := f.groups[arn]; !ok {
			return LoadBalancerInfo{}, fmt.Errorf("adding load balancer %s: target group %s not found", l.Name, arn)
		}
	}
	for _, x := range f.elb.lbs {
		if x.cfg.Name == l.Name {
			return LoadBalancerInfo{}, fmt.Errorf("adding load balancer %s: DuplicateLoadBalancerName", l.Name)
		}
	}
	if f.elb.lbs == nil {
		f.elb.lbs = map[string]*loadBalancer{}
	}
	f.elb.lbs[info.ARN] = &loadBalancer{cfg: l, info: info, created: time.Now()}
	f.elb.order = append(f.elb.order, info.ARN)
	return info, nil
}

// RemoveLoadBalancer deletes a load balancer; its target groups stay.
func (f *Fake) RemoveLoadBalancer(arn string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.elb.lbs[arn]; !ok {
		return fmt.Errorf("removing load balancer: %s not found", arn)
	}
	delete(f.elb.lbs, arn)
	f.elb.order = slices.DeleteFunc(f.elb.order, func(a string) bool { return a == arn })
	return nil
}

// loadBalancersOf returns the ARNs of the load balancers in front of a
// target group, in creation order. Caller holds f.mu.
func (f *Fake) loadBalancersOf(groupARN string) []string {
	var out []string
	for _, arn := range f.elb.order {
		if slices.Contains(f.elb.lbs[arn].cfg.TargetGroups, groupARN) {
			out = append(out, arn)
			continue
		}
		for _, la := range f.elb.lorder {
			if l := f.elb.listeners[la]; l.lb == arn && l.target == groupARN {
				out = append(out, arn)
				break
			}
		}
	}
	return out
}

// describeLoadBalancers answers DescribeLoadBalancers: by ARNs (at most
// 20) or names, or every load balancer, PageSize (1 to 400) at a time with
// an opaque Marker, as AWS.
func (f *Fake) describeLoadBalancers(r *http.Request, w *xw) *apiError {
	arns, names := members(r, "LoadBalancerArns"), members(r, "Names")
	if len(arns) > 20 {
		return senderErr("ValidationError", "A maximum of 20 load balancer ARNs can be specified")
	}
	pageSize, e := pageSizeOf(r)
	if e != nil {
		return e
	}
	start, e := decodeMarker(r.Form.Get("Marker"))
	if e != nil {
		return e
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var sel []*loadBalancer
	switch {
	case len(arns) > 0 && len(names) > 0:
		return senderErr("ValidationError", "Load balancer names and load balancer ARNs cannot be specified at the same time")
	case len(arns) > 0:
		for _, a := range arns {
			l, ok := f.elb.lbs[a]
			if !ok {
				return senderErr("LoadBalancerNotFound", "Load balancers '[%s]' not found", a)
			}
			sel = append(sel, l)
		}
	case len(names) > 0:
		for _, n := range names {
			i := slices.IndexFunc(f.elb.order, func(a string) bool { return f.elb.lbs[a].cfg.Name == n })
			if i < 0 {
				return senderErr("LoadBalancerNotFound", "Load balancers '[%s]' not found", n)
			}
			sel = append(sel, f.elb.lbs[f.elb.order[i]])
		}
	default:
		for _, a := range f.elb.order {
			sel = append(sel, f.elb.lbs[a])
		}
	}
	start = min(start, len(sel))
	end := min(start+pageSize, len(sel))
	w.open("LoadBalancers")
	for _, l := range sel[start:end] {
		f.writeLoadBalancer(w, l)
	}
	w.close("LoadBalancers")
	if end < len(sel) {
		w.elem("NextMarker", encodeMarker(end))
	}
	return nil
}

// encodeMarker and decodeMarker make a page position opaque, like AWS's
// markers (callers must pass them back unchanged).
func encodeMarker(n int) string {
	return hex.EncodeToString([]byte("page:" + strconv.Itoa(n)))
}

func decodeMarker(m string) (int, *apiError) {
	if m == "" {
		return 0, nil
	}
	b, err := hex.DecodeString(m)
	s, ok := strings.CutPrefix(string(b), "page:")
	n, aerr := strconv.Atoi(s)
	if err != nil || !ok || aerr != nil || n < 0 {
		return 0, senderErr("ValidationError", "Invalid marker '%s'", m)
	}
	return n, nil
}

// LoadBalancerARNs lists the load balancers, in creation order.
func (f *Fake) LoadBalancerARNs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.elb.order)
}

// TargetGroupARNs lists the target groups, in creation order.
func (f *Fake) TargetGroupARNs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.order)
}
