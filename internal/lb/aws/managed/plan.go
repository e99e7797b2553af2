package managed

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"sluice.dev/sluice/api/v1alpha1"
)

// Found is what exists in AWS for a binding: resources tagged with its
// cluster and UID, and target groups tagged with its cluster and frontend
// but no UID (an earlier release's hand-made, tag-discovered group:
// adopted, never deleted).
type Found struct {
	LoadBalancers []LoadBalancer
	TargetGroups  []TargetGroup
	Listeners     []FoundListener
}

// LoadBalancer is a found load balancer.
type LoadBalancer struct {
	ARN, Name, Type, Scheme string
	DNSName, ZoneID         string
	Set                     int64
}

// TargetGroup is a found target group.
type TargetGroup struct {
	ARN, Name, Protocol, TargetType string
	Port                            int32
	Set                             int64
	// Owned: tagged with the binding's UID. Not owned: adopted.
	Owned       bool
	HealthCheck v1alpha1.ManagedHealthCheck
	Attributes  map[string]string
	// Healthy counts its healthy targets.
	Healthy int
}

// FoundListener is a listener of a found load balancer.
type FoundListener struct {
	ARN, LoadBalancer string
	Port              int32
	Protocol          string
	SSLPolicy         string
	TargetGroup       string
	// Certificates: the default first, then the others.
	Certificates []string
}

// Kind names an action.
type Kind string

// The actions, named after the ELBv2 calls.
const (
	CreateTargetGroup           Kind = "CreateTargetGroup"
	ModifyTargetGroup           Kind = "ModifyTargetGroup"
	ModifyTargetGroupAttributes Kind = "ModifyTargetGroupAttributes"
	CreateLoadBalancer          Kind = "CreateLoadBalancer"
	CreateListener              Kind = "CreateListener"
	ModifyListener              Kind = "ModifyListener"
	AddListenerCertificates     Kind = "AddListenerCertificates"
	RemoveListenerCertificates  Kind = "RemoveListenerCertificates"
	DeleteListener              Kind = "DeleteListener"
	DeleteLoadBalancer          Kind = "DeleteLoadBalancer"
	DeleteTargetGroup           Kind = "DeleteTargetGroup"
)

// Action is one ELBv2 call. Fields not used by its Kind are zero.
type Action struct {
	Kind Kind
	// ARN is the resource acted on (empty for creates).
	ARN string
	// Name and Set of a created load balancer or target group.
	Name string
	Set  int64
	// LoadBalancer and TargetGroup a listener is created on / forwards to.
	LoadBalancer, TargetGroup string
	Listener                  Listener
	// Certificates to add or remove; for CreateListener and ModifyListener
	// the first is the default.
	Certificates []string
	// Attributes to set (ModifyTargetGroupAttributes).
	Attributes map[string]string
	// Reason says why, for logs and Events.
	Reason string
}

func (a Action) String() string {
	s := string(a.Kind)
	switch {
	case a.ARN != "":
		s += " " + a.ARN
	case a.Name != "":
		s += " " + a.Name
	case a.Kind == CreateListener:
		s += fmt.Sprintf(" %s:%d on %s", a.Listener.Protocol, a.Listener.Port, a.LoadBalancer)
	}
	if a.Reason != "" {
		s += " (" + a.Reason + ")"
	}
	return s
}

// Plan is the result of planning.
type Plan struct {
	// Actions in the order to run them. Creates come before the listeners
	// that need their ARNs: a plan with creates is followed by another
	// round once they are found.
	Actions []Action
	// Refused says which changes wait for sluice.dev/confirm-replace.
	Refused []string
	// Waiting says what the plan waits for (an old set is kept until the
	// new target group has a healthy target).
	Waiting []string
	// Current is the set now serving (its load balancer and target group;
	// empty while not created yet).
	Current struct{ LoadBalancer, TargetGroup string }
}

// set is one load balancer with its target group and listeners.
type set struct {
	n         int64
	lb        *LoadBalancer
	tg        *TargetGroup
	listeners []FoundListener
}

// sets groups what was found by set number, oldest first. An adopted
// group without a set number joins the oldest set (set 0 when no owned
// set exists).
func sets(f Found) []*set {
	by := map[int64]*set{}
	get := func(n int64) *set {
		if by[n] == nil {
			by[n] = &set{n: n}
		}
		return by[n]
	}
	for i := range f.LoadBalancers {
		l := &f.LoadBalancers[i]
		get(l.Set).lb = l
	}
	var adopted []*TargetGroup
	for i := range f.TargetGroups {
		g := &f.TargetGroups[i]
		if !g.Owned {
			adopted = append(adopted, g)
			continue
		}
		get(g.Set).tg = g
	}
	out := slices.SortedFunc(maps.Values(by), func(a, b *set) int { return cmp.Compare(a.n, b.n) })
	if len(adopted) > 0 {
		slices.SortFunc(adopted, func(a, b *TargetGroup) int { return cmp.Compare(a.ARN, b.ARN) })
		if len(out) == 0 {
			out = []*set{{n: 0}}
		}
		if out[0].tg == nil {
			out[0].tg = adopted[0]
		}
	}
	for _, s := range out {
		if s.lb == nil {
			continue
		}
		for _, l := range f.Listeners {
			if l.LoadBalancer == s.lb.ARN {
				s.listeners = append(s.listeners, l)
			}
		}
		slices.SortFunc(s.listeners, func(a, b FoundListener) int { return cmp.Compare(a.Port, b.Port) })
	}
	return out
}

// immutable lists what differs between d and a set in ways AWS cannot
// change in place.
func immutable(d Desired, s *set) []string {
	var out []string
	if s.lb != nil {
		if s.lb.Type != d.Type {
			out = append(out, fmt.Sprintf("load balancer type %s → %s", s.lb.Type, d.Type))
		}
		if s.lb.Scheme != d.Scheme {
			out = append(out, fmt.Sprintf("scheme %s → %s", s.lb.Scheme, d.Scheme))
		}
	}
	if s.tg != nil {
		if s.tg.TargetType != d.TargetType {
			out = append(out, fmt.Sprintf("target type %s → %s", s.tg.TargetType, d.TargetType))
		}
		if s.tg.Protocol != TargetProtocol(d.Type) && (s.lb == nil || s.lb.Type == d.Type) {
			out = append(out, fmt.Sprintf("target group protocol %s → %s", s.tg.Protocol, TargetProtocol(d.Type)))
		}
	}
	return out
}

// Build plans the actions that take found to d.
func Build(d Desired, f Found) Plan {
	var p Plan
	all := sets(f)
	var cur *set
	if len(all) > 0 {
		cur = all[len(all)-1]
	}
	if cur != nil {
		if diff := immutable(d, cur); len(diff) > 0 {
			if !d.ConfirmReplace {
				for _, x := range diff {
					p.Refused = append(p.Refused, fmt.Sprintf("%s cannot change in place; set the annotation %s: %q to replace the load balancer (new resources are created first)",
						x, v1alpha1.AnnotationConfirmReplace, strconv.FormatInt(d.Set, 10)))
				}
			} else {
				cur = &set{n: max(d.Set, cur.n+1)}
				all = append(all, cur)
			}
		}
	}
	if cur == nil {
		cur = &set{n: d.Set}
		all = append(all, cur)
	}
	// A refused change keeps the current set's immutable settings, so
	// in-place changes still apply.
	keep := d
	if len(p.Refused) > 0 {
		if cur.lb != nil {
			keep.Type, keep.Scheme = cur.lb.Type, cur.lb.Scheme
		}
		if cur.tg != nil {
			keep.TargetType = cur.tg.TargetType
		}
	}
	p.Actions = append(p.Actions, ensure(keep, cur)...)
	if cur.lb != nil {
		p.Current.LoadBalancer = cur.lb.ARN
	}
	if cur.tg != nil {
		p.Current.TargetGroup = cur.tg.ARN
	}
	for _, old := range all[:len(all)-1] {
		if cur.tg == nil || cur.lb == nil || cur.tg.Healthy == 0 && old.tg != nil && old.tg.Healthy > 0 {
			p.Waiting = append(p.Waiting, fmt.Sprintf("set %d is kept until the target group of set %d has a healthy target", old.n, cur.n))
			continue
		}
		p.Actions = append(p.Actions, teardown(old)...)
	}
	return p
}

// ensure plans the creates and in-place changes of one set.
func ensure(d Desired, s *set) []Action {
	var out []Action
	name := SetName(d.Base, s.n)
	if s.tg == nil {
		out = append(out, Action{Kind: CreateTargetGroup, Name: name, Set: s.n, Reason: "missing"})
	} else {
		if hc := healthCheckChange(d.HealthCheck, s.tg.HealthCheck); hc != "" {
			out = append(out, Action{Kind: ModifyTargetGroup, ARN: s.tg.ARN, Reason: hc})
		}
		changed := map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(d.Attributes)) {
			if s.tg.Attributes[k] != d.Attributes[k] {
				changed[k] = d.Attributes[k]
			}
		}
		if len(changed) > 0 {
			out = append(out, Action{Kind: ModifyTargetGroupAttributes, ARN: s.tg.ARN, Attributes: changed,
				Reason: fmt.Sprintf("%d attributes differ", len(changed))})
		}
	}
	if s.lb == nil {
		out = append(out, Action{Kind: CreateLoadBalancer, Name: name, Set: s.n, Reason: "missing"})
	}
	if s.lb == nil || s.tg == nil {
		return out // listeners once both exist
	}
	byPort := map[int32]FoundListener{}
	for _, l := range s.listeners {
		byPort[l.Port] = l
	}
	for _, want := range d.Listeners {
		var certs []string
		if want.Secure() {
			certs = d.Certificates
		}
		have, ok := byPort[want.Port]
		delete(byPort, want.Port)
		if !ok {
			if want.Secure() && len(certs) == 0 {
				continue // no certificate yet: reported by the caller
			}
			first := certs[:min(1, len(certs))]
			// The other certificates are added once the listener is
			// found: next round.
			out = append(out, Action{Kind: CreateListener, LoadBalancer: s.lb.ARN, TargetGroup: s.tg.ARN, Listener: want, Certificates: first, Reason: "missing"})
			continue
		}
		out = append(out, listenerChanges(want, have, s.tg.ARN, certs)...)
	}
	for _, port := range slices.Sorted(maps.Keys(byPort)) {
		out = append(out, Action{Kind: DeleteListener, ARN: byPort[port].ARN, Reason: "port not in the spec"})
	}
	return out
}

// listenerChanges plans ModifyListener and certificate changes of one
// existing listener.
func listenerChanges(want Listener, have FoundListener, tg string, certs []string) []Action {
	var out []Action
	var def string
	if len(certs) > 0 {
		def = certs[0]
	}
	haveDef := ""
	if len(have.Certificates) > 0 {
		haveDef = have.Certificates[0]
	}
	var why []string
	if have.Protocol != want.Protocol {
		why = append(why, "protocol "+have.Protocol+" → "+want.Protocol)
	}
	if want.SSLPolicy != "" && have.SSLPolicy != want.SSLPolicy {
		why = append(why, "ssl policy")
	}
	if have.TargetGroup != tg {
		why = append(why, "target group")
	}
	if want.Secure() && def != "" && haveDef != def {
		why = append(why, "default certificate")
	}
	if want.Secure() && def == "" && have.Protocol != want.Protocol {
		return nil // cannot become TLS without a certificate: reported by the caller
	}
	modify := Action{Kind: ModifyListener, ARN: have.ARN, Listener: want, TargetGroup: tg, Reason: fmt.Sprint(why)}
	if want.Secure() && def != "" {
		modify.Certificates = []string{def}
	}
	if !want.Secure() || have.Protocol != "TLS" && have.Protocol != "HTTPS" {
		// Not secure, or becoming secure: the listener takes extra
		// certificates only once it is TLS/HTTPS (next round).
		if len(why) > 0 {
			out = append(out, modify)
		}
		return out
	}
	// Never a moment without a certificate a host uses: add first (the
	// old default too, when it stays chosen and a new default replaces
	// it), then change the default, then remove what is no longer chosen.
	var others []string
	if len(have.Certificates) > 1 {
		others = have.Certificates[1:]
	}
	attached := append([]string{haveDef}, others...)
	var add, remove []string
	for _, c := range certs[min(1, len(certs)):] {
		if !slices.Contains(attached, c) {
			add = append(add, c)
		}
	}
	if haveDef != "" && haveDef != def && slices.Contains(certs, haveDef) && !slices.Contains(others, haveDef) {
		add = append(add, haveDef)
	}
	for _, c := range others {
		if !slices.Contains(certs, c) && !slices.Contains(remove, c) {
			remove = append(remove, c)
		}
	}
	if len(add) > 0 {
		out = append(out, Action{Kind: AddListenerCertificates, ARN: have.ARN, Certificates: add, Reason: "new certificates"})
	}
	if len(why) > 0 {
		out = append(out, modify)
	}
	if len(remove) > 0 {
		out = append(out, Action{Kind: RemoveListenerCertificates, ARN: have.ARN, Certificates: remove, Reason: "certificates no longer chosen"})
	}
	return out
}

// healthCheckChange describes how the found health check differs from
// the desired one (zero desired fields: anything goes).
func healthCheckChange(want, have v1alpha1.ManagedHealthCheck) string {
	var why []string
	if want.Path != "" && want.Path != have.Path {
		why = append(why, "path")
	}
	if want.Port != "" && want.Port != have.Port {
		why = append(why, "port")
	}
	if want.IntervalSeconds != 0 && want.IntervalSeconds != have.IntervalSeconds {
		why = append(why, "interval")
	}
	if want.TimeoutSeconds != 0 && want.TimeoutSeconds != have.TimeoutSeconds {
		why = append(why, "timeout")
	}
	if want.HealthyThreshold != 0 && want.HealthyThreshold != have.HealthyThreshold {
		why = append(why, "healthy threshold")
	}
	if want.UnhealthyThreshold != 0 && want.UnhealthyThreshold != have.UnhealthyThreshold {
		why = append(why, "unhealthy threshold")
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("health check %v differs", why)
}

// teardown deletes a set: listeners, then the load balancer, then the
// target group if sluice created it (an adopted one stays).
func teardown(s *set) []Action {
	var out []Action
	for _, l := range s.listeners {
		out = append(out, Action{Kind: DeleteListener, ARN: l.ARN, Reason: "set " + strconv.FormatInt(s.n, 10) + " is replaced or deleted"})
	}
	if s.lb != nil {
		out = append(out, Action{Kind: DeleteLoadBalancer, ARN: s.lb.ARN, Reason: "set " + strconv.FormatInt(s.n, 10) + " is replaced or deleted"})
	}
	if s.tg != nil && s.tg.Owned {
		out = append(out, Action{Kind: DeleteTargetGroup, ARN: s.tg.ARN, Reason: "set " + strconv.FormatInt(s.n, 10) + " is replaced or deleted"})
	}
	return out
}

// Teardown plans the deletion of everything found that sluice created,
// for a deleted binding: listeners, load balancers, then owned target
// groups. Adopted target groups stay.
func Teardown(f Found) []Action {
	var out []Action
	for _, s := range sets(f) {
		out = append(out, teardown(s)...)
	}
	// Listeners first everywhere, then load balancers, then groups.
	order := map[Kind]int{DeleteListener: 0, DeleteLoadBalancer: 1, DeleteTargetGroup: 2}
	slices.SortStableFunc(out, func(a, b Action) int { return cmp.Compare(order[a.Kind], order[b.Kind]) })
	return out
}
