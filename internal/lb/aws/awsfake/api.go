package awsfake

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	apiVersion = "2015-12-01"
	xmlns      = "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"
	// maxMembers bounds list parameters read from a request.
	maxMembers = 1000
)

// apiError is an AWS error reply.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func senderErr(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

func notFound(arn string) *apiError {
	return senderErr("TargetGroupNotFound", "Target groups '%s' not found", arn)
}

// xw builds an XML document.
type xw struct{ strings.Builder }

func (w *xw) open(name string)  { w.WriteString("<" + name + ">") }
func (w *xw) close(name string) { w.WriteString("</" + name + ">") }
func (w *xw) elem(name, value string) {
	w.open(name)
	_ = xml.EscapeText(w, []byte(value))
	w.close(name)
}

func (f *Fake) nextRequestID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqID++
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", f.reqID, f.reqID)
}

// serveAPI handles one Query API request.
func (f *Fake) serveAPI(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/"+route53Version+"/") {
		f.serveRoute53(w, r)
		return
	}
	if strings.HasPrefix(r.Header.Get("X-Amz-Target"), acmTargetPrefix) {
		f.serveACM(w, r)
		return
	}
	reqID := f.nextRequestID()
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		f.writeError(w, reqID, &apiError{status: http.StatusMethodNotAllowed, code: "InvalidAction", message: "method not allowed"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		f.writeError(w, reqID, senderErr("MalformedQueryString", "parsing request: %v", err))
		return
	}
	action := r.Form.Get("Action")
	f.log.Debug("aws fake request", "action", action, "requestID", reqID)
	if r.Form.Get("Version") == ec2Version {
		f.serveEC2(w, r, reqID)
		return
	}
	if v := r.Form.Get("Version"); v != apiVersion {
		f.writeError(w, reqID, senderErr("InvalidAction", "Version %q is not supported", v))
		return
	}
	handler, ok := map[string]func(*http.Request, *xw) *apiError{
		"RegisterTargets":               f.registerTargets,
		"DeregisterTargets":             f.deregisterTargets,
		"DescribeTargetHealth":          f.describeTargetHealth,
		"DescribeTargetGroups":          f.describeTargetGroups,
		"DescribeTags":                  f.describeTags,
		"DescribeTargetGroupAttributes": f.describeTargetGroupAttributes,
		"DescribeLoadBalancers":         f.describeLoadBalancers,
		"CreateLoadBalancer":            f.createLoadBalancer,
		"DeleteLoadBalancer":            f.deleteLoadBalancer,
		"CreateTargetGroup":             f.createTargetGroup,
		"ModifyTargetGroup":             f.modifyTargetGroup,
		"ModifyTargetGroupAttributes":   f.modifyTargetGroupAttributes,
		"DeleteTargetGroup":             f.deleteTargetGroup,
		"CreateListener":                f.createListener,
		"ModifyListener":                f.modifyListener,
		"DescribeListeners":             f.describeListeners,
		"DeleteListener":                f.deleteListener,
		"AddListenerCertificates":       f.addListenerCertificates,
		"RemoveListenerCertificates":    f.removeListenerCertificates,
		"DescribeListenerCertificates":  f.describeListenerCertificates,
		"AddTags":                       f.addTags,
	}[action]
	if !ok {
		f.writeError(w, reqID, senderErr("InvalidAction", "Could not find operation %s for version %s", action, apiVersion))
		return
	}
	if e := f.fault(action); e != nil {
		f.writeError(w, reqID, e)
		return
	}
	if action == "DescribeTargetHealth" {
		f.mu.Lock()
		delay := f.faults.DescribeHealthDelay
		f.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	var body xw
	if e := handler(r, &body); e != nil {
		f.writeError(w, reqID, e)
		return
	}
	var out xw
	out.WriteString(xml.Header)
	out.WriteString(`<` + action + `Response xmlns="` + xmlns + `">`)
	out.open(action + "Result")
	out.WriteString(body.String())
	out.close(action + "Result")
	out.open("ResponseMetadata")
	out.elem("RequestId", reqID)
	out.close("ResponseMetadata")
	out.close(action + "Response")
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	w.Header().Set("x-amzn-RequestId", reqID)
	_, _ = io.WriteString(w, out.String())
}

// fault counts the call and decides whether to fail it.
func (f *Fake) fault(action string) *apiError {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[action]++
	x := f.faults
	if len(x.Actions) > 0 && !slices.Contains(x.Actions, action) {
		return nil
	}
	// Per action, the k-th call fails when ceil(k·fraction) steps up: a
	// fraction of 0.5 fails calls 1, 3, 5, ...; 1 fails every call.
	n := float64(f.faultN[action])
	f.faultN[action]++
	steps := func(frac float64) bool { return frac > 0 && math.Ceil((n+1)*frac) > math.Ceil(n*frac) }
	if steps(x.Throttle) {
		return senderErr("Throttling", "Rate exceeded")
	}
	if steps(x.PriorRequestNotComplete) && route53Ops[action] {
		return senderErr("PriorRequestNotComplete", "The request was rejected because Route 53 was still processing a prior request.")
	}
	if steps(x.ServerError) {
		return &apiError{status: http.StatusInternalServerError, code: "InternalFailure",
			message: "The request processing has failed because of an unknown error, exception or failure."}
	}
	return nil
}

// writeError answers an error in AWS's XML error document, in the API's
// namespace (ELBv2's or Route53's).
func (f *Fake) writeError(w http.ResponseWriter, reqID string, e *apiError) {
	writeErrorNS(w, reqID, e, xmlns)
}

func writeErrorNS(w http.ResponseWriter, reqID string, e *apiError, ns string) {
	typ := "Sender"
	if e.status >= 500 {
		typ = "Receiver"
	}
	var out xw
	out.WriteString(xml.Header)
	out.WriteString(`<ErrorResponse xmlns="` + ns + `">`)
	out.open("Error")
	out.elem("Type", typ)
	out.elem("Code", e.code)
	out.elem("Message", e.message)
	out.close("Error")
	out.elem("RequestId", reqID)
	out.close("ErrorResponse")
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("x-amzn-RequestId", reqID)
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(out.String()))
}

// strings reads a Query list: NAME.member.1, NAME.member.2, ...
func members(r *http.Request, name string) []string {
	var out []string
	for i := 1; i <= maxMembers; i++ {
		v, ok := r.Form[name+".member."+strconv.Itoa(i)]
		if !ok || len(v) == 0 {
			break
		}
		out = append(out, v[0])
	}
	return out
}

type targetDesc struct {
	id   string
	port int
	zone string
}

// targetDescs reads Targets.member.N.{Id,Port,AvailabilityZone}.
func targetDescs(r *http.Request) ([]targetDesc, *apiError) {
	var out []targetDesc
	for i := 1; i <= maxMembers; i++ {
		p := "Targets.member." + strconv.Itoa(i) + "."
		id := r.Form.Get(p + "Id")
		if id == "" {
			break
		}
		td := targetDesc{id: id, zone: r.Form.Get(p + "AvailabilityZone")}
		if s := r.Form.Get(p + "Port"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 65535 {
				return nil, senderErr("ValidationError", "Port %q is not a valid port", s)
			}
			td.port = n
		}
		out = append(out, td)
	}
	return out, nil
}

// groupOf looks up TargetGroupArn. Caller holds f.mu.
func (f *Fake) groupOf(r *http.Request) (*group, *apiError) {
	arn := r.Form.Get("TargetGroupArn")
	if arn == "" {
		return nil, senderErr("ValidationError", "A target group ARN must be specified")
	}
	g, ok := f.groups[arn]
	if !ok {
		return nil, notFound(arn)
	}
	return g, nil
}

// resolve validates a target description against g and returns its key,
// zone and address. Caller holds f.mu.
func (f *Fake) resolve(g *group, td targetDesc) (key, string, netip.AddrPort, *apiError) {
	port := td.port
	if port == 0 {
		port = g.cfg.Port
	}
	k := key{id: td.id, port: port}
	switch g.cfg.TargetType {
	case "instance":
		ip, ok := f.instances[td.id]
		if !ok {
			return k, "", netip.AddrPort{}, senderErr("InvalidTarget", "The following targets are not valid instances: '%s'", td.id)
		}
		return k, "", netip.AddrPortFrom(ip, uint16(port)), nil
	default:
		ip, err := netip.ParseAddr(td.id)
		if err != nil || !ip.Is4() {
			return k, "", netip.AddrPort{}, senderErr("ValidationError", "The IP address '%s' is not a valid IPv4 address", td.id)
		}
		if !f.allowed(ip) {
			return k, "", netip.AddrPort{}, senderErr("InvalidTarget", "The IP address '%s' is not within the networks of this fake (%v)", td.id, f.opts.Networks)
		}
		if td.zone != "" && td.zone != "all" && !slices.Contains(f.opts.Zones, td.zone) {
			return k, "", netip.AddrPort{}, senderErr("ValidationError", "Availability zone '%s' is not valid", td.zone)
		}
		k.id = ip.String()
		return k, td.zone, netip.AddrPortFrom(ip, uint16(port)), nil
	}
}

func (f *Fake) registerTargets(r *http.Request, _ *xw) *apiError {
	tds, e := targetDescs(r)
	if e != nil {
		return e
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	g, e := f.groupOf(r)
	if e != nil {
		return e
	}
	if len(tds) == 0 {
		return senderErr("ValidationError", "At least one target must be specified")
	}
	type reg struct {
		k    key
		zone string
		addr netip.AddrPort
	}
	regs := make([]reg, 0, len(tds))
	for _, td := range tds {
		k, zone, addr, e := f.resolve(g, td)
		if e != nil {
			return e // all or nothing, as AWS
		}
		regs = append(regs, reg{k, zone, addr})
	}
	for _, x := range regs {
		g.register(x.k, x.zone, x.addr)
	}
	return nil
}

func (f *Fake) deregisterTargets(r *http.Request, _ *xw) *apiError {
	tds, e := targetDescs(r)
	if e != nil {
		return e
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	g, e := f.groupOf(r)
	if e != nil {
		return e
	}
	if len(tds) == 0 {
		return senderErr("ValidationError", "At least one target must be specified")
	}
	keys := make([]key, 0, len(tds))
	for _, td := range tds {
		k, _, _, e := f.resolve(g, td)
		if e != nil {
			return e
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		g.deregister(k) // not registered: nothing to do
	}
	return nil
}

func (f *Fake) describeTargetHealth(r *http.Request, w *xw) *apiError {
	tds, e := targetDescs(r)
	if e != nil {
		return e
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	g, e := f.groupOf(r)
	if e != nil {
		return e
	}
	w.open("TargetHealthDescriptions")
	write := func(id string, port int, zone, state, reason, desc string) {
		w.open("member")
		hcPort := g.cfg.HealthCheckPort
		if hcPort == "traffic-port" {
			hcPort = strconv.Itoa(port)
		}
		w.elem("HealthCheckPort", hcPort)
		w.open("Target")
		w.elem("Id", id)
		w.elem("Port", strconv.Itoa(port))
		if zone != "" {
			w.elem("AvailabilityZone", zone)
		}
		w.close("Target")
		w.open("TargetHealth")
		w.elem("State", state)
		if reason != "" {
			w.elem("Reason", reason)
			w.elem("Description", desc)
		}
		w.close("TargetHealth")
		w.close("member")
	}
	if len(tds) == 0 {
		for _, t := range g.sorted() {
			write(t.id, t.port, t.zone, t.state, t.reason, t.desc)
		}
	}
	for _, td := range tds {
		k, zone, _, e := f.resolve(g, td)
		if e != nil {
			return e
		}
		if t, ok := g.targets[k]; ok {
			write(t.id, t.port, t.zone, t.state, t.reason, t.desc)
		} else {
			write(k.id, k.port, zone, stateUnused, reasonNotRegistered, "Target is not registered to the target group")
		}
	}
	w.close("TargetHealthDescriptions")
	return nil
}

func (f *Fake) describeTargetGroups(r *http.Request, w *xw) *apiError {
	arns, names := members(r, "TargetGroupArns"), members(r, "Names")
	pageSize, e := pageSizeOf(r)
	if e != nil {
		return e
	}
	start := 0
	if m := r.Form.Get("Marker"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 {
			return senderErr("ValidationError", "Invalid marker '%s'", m)
		}
		start = n
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var sel []*group
	switch {
	case len(arns) > 0 && len(names) > 0:
		return senderErr("ValidationError", "Target group names and target group ARNs cannot be specified at the same time")
	case len(arns) > 0:
		for _, a := range arns {
			g, ok := f.groups[a]
			if !ok {
				return notFound(a)
			}
			sel = append(sel, g)
		}
	case len(names) > 0:
		for _, n := range names {
			var found *group
			for _, g := range f.groups {
				if g.cfg.Name == n {
					found = g
				}
			}
			if found == nil {
				return senderErr("TargetGroupNotFound", "One or more target groups not found")
			}
			sel = append(sel, found)
		}
	default:
		for _, a := range f.order {
			sel = append(sel, f.groups[a])
		}
	}
	start = min(start, len(sel))
	end := min(start+pageSize, len(sel))
	w.open("TargetGroups")
	for _, g := range sel[start:end] {
		f.writeTargetGroup(w, g)
	}
	w.close("TargetGroups")
	if end < len(sel) {
		w.elem("NextMarker", strconv.Itoa(end))
	}
	return nil
}

func (f *Fake) describeTags(r *http.Request, w *xw) *apiError {
	arns := members(r, "ResourceArns")
	if len(arns) == 0 || len(arns) > 20 {
		return senderErr("ValidationError", "Between 1 and 20 resource ARNs must be specified")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.open("TagDescriptions")
	for _, a := range arns {
		tp, e := f.tagsOf(a)
		if e != nil {
			return e
		}
		tags := *tp
		w.open("member")
		w.elem("ResourceArn", a)
		w.open("Tags")
		keys := make([]string, 0, len(tags))
		for k := range tags {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			w.open("member")
			w.elem("Key", k)
			w.elem("Value", tags[k])
			w.close("member")
		}
		w.close("Tags")
		w.close("member")
	}
	w.close("TagDescriptions")
	return nil
}

func (f *Fake) describeTargetGroupAttributes(r *http.Request, w *xw) *apiError {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, e := f.groupOf(r)
	if e != nil {
		return e
	}
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

// pageSizeOf reads PageSize of a Describe call: 1 to 400, default 400.
func pageSizeOf(r *http.Request) (int, *apiError) {
	s := r.Form.Get("PageSize")
	if s == "" {
		return 400, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 400 {
		return 0, senderErr("ValidationError", "Page size must be between 1 and 400")
	}
	return n, nil
}

// writeTargetGroup writes one TargetGroups member. Caller holds f.mu.
func (f *Fake) writeTargetGroup(w *xw, g *group) {
	c := g.cfg
	w.open("member")
	w.elem("TargetGroupArn", g.arn)
	w.elem("TargetGroupName", c.Name)
	w.elem("Protocol", c.Protocol)
	w.elem("Port", strconv.Itoa(c.Port))
	w.elem("VpcId", "vpc-0fa4e5a8f0e0c0ffe")
	w.elem("HealthCheckProtocol", "HTTP")
	w.elem("HealthCheckPort", c.HealthCheckPort)
	w.elem("HealthCheckEnabled", "true")
	w.elem("HealthCheckIntervalSeconds", strconv.Itoa(int(c.HealthCheckInterval/time.Second)))
	w.elem("HealthCheckTimeoutSeconds", strconv.Itoa(int(c.HealthCheckTimeout/time.Second)))
	w.elem("HealthyThresholdCount", strconv.Itoa(c.HealthyThreshold))
	w.elem("UnhealthyThresholdCount", strconv.Itoa(c.UnhealthyThreshold))
	w.elem("HealthCheckPath", c.HealthCheckPath)
	w.open("Matcher")
	m := g.matcher()
	if m[0] == m[1] {
		w.elem("HttpCode", strconv.Itoa(m[0]))
	} else {
		w.elem("HttpCode", fmt.Sprintf("%d-%d", m[0], m[1]))
	}
	w.close("Matcher")
	w.open("LoadBalancerArns")
	for _, arn := range f.loadBalancersOf(g.arn) {
		w.elem("member", arn)
	}
	w.close("LoadBalancerArns")
	w.elem("TargetType", c.TargetType)
	w.elem("IpAddressType", "ipv4")
	w.close("member")
}

// attributes are the group's attributes as DescribeTargetGroupAttributes
// lists them. Caller holds f.mu.
func (g *group) attributes() [][2]string {
	attrs := [][2]string{
		{"deregistration_delay.timeout_seconds", strconv.Itoa(int(g.cfg.DeregistrationDelay / time.Second))},
		{"stickiness.enabled", cmp.Or(g.attrs["stickiness.enabled"], "false")},
		{"load_balancing.cross_zone.enabled", "use_load_balancer_configuration"},
	}
	if !g.isHTTP() {
		attrs = append(attrs,
			[2]string{"deregistration_delay.connection_termination.enabled", cmp.Or(g.attrs["deregistration_delay.connection_termination.enabled"], "false")},
			[2]string{"preserve_client_ip.enabled", cmp.Or(g.attrs["preserve_client_ip.enabled"], "true")},
			[2]string{"proxy_protocol_v2.enabled", cmp.Or(g.attrs["proxy_protocol_v2.enabled"], "false")})
	}
	return attrs
}
