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

// This file holds the ELBv2 actions that create, change and delete load
// balancers, target groups and listeners (what sluice's managed mode
// uses), and tags on all three.

// maxListenerCertificates is how many certificates besides the default one
// a listener may hold (AWS's default quota): one more is
// TooManyCertificates.
const maxListenerCertificates = 25

// tagsOf returns the tag map of a load balancer, target group or listener
// by ARN. Caller holds f.mu.
func (f *Fake) tagsOf(arn string) (*map[string]string, *apiError) {
	if g, ok := f.groups[arn]; ok {
		return &g.cfg.Tags, nil
	}
	if l, ok := f.elb.lbs[arn]; ok {
		return &l.tags, nil
	}
	if l, ok := f.elb.listeners[arn]; ok {
		return &l.tags, nil
	}
	switch {
	case strings.Contains(arn, ":loadbalancer/"):
		return nil, lbNotFound(arn)
	case strings.Contains(arn, ":listener/"):
		return nil, listenerNotFound(arn)
	}
	return nil, notFound(arn)
}

func lbNotFound(arn string) *apiError {
	return senderErr("LoadBalancerNotFound", "Load balancers '[%s]' not found", arn)
}

func listenerNotFound(arn string) *apiError {
	return senderErr("ListenerNotFound", "Listener '%s' not found", arn)
}

// tagsParam reads Tags.member.N.{Key,Value}.
func tagsParam(r *http.Request) (map[string]string, *apiError) {
	out := map[string]string{}
	for i := 1; i <= maxMembers; i++ {
		p := "Tags.member." + strconv.Itoa(i) + "."
		k, ok := r.Form[p+"Key"]
		if !ok {
			break
		}
		if len(k) == 0 || k[0] == "" || len(k[0]) > 128 {
			return nil, senderErr("ValidationError", "Tag keys must be 1 to 128 characters")
		}
		out[k[0]] = r.Form.Get(p + "Value")
	}
	if len(out) > 50 {
		return nil, senderErr("TooManyTags", "A resource may have at most 50 tags")
	}
	return out, nil
}

func (f *Fake) addTags(r *http.Request, _ *xw) *apiError {
	arns := members(r, "ResourceArns")
	if len(arns) == 0 || len(arns) > 20 {
		return senderErr("ValidationError", "Between 1 and 20 resource ARNs must be specified")
	}
	tags, e := tagsParam(r)
	if e != nil {
		return e
	}
	if len(tags) == 0 {
		return senderErr("ValidationError", "At least one tag must be specified")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var maps []*map[string]string
	for _, a := range arns {
		m, e := f.tagsOf(a)
		if e != nil {
			return e
		}
		maps = append(maps, m)
	}
	for _, m := range maps {
		if *m == nil {
			*m = map[string]string{}
		}
		for k, v := range tags {
			(*m)[k] = v
		}
	}
	return nil
}

func (f *Fake) createLoadBalancer(r *http.Request, w *xw) *apiError {
	name := r.Form.Get("Name")
	typ := cmp.Or(r.Form.Get("Type"), "application")
	scheme := cmp.Or(r.Form.Get("Scheme"), "internet-facing")
	if name == "" || len(name) > 32 || strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-") ||
		strings.HasPrefix(name, "internal-") || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
		return senderErr("ValidationError", "The load balancer name '%s' is not valid", name)
	}
	if typ != "network" && typ != "application" {
		return senderErr("ValidationError", "Load balancer type '%s' is not supported", typ)
	}
	if scheme != "internet-facing" && scheme != "internal" {
		return senderErr("ValidationError", "Scheme '%s' is not valid", scheme)
	}
	subnets := members(r, "Subnets")
	if len(subnets) == 0 {
		return senderErr("ValidationError", "At least one subnet must be specified")
	}
	if typ == "application" && len(subnets) < 2 {
		return senderErr("ValidationError", "At least two subnets in two different Availability Zones must be specified")
	}
	tags, e := tagsParam(r)
	if e != nil {
		return e
	}
	info, err := f.AddLoadBalancer(LoadBalancer{Name: name, Type: typ, Scheme: scheme})
	if err != nil {
		if strings.Contains(err.Error(), "DuplicateLoadBalancerName") {
			return senderErr("DuplicateLoadBalancerName", "A load balancer with the same name '%s' exists, but with different settings", name)
		}
		return senderErr("ValidationError", "%v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.elb.lbs[info.ARN]
	l.tags = tags
	l.subnets = subnets
	w.open("LoadBalancers")
	f.writeLoadBalancer(w, l)
	w.close("LoadBalancers")
	return nil
}

func (f *Fake) deleteLoadBalancer(r *http.Request, _ *xw) *apiError {
	arn := r.Form.Get("LoadBalancerArn")
	if arn == "" {
		return senderErr("ValidationError", "A load balancer ARN must be specified")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.elb.lbs[arn]; !ok {
		return nil // AWS: deleting a deleted load balancer succeeds
	}
	for _, la := range slices.Clone(f.elb.lorder) {
		if f.elb.listeners[la].lb == arn {
			f.removeListener(la)
		}
	}
	delete(f.elb.lbs, arn)
	f.elb.order = slices.DeleteFunc(f.elb.order, func(a string) bool { return a == arn })
	return nil
}

// targetGroupParams reads the settings CreateTargetGroup and
// ModifyTargetGroup share into tg (fields not given stay).
func targetGroupParams(r *http.Request, tg *TargetGroup) *apiError {
	seconds := func(name string, lo, hi int, set func(int)) *apiError {
		s := r.Form.Get(name)
		if s == "" {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return senderErr("ValidationError", "%s must be between %d and %d", name, lo, hi)
		}
		set(n)
		return nil
	}
	for _, e := range []*apiError{
		seconds("HealthCheckIntervalSeconds", 5, 300, func(n int) { tg.HealthCheckInterval = time.Duration(n) * time.Second }),
		seconds("HealthCheckTimeoutSeconds", 2, 120, func(n int) { tg.HealthCheckTimeout = time.Duration(n) * time.Second }),
		seconds("HealthyThresholdCount", 2, 10, func(n int) { tg.HealthyThreshold = n }),
		seconds("UnhealthyThresholdCount", 2, 10, func(n int) { tg.UnhealthyThreshold = n }),
	} {
		if e != nil {
			return e
		}
	}
	if p := r.Form.Get("HealthCheckPath"); p != "" {
		if !strings.HasPrefix(p, "/") || len(p) > 1024 {
			return senderErr("ValidationError", "Health check path '%s' is not valid", p)
		}
		tg.HealthCheckPath = p
	}
	if p := r.Form.Get("HealthCheckPort"); p != "" {
		if n, err := strconv.Atoi(p); p != "traffic-port" && (err != nil || n < 1 || n > 65535) {
			return senderErr("ValidationError", "Health check port '%s' is not valid", p)
		}
		tg.HealthCheckPort = p
	}
	return nil
}

func (f *Fake) createTargetGroup(r *http.Request, w *xw) *apiError {
	tg := TargetGroup{Name: r.Form.Get("Name"), TargetType: cmp.Or(r.Form.Get("TargetType"), "instance"), Protocol: r.Form.Get("Protocol")}
	if tg.Name == "" || len(tg.Name) > 32 || strings.Trim(tg.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
		return senderErr("ValidationError", "Target group name '%s' is not valid", tg.Name)
	}
	switch tg.Protocol {
	case "TCP", "TLS", "HTTP", "HTTPS":
	default:
		return senderErr("ValidationError", "Protocol '%s' is not supported", tg.Protocol)
	}
	port, err := strconv.Atoi(r.Form.Get("Port"))
	if err != nil || port < 1 || port > 65535 {
		return senderErr("ValidationError", "A port between 1 and 65535 must be specified")
	}
	tg.Port = port
	if e := targetGroupParams(r, &tg); e != nil {
		return e
	}
	tags, e := tagsParam(r)
	if e != nil {
		return e
	}
	tg.Tags = tags
	arn, aerr := f.AddTargetGroup(tg)
	if aerr != nil {
		if strings.Contains(aerr.Error(), "DuplicateTargetGroupName") {
			return senderErr("DuplicateTargetGroupName", "A target group with the same name '%s' exists, but with different settings", tg.Name)
		}
		return senderErr("ValidationError", "%v", aerr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.open("TargetGroups")
	f.writeTargetGroup(w, f.groups[arn])
	w.close("TargetGroups")
	return nil
}

func (f *Fake) modifyTargetGroup(r *http.Request, w *xw) *apiError {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, e := f.groupOf(r)
	if e != nil {
		return e
	}
	cfg := g.cfg
	if e := targetGroupParams(r, &cfg); e != nil {
		return e
	}
	g.cfg = cfg // running health checks pick the new settings up at their next round
	w.open("TargetGroups")
	f.writeTargetGroup(w, g)
	w.close("TargetGroups")
	return nil
}

func (f *Fake) modifyTargetGroupAttributes(r *http.Request, w *xw) *apiError {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, e := f.groupOf(r)
	if e != nil {
		return e
	}
	cfg := g.cfg
	attrs := cloneMap(g.attrs)
	for i := 1; i <= maxMembers; i++ {
		p := "Attributes.member." + strconv.Itoa(i) + "."
		k := r.Form.Get(p + "Key")
		if k == "" {
			break
		}
		v := r.Form.Get(p + "Value")
		switch k {
		case "deregistration_delay.timeout_seconds":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 3600 {
				return senderErr("ValidationError", "'%s' must be between 0 and 3600", k)
			}
			cfg.DeregistrationDelay = time.Duration(n) * time.Second
		case "preserve_client_ip.enabled", "proxy_protocol_v2.enabled", "deregistration_delay.connection_termination.enabled", "stickiness.enabled":
			if v != "true" && v != "false" {
				return senderErr("ValidationError", "'%s' must be true or false", k)
			}
			if k != "stickiness.enabled" && g.isHTTP() {
				return senderErr("ValidationError", "Attribute '%s' is not supported for protocol %s", k, g.cfg.Protocol)
			}
			attrs[k] = v
		default:
			return senderErr("ValidationError", "Attribute '%s' is not recognized", k)
		}
	}
	g.cfg, g.attrs = cfg, attrs
	w.open("Attributes")
	for _, a := range g.attributes() {
		w.open("member")
		w.elem("Key", a[0])
		w.elem("Value", a[1])
		w.close("member")
	}
	w.close("Attributes")
	return nil
}

func (f *Fake) deleteTargetGroup(r *http.Request, _ *xw) *apiError {
	arn := r.Form.Get("TargetGroupArn")
	if arn == "" {
		return senderErr("ValidationError", "A target group ARN must be specified")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.groups[arn]
	if !ok {
		return nil // AWS: deleting a deleted target group succeeds
	}
	if lbs := f.loadBalancersOf(arn); len(lbs) > 0 {
		return senderErr("ResourceInUse", "Target group '%s' is currently in use by a listener or a rule", arn)
	}
	g.closeListener()
	for _, t := range g.targets {
		t.remove()
	}
	delete(f.groups, arn)
	f.order = slices.DeleteFunc(f.order, func(a string) bool { return a == arn })
	return nil
}

// randomID is 16 hex digits, as in AWS's ARNs.
func randomID() string {
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	return hex.EncodeToString(id)
}

// randomDigits is a 10-digit number, as in an ALB's DNS name.
func randomDigits() int64 {
	n, _ := rand.Int(rand.Reader, big.NewInt(9e9))
	return 1e9 + n.Int64()
}

// writeLoadBalancer writes one LoadBalancers member. Caller holds f.mu.
func (f *Fake) writeLoadBalancer(w *xw, l *loadBalancer) {
	w.open("member")
	w.elem("LoadBalancerArn", l.info.ARN)
	w.elem("DNSName", l.info.DNSName)
	w.elem("CanonicalHostedZoneId", l.info.CanonicalHostedZoneID)
	w.elem("CreatedTime", l.created.UTC().Format("2006-01-02T15:04:05.000Z"))
	w.elem("LoadBalancerName", l.cfg.Name)
	w.elem("Scheme", l.cfg.Scheme)
	w.elem("VpcId", "vpc-0fa4e5a8f0e0c0ffe")
	w.open("State")
	w.elem("Code", "active")
	w.close("State")
	w.elem("Type", l.cfg.Type)
	w.open("AvailabilityZones")
	for i, z := range f.opts.Zones {
		subnet := fmt.Sprintf("subnet-%017x", i+1)
		if i < len(l.subnets) {
			subnet = l.subnets[i]
		} else if len(l.subnets) > 0 {
			break
		}
		w.open("member")
		w.elem("ZoneName", z)
		w.elem("SubnetId", subnet)
		w.close("member")
	}
	w.close("AvailabilityZones")
	w.elem("IpAddressType", "ipv4")
	w.close("member")
}
