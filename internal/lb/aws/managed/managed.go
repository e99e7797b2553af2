// Package managed plans the AWS load balancers sluice creates and owns for
// bindings with spec.provider.aws.managed: what should exist (Desired, from
// the binding), what does (Found, by sluice's tags), and the ordered
// actions between them (Plan). It also chooses ACM certificates for the
// Ingress hosts (Select). Everything here is pure: no I/O, clock or
// logger; the controller's managedlb reconciler reads AWS, calls these
// functions and applies the actions.
//
//	binding spec ─► Desired ─┐
//	AWS (by tags) ─► Found ──┴► Plan ─► actions (create, modify in place, replace when confirmed, delete)
//	Ingress hosts + ACM ─► Select ─► listener certificates
//
// Resources are grouped in sets: one load balancer, one target group and
// the load balancer's listeners, tagged with the set's number (the
// binding generation that created it). A change AWS cannot make in place
// (type, scheme, target type) creates a new set once confirmed; the old
// set is deleted only after the new target group has a healthy target.
package managed

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"sluice.dev/sluice/api/v1alpha1"
)

// Tags sluice puts on what it creates. ClusterTag and FrontendTag are also
// how the binding reconciler discovers the target group (lb/aws.Discover),
// so a managed group gets its targets with no further wiring.
const (
	ClusterTag  = "sluice.dev/cluster"
	FrontendTag = "sluice.dev/frontend"
	// OwnerTag holds the binding's UID: only resources carrying it are
	// sluice's to change and delete.
	OwnerTag = "sluice.dev/binding-uid"
	// SetTag numbers a set of resources (the generation that created it).
	SetTag = "sluice.dev/set"
)

// Desired is what a managed binding asks for.
type Desired struct {
	// Base is the name stem of the set's load balancer and target group
	// (a set's name is Base-<set>).
	Base        string
	Set         int64 // the number a new set gets: the binding's generation
	Type        string
	Scheme      string
	Subnets     []string
	SubnetTags  map[string]string
	VPCID       string
	TargetType  string // "ip" or "instance"
	Port        int32  // the target group's port
	Listeners   []Listener
	HealthCheck v1alpha1.ManagedHealthCheck
	// Attributes are the target group attributes to set, by AWS key.
	Attributes map[string]string
	// Tags go on everything created: the user's and sluice's.
	Tags map[string]string
	// Certificates for TLS and HTTPS listeners, the default one first.
	Certificates []string
	// ConfirmReplace: the user confirmed replacing what cannot change in
	// place (sluice.dev/confirm-replace equals the generation).
	ConfirmReplace bool
}

// Listener is one desired listener.
type Listener struct {
	Port      int32
	Protocol  string
	SSLPolicy string
}

// Secure reports whether the listener takes certificates.
func (l Listener) Secure() bool { return l.Protocol == "TLS" || l.Protocol == "HTTPS" }

// DesiredFor translates a managed binding. cluster is the controller's
// --aws-cluster; certs are the chosen certificates (Select).
func DesiredFor(b *v1alpha1.LoadBalancerBinding, cluster string, certs []string) (Desired, error) {
	if b.Spec.Provider.AWS == nil || b.Spec.Provider.AWS.Managed == nil {
		return Desired{}, fmt.Errorf("planning a managed load balancer: binding %s/%s is not managed", b.Namespace, b.Name)
	}
	if cluster == "" {
		return Desired{}, fmt.Errorf("planning a managed load balancer: the controller has no --aws-cluster to tag with")
	}
	m := b.Spec.Provider.AWS.Managed
	d := Desired{
		Base:           Base(cluster, b.Namespace, b.Name, string(b.UID)),
		Set:            b.Generation,
		Type:           or(m.Type, "network"),
		Scheme:         or(m.Scheme, "internet-facing"),
		Subnets:        m.Subnets,
		SubnetTags:     m.SubnetTags,
		VPCID:          m.VPCID,
		TargetType:     "ip",
		Port:           80,
		HealthCheck:    m.HealthCheck,
		Attributes:     map[string]string{},
		Tags:           map[string]string{},
		Certificates:   certs,
		ConfirmReplace: b.Annotations[v1alpha1.AnnotationConfirmReplace] == strconv.FormatInt(b.Generation, 10),
	}
	if b.Spec.TargetType == v1alpha1.TargetInstance {
		d.TargetType = "instance"
	}
	if p := b.Spec.Port.IntValue(); p > 0 && p < 65536 {
		d.Port = int32(p)
	}
	for _, l := range m.Listeners {
		d.Listeners = append(d.Listeners, Listener{Port: l.Port, Protocol: l.Protocol, SSLPolicy: l.SSLPolicy})
	}
	if a := m.TargetGroupAttributes; a != nil {
		if a.DeregistrationDelaySeconds != nil {
			d.Attributes["deregistration_delay.timeout_seconds"] = strconv.Itoa(int(*a.DeregistrationDelaySeconds))
		}
		if a.PreserveClientIP != nil {
			d.Attributes["preserve_client_ip.enabled"] = strconv.FormatBool(*a.PreserveClientIP)
		}
		if a.ProxyProtocolV2 != nil {
			d.Attributes["proxy_protocol_v2.enabled"] = strconv.FormatBool(*a.ProxyProtocolV2)
		}
	}
	maps.Copy(d.Tags, m.Tags)
	d.Tags[ClusterTag] = cluster
	d.Tags[FrontendTag] = b.Name
	d.Tags[OwnerTag] = string(b.UID)
	return d, nil
}

// Base is the name stem of a binding's resources: up to 12 characters of
// its name and 8 hex digits of a hash of cluster, namespace, name and UID,
// so that names are stable across restarts and unique per binding. AWS
// allows 32 characters; Base-<set> fits for sets below 10^10.
func Base(cluster, namespace, name, uid string) string {
	h := sha256.Sum256([]byte(cluster + "/" + namespace + "/" + name + "/" + uid))
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if b.Len() == 12 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else if b.Len() > 0 {
			b.WriteByte('-')
		}
	}
	stem := strings.Trim(b.String(), "-")
	if stem == "" {
		stem = "sluice"
	}
	return stem + "-" + hex.EncodeToString(h[:4])
}

// SetName is the name of a set's load balancer and target group.
func SetName(base string, set int64) string { return base + "-" + strconv.FormatInt(set, 10) }

// TargetProtocol is the target group protocol for a load balancer type.
func TargetProtocol(typ string) string {
	if typ == "application" {
		return "HTTP"
	}
	return "TCP"
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
