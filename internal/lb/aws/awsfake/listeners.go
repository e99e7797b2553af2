package awsfake

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// listener is a listener of a created load balancer. It carries traffic
// on 127.0.0.1 (see Fake.ListenerAddress) to the target group of its
// default forward action, chosen again for every connection (NLB: TCP,
// TLS) or request (ALB: HTTP, HTTPS), so ModifyListener moves traffic at
// once. TLS and HTTPS listeners terminate TLS with a self-signed
// certificate per ACM certificate, chosen by SNI among the listener's
// certificates (the default one when none matches); the targets get plain
// bytes, as from AWS.
type listener struct {
	arn, lb   string
	port      int
	protocol  string
	sslPolicy string
	target    string   // forward target group ARN
	def       string   // default certificate ARN
	certs     []string // additional certificate ARNs, in order added
	tags      map[string]string

	ln    net.Listener
	conns chan net.Conn // ALB: accepted connections for srv
	srv   *http.Server
	done  chan struct{}
	once  *sync.Once
}

// ListenerAddress returns where a created load balancer's listener on port
// carries traffic.
func (f *Fake) ListenerAddress(lbARN string, port int) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.elb.lorder {
		if l := f.elb.listeners[a]; l.lb == lbARN && l.port == port && l.ln != nil {
			return l.ln.Addr().String(), true
		}
	}
	return "", false
}

// openTraffic starts carrying l's traffic. Caller holds f.mu.
func (f *Fake) openTraffic(l *listener, alb bool) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	l.ln, l.done, l.once = ln, make(chan struct{}), &sync.Once{}
	if alb {
		l.conns = make(chan net.Conn)
		l.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			g := f.groups[l.target]
			f.mu.Unlock()
			if g == nil {
				http.Error(w, "503 Service Temporarily Unavailable", http.StatusServiceUnavailable)
				return
			}
			g.serveHTTP(w, r)
		}), ReadHeaderTimeout: 10 * time.Second}
		f.wg.Go(func() { _ = l.srv.Serve(chanListener{l}) })
	}
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			g, proto := f.groups[l.target], l.protocol
			f.mu.Unlock()
			if proto == "TLS" || proto == "HTTPS" {
				c = tls.Server(c, &tls.Config{GetCertificate: f.certificateFor(l)})
			}
			switch {
			case alb:
				select {
				case l.conns <- c:
				case <-l.done:
					_ = c.Close()
				}
			case g == nil:
				reset(c)
			default:
				f.wg.Go(func() { g.forward(c, "") })
			}
		}
	})
	return nil
}

// chanListener hands an ALB listener's accepted (and maybe TLS-wrapped)
// connections to its HTTP server.
type chanListener struct{ l *listener }

func (c chanListener) Accept() (net.Conn, error) {
	select {
	case conn := <-c.l.conns:
		return conn, nil
	case <-c.l.done:
		return nil, net.ErrClosed
	}
}
func (c chanListener) Close() error   { return nil }
func (c chanListener) Addr() net.Addr { return c.l.ln.Addr() }

// closeTraffic stops l's traffic. Caller holds f.mu.
func (l *listener) closeTraffic() {
	if l.once == nil {
		return
	}
	l.once.Do(func() {
		close(l.done)
		_ = l.ln.Close()
		if l.srv != nil {
			_ = l.srv.Close()
		}
	})
}

// removeListener deletes a listener. Caller holds f.mu.
func (f *Fake) removeListener(arn string) {
	if l, ok := f.elb.listeners[arn]; ok {
		l.closeTraffic()
	}
	delete(f.elb.listeners, arn)
	f.elb.lorder = slices.DeleteFunc(f.elb.lorder, func(a string) bool { return a == arn })
}

// forwardTarget reads DefaultActions: exactly one forward action to one
// target group.
func forwardTarget(r *http.Request) (string, bool, *apiError) {
	p := "DefaultActions.member.1."
	typ := r.Form.Get(p + "Type")
	if typ == "" {
		return "", false, nil
	}
	if typ != "forward" || r.Form.Get("DefaultActions.member.2.Type") != "" {
		return "", false, senderErr("ValidationError", "This fake supports one forward default action, not '%s'", typ)
	}
	tg := cmp.Or(r.Form.Get(p+"TargetGroupArn"), r.Form.Get(p+"ForwardConfig.TargetGroups.member.1.TargetGroupArn"))
	if tg == "" {
		return "", false, senderErr("ValidationError", "A forward action must name a target group")
	}
	return tg, true, nil
}

// certificateParams reads Certificates.member.N.CertificateArn.
func certificateParams(r *http.Request) []string {
	var out []string
	for i := 1; i <= maxMembers; i++ {
		v := r.Form.Get("Certificates.member." + strconv.Itoa(i) + ".CertificateArn")
		if v == "" {
			break
		}
		out = append(out, v)
	}
	return out
}

// checkListener validates a listener's settings against its load balancer
// and target group. Caller holds f.mu.
func (f *Fake) checkListener(l *listener, lbType string) *apiError {
	alb := lbType == "application"
	switch {
	case alb && l.protocol != "HTTP" && l.protocol != "HTTPS",
		!alb && l.protocol != "TCP" && l.protocol != "TLS":
		return senderErr("ValidationError", "Protocol '%s' is not supported by a %s load balancer", l.protocol, lbType)
	}
	if l.port < 1 || l.port > 65535 {
		return senderErr("ValidationError", "A port between 1 and 65535 must be specified")
	}
	secure := l.protocol == "TLS" || l.protocol == "HTTPS"
	if secure && l.def == "" {
		return senderErr("CertificateNotFound", "A certificate must be specified for %s listeners", l.protocol)
	}
	if l.def != "" {
		if _, ok := f.elb.certs[l.def]; !ok {
			return senderErr("CertificateNotFound", "Certificate '%s' not found", l.def)
		}
	}
	g, ok := f.groups[l.target]
	if !ok {
		return notFound(l.target)
	}
	if alb != g.isHTTP() {
		return senderErr("IncompatibleProtocols", "The target group's protocol %s does not match a %s load balancer", g.cfg.Protocol, lbType)
	}
	for _, other := range f.loadBalancersOf(l.target) {
		if other != l.lb {
			return senderErr("TargetGroupAssociationLimit", "The target group '%s' is already in use by load balancer '%s'", l.target, other)
		}
	}
	for _, a := range f.elb.lorder {
		if o := f.elb.listeners[a]; o.arn != l.arn && o.lb == l.lb && o.port == l.port {
			return senderErr("DuplicateListener", "A listener already exists on port %d", l.port)
		}
	}
	return nil
}

func (f *Fake) createListener(r *http.Request, w *xw) *apiError {
	port, _ := strconv.Atoi(r.Form.Get("Port"))
	tg, ok, e := forwardTarget(r)
	if e != nil {
		return e
	}
	if !ok {
		return senderErr("ValidationError", "A default action must be specified")
	}
	tags, e := tagsParam(r)
	if e != nil {
		return e
	}
	certs := certificateParams(r)
	if len(certs) > 1 {
		return senderErr("ValidationError", "Only the default certificate may be given when creating a listener")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	lbARN := r.Form.Get("LoadBalancerArn")
	lbx, ok := f.elb.lbs[lbARN]
	if !ok {
		return lbNotFound(lbARN)
	}
	l := &listener{lb: lbARN, port: port, protocol: r.Form.Get("Protocol"), sslPolicy: r.Form.Get("SslPolicy"), target: tg, tags: tags}
	if len(certs) == 1 {
		l.def = certs[0]
	}
	if l.protocol == "TLS" || l.protocol == "HTTPS" {
		l.sslPolicy = cmp.Or(l.sslPolicy, "ELBSecurityPolicy-2016-08")
	}
	if e := f.checkListener(l, lbx.cfg.Type); e != nil {
		return e
	}
	_, rest, _ := strings.Cut(lbARN, ":loadbalancer/")
	l.arn = fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:listener/%s/%s", f.opts.Region, f.opts.AccountID, rest, randomID())
	if err := f.openTraffic(l, lbx.cfg.Type == "application"); err != nil {
		return &apiError{status: http.StatusInternalServerError, code: "InternalFailure", message: err.Error()}
	}
	if f.elb.listeners == nil {
		f.elb.listeners = map[string]*listener{}
	}
	f.elb.listeners[l.arn] = l
	f.elb.lorder = append(f.elb.lorder, l.arn)
	w.open("Listeners")
	writeListener(w, l)
	w.close("Listeners")
	return nil
}

func (f *Fake) modifyListener(r *http.Request, w *xw) *apiError {
	tg, hasTG, e := forwardTarget(r)
	if e != nil {
		return e
	}
	certs := certificateParams(r)
	if len(certs) > 1 {
		return senderErr("ValidationError", "Only the default certificate may be given")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	arn := r.Form.Get("ListenerArn")
	l, ok := f.elb.listeners[arn]
	if !ok {
		return listenerNotFound(arn)
	}
	next := *l
	if s := r.Form.Get("Port"); s != "" {
		next.port, _ = strconv.Atoi(s)
	}
	next.protocol = cmp.Or(r.Form.Get("Protocol"), l.protocol)
	next.sslPolicy = cmp.Or(r.Form.Get("SslPolicy"), l.sslPolicy)
	if hasTG {
		next.target = tg
	}
	if len(certs) == 1 {
		next.def = certs[0]
	}
	if next.protocol == "TCP" || next.protocol == "HTTP" {
		next.def, next.certs, next.sslPolicy = "", nil, ""
	}
	if e := f.checkListener(&next, f.elb.lbs[l.lb].cfg.Type); e != nil {
		return e
	}
	l.port, l.protocol, l.sslPolicy, l.target, l.def, l.certs = next.port, next.protocol, next.sslPolicy, next.target, next.def, next.certs
	w.open("Listeners")
	writeListener(w, l)
	w.close("Listeners")
	return nil
}

func (f *Fake) describeListeners(r *http.Request, w *xw) *apiError {
	lbARN, arns := r.Form.Get("LoadBalancerArn"), members(r, "ListenerArns")
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
	var sel []*listener
	switch {
	case (lbARN == "") == (len(arns) == 0):
		return senderErr("ValidationError", "Exactly one of LoadBalancerArn and ListenerArns must be specified")
	case lbARN != "":
		if _, ok := f.elb.lbs[lbARN]; !ok {
			return lbNotFound(lbARN)
		}
		for _, a := range f.elb.lorder {
			if f.elb.listeners[a].lb == lbARN {
				sel = append(sel, f.elb.listeners[a])
			}
		}
	default:
		for _, a := range arns {
			l, ok := f.elb.listeners[a]
			if !ok {
				return listenerNotFound(a)
			}
			sel = append(sel, l)
		}
	}
	start = min(start, len(sel))
	end := min(start+pageSize, len(sel))
	w.open("Listeners")
	for _, l := range sel[start:end] {
		writeListener(w, l)
	}
	w.close("Listeners")
	if end < len(sel) {
		w.elem("NextMarker", encodeMarker(end))
	}
	return nil
}

func (f *Fake) deleteListener(r *http.Request, _ *xw) *apiError {
	arn := r.Form.Get("ListenerArn")
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.elb.listeners[arn]; !ok {
		return listenerNotFound(arn)
	}
	f.removeListener(arn)
	return nil
}

func (f *Fake) addListenerCertificates(r *http.Request, w *xw) *apiError {
	certs := certificateParams(r)
	if len(certs) == 0 {
		return senderErr("ValidationError", "At least one certificate must be specified")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	arn := r.Form.Get("ListenerArn")
	l, ok := f.elb.listeners[arn]
	if !ok {
		return listenerNotFound(arn)
	}
	if l.protocol != "TLS" && l.protocol != "HTTPS" {
		return senderErr("ValidationError", "Certificates can only be added to TLS and HTTPS listeners")
	}
	next := slices.Clone(l.certs)
	for _, c := range certs {
		if _, ok := f.elb.certs[c]; !ok {
			return senderErr("CertificateNotFound", "Certificate '%s' not found", c)
		}
		if !slices.Contains(next, c) { // the default may be listed again, as on AWS
			next = append(next, c)
		}
	}
	if len(next) > maxListenerCertificates {
		return senderErr("TooManyCertificates", "A listener can have at most %d certificates besides its default certificate", maxListenerCertificates)
	}
	l.certs = next
	w.open("Certificates")
	for _, c := range certs {
		w.open("member")
		w.elem("CertificateArn", c)
		w.close("member")
	}
	w.close("Certificates")
	return nil
}

func (f *Fake) removeListenerCertificates(r *http.Request, _ *xw) *apiError {
	certs := certificateParams(r)
	if len(certs) == 0 {
		return senderErr("ValidationError", "At least one certificate must be specified")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	arn := r.Form.Get("ListenerArn")
	l, ok := f.elb.listeners[arn]
	if !ok {
		return listenerNotFound(arn)
	}
	if slices.Contains(certs, l.def) {
		return senderErr("OperationNotPermitted", "The default certificate cannot be removed; use ModifyListener")
	}
	l.certs = slices.DeleteFunc(l.certs, func(c string) bool { return slices.Contains(certs, c) })
	return nil
}

func (f *Fake) describeListenerCertificates(r *http.Request, w *xw) *apiError {
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
	arn := r.Form.Get("ListenerArn")
	l, ok := f.elb.listeners[arn]
	if !ok {
		return listenerNotFound(arn)
	}
	type entry struct {
		arn string
		def bool
	}
	var all []entry
	if l.def != "" {
		all = append(all, entry{l.def, true})
	}
	for _, c := range l.certs {
		all = append(all, entry{c, false})
	}
	start = min(start, len(all))
	end := min(start+pageSize, len(all))
	w.open("Certificates")
	for _, c := range all[start:end] {
		w.open("member")
		w.elem("CertificateArn", c.arn)
		w.elem("IsDefault", strconv.FormatBool(c.def))
		w.close("member")
	}
	w.close("Certificates")
	if end < len(all) {
		w.elem("NextMarker", encodeMarker(end))
	}
	return nil
}

// writeListener writes one Listeners member.
func writeListener(w *xw, l *listener) {
	w.open("member")
	w.elem("ListenerArn", l.arn)
	w.elem("LoadBalancerArn", l.lb)
	w.elem("Port", strconv.Itoa(l.port))
	w.elem("Protocol", l.protocol)
	if l.def != "" {
		w.open("Certificates")
		w.open("member")
		w.elem("CertificateArn", l.def)
		w.close("member")
		w.close("Certificates")
	}
	if l.sslPolicy != "" {
		w.elem("SslPolicy", l.sslPolicy)
	}
	w.open("DefaultActions")
	w.open("member")
	w.elem("Type", "forward")
	w.elem("TargetGroupArn", l.target)
	w.close("member")
	w.close("DefaultActions")
	w.close("member")
}
