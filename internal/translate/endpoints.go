package translate

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Endpoint checks. Any EndpointSlice labelled with a Service's name feeds
// that Service, and a tenant who can write EndpointSlices (or anyone in
// --manifests mode, where no API server validates them) could point an
// Ingress at an address the proxy must never call: the cloud's instance
// metadata, the proxy's own loopback, another namespace's Pods. So an
// endpoint is used only when
//
//   - its targetRef is a Pod ("v1" or no apiVersion) of the Service's own
//     namespace; an endpoint without a targetRef only with
//     Options.AllowEndpointsWithoutPod (selector-less Services), and
//   - its address is none of: unspecified (0.0.0.0/8, ::), loopback
//     (127.0.0.0/8, ::1; allowed with Options.AllowLoopbackEndpoints),
//     link-local (169.254.0.0/16, fe80::/10: the metadata address
//     169.254.169.254 of AWS, GCP, Azure, OpenStack ...), multicast,
//     broadcast, the reserved 240.0.0.0/4, AWS's instance services
//     (fd00:ec2::/64: metadata fd00:ec2::254, DNS, time), Azure's
//     platform address 168.63.129.16, Alibaba's metadata 100.100.100.200.
//     IPv6 forms that carry an IPv4 address (::ffff:a.b.c.d, ::a.b.c.d,
//     64:ff9b::a.b.c.d, 2002:AABB:CCDD::) are judged by that address;
//     64:ff9b:1::/48 (local NAT64) is refused whole.
//
//   - with Input.Pods set (the proxy and the controller watch Pods), the
//     Pod its targetRef names exists and has the endpoint's address among
//     its status.podIPs (a hostNetwork Pod's are its node's addresses).
//
// A targetRef is only a claim: a tenant who can write EndpointSlices can
// name its own Pod and give the address of another namespace's Pod, and
// the proxy would then send that tenant's traffic to the victim, from the
// proxy's address, past the victim's NetworkPolicy. Comparing the address
// with the named Pod's status stops that. The endpointslice controller
// publishes an endpoint only after the kubelet reported the Pod's IPs, so
// a true endpoint is not refused in normal operation; a slice that reaches
// the proxy before its Pod is refused until the Pod arrives, and the Pod's
// arrival reruns the translation. Without Input.Pods (--manifests mode,
// explain) the targetRef is taken at its word; the checks then stop only
// the forged ones that name no Pod, a Pod of another namespace, or a
// special address.

// PodAddresses is the index of Pods' addresses the endpoint checks compare
// an endpoint with. Implementations must be safe for concurrent use if the
// caller shares them between builds.
type PodAddresses interface {
	// PodIPs returns the status.podIPs of Pod namespace/name and true,
	// or false when no such Pod is known. Callers must not modify the
	// slice.
	PodIPs(namespace, name string) ([]string, bool)
}

// PodMap is a PodAddresses held in a map, by "namespace/name".
type PodMap map[string][]string

// PodIPs implements PodAddresses.
func (m PodMap) PodIPs(namespace, name string) ([]string, bool) {
	ips, ok := m[namespace+"/"+name]
	return ips, ok
}

var _ PodAddresses = PodMap(nil)

// refusal is one endpoint the checks refused: its address, the name of
// its EndpointSlice, and why.
type refusal struct {
	address, slice, reason string
}

// key orders refusals in a message.
func (r refusal) key() string { return r.address + " " + r.slice + " " + r.reason }

// Reasons for refused endpoints.
const (
	reasonNoTargetRef = "no targetRef: not a Pod's endpoint"
	reasonUnspecified = "unspecified address"
	reasonLoopback    = "loopback address"
	reasonLinkLocal   = "link-local address, the instance-metadata range"
	reasonMulticast   = "multicast address"
	reasonBroadcast   = "broadcast address"
	reasonReserved    = "reserved address"
	reasonMetadata    = "cloud instance-metadata or platform address"
	reasonNoPod       = "the targetRef Pod does not exist (yet)"
	reasonNotPodIP    = "address is not the targetRef Pod's"
)

// ReasonEndpointsRefused is the Problem of an Ingress whose Service has
// endpoints the checks refused.
const ReasonEndpointsRefused = "EndpointsRefused"

var (
	awsServices   = netip.MustParsePrefix("fd00:ec2::/64")
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local    = netip.MustParsePrefix("64:ff9b:1::/48")
	ipv4Compat    = netip.MustParsePrefix("::/96")
	sixToFour     = netip.MustParsePrefix("2002::/16")
	thisNetwork   = netip.MustParsePrefix("0.0.0.0/8")
	reserved4     = netip.MustParsePrefix("240.0.0.0/4")
	broadcast4    = netip.MustParseAddr("255.255.255.255")
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("168.63.129.16"),   // Azure platform (wireserver)
		netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud metadata
	}
)

// checkAddress parses an endpoint address and returns it with "" when it
// may be used, or the reason it may not. Zoned addresses are refused.
func checkAddress(s string, allowLoopback bool) (netip.Addr, string) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, "not an IP address"
	}
	if a.Zone() != "" {
		return a, "address with a zone"
	}
	return a, addressReason(a, allowLoopback)
}

// addressReason returns why a (without a zone) may not be an endpoint, or
// "".
func addressReason(a netip.Addr, allowLoopback bool) string {
	if a.Is6() {
		switch {
		case a.IsUnspecified():
			return reasonUnspecified
		case a.IsLoopback():
			if allowLoopback {
				return ""
			}
			return reasonLoopback
		case awsServices.Contains(a):
			return reasonMetadata
		case nat64Local.Contains(a):
			return reasonReserved
		}
		if v4, ok := embeddedIPv4(a); ok {
			return addressReason(v4, allowLoopback)
		}
	}
	switch {
	case a.IsUnspecified() || a.Is4() && thisNetwork.Contains(a):
		return reasonUnspecified
	case a.IsLoopback():
		if allowLoopback {
			return ""
		}
		return reasonLoopback
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return reasonLinkLocal
	case a.IsMulticast() || a.IsInterfaceLocalMulticast():
		return reasonMulticast
	case a == broadcast4:
		return reasonBroadcast
	case a.Is4() && reserved4.Contains(a):
		return reasonReserved
	case slices.Contains(metadataAddrs, a):
		return reasonMetadata
	}
	return ""
}

// embeddedIPv4 returns the IPv4 address an IPv6 address carries in a form
// that reaches it: IPv4-mapped, IPv4-compatible, the NAT64 well-known
// prefix, or 6to4.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case a.Is4In6(), ipv4Compat.Contains(a), nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// checkTargetRef returns why an endpoint of a slice in namespace ns may
// not be used because of its targetRef, or "".
func checkTargetRef(ref *corev1.ObjectReference, ns string, allowWithoutPod bool) string {
	switch {
	case ref == nil:
		if allowWithoutPod {
			return ""
		}
		return reasonNoTargetRef
	case ref.Kind != "Pod" || ref.APIVersion != "" && ref.APIVersion != "v1":
		return fmt.Sprintf("targetRef is a %s, not a Pod", quoteKind(ref))
	case ref.Namespace != ns:
		return fmt.Sprintf("targetRef is a Pod of namespace %q, not of the Service's namespace %s", ref.Namespace, ns)
	}
	return ""
}

// quoteKind names a targetRef's kind for a message, quoted since it is
// written by whoever wrote the slice.
func quoteKind(ref *corev1.ObjectReference) string {
	k := ref.Kind
	if ref.APIVersion != "" {
		k = ref.APIVersion + " " + k
	}
	return strconv.Quote(k)
}

// checkPodAddress returns why addr may not be an endpoint of the Pod ref
// names (already checked to be a Pod of the slice's namespace), or "".
// The address must equal one of the Pod's, exactly: an IPv4-mapped form of
// a Pod's IPv4 address is not the Pod's.
func checkPodAddress(addr netip.Addr, ref *corev1.ObjectReference, pods PodAddresses) string {
	ips, ok := pods.PodIPs(ref.Namespace, ref.Name)
	if !ok {
		return reasonNoPod
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a == addr {
			return ""
		}
	}
	return reasonNotPodIP
}

// checkEndpoint returns the endpoint's address and "" when it may be used,
// or the reason it may not. pods nil: the targetRef is not compared with
// the Pod's addresses.
func checkEndpoint(s *discoveryv1.EndpointSlice, ep *discoveryv1.Endpoint, pods PodAddresses, opts Options) (netip.Addr, string) {
	// Addresses are fungible; like kube-proxy, use the first.
	addr, why := checkAddress(ep.Addresses[0], opts.AllowLoopbackEndpoints)
	if why == "" && addr.Is4() != (s.AddressType == discoveryv1.AddressTypeIPv4) {
		why = "address of the other family than the slice's addressType " + string(s.AddressType)
	}
	if why == "" {
		why = checkTargetRef(ep.TargetRef, s.Namespace, opts.AllowEndpointsWithoutPod)
	}
	if why == "" && ep.TargetRef != nil && pods != nil {
		why = checkPodAddress(addr, ep.TargetRef, pods)
	}
	return addr, why
}

// maxListedRefusals is how many refused endpoints a Problem names.
const maxListedRefusals = 5

// refusedMessage is the Problem message for the refused endpoints of
// Service nsName: sorted, at most maxListedRefusals named.
func refusedMessage(nsName string, refused []refusal) string {
	slices.SortFunc(refused, func(a, b refusal) int { return strings.Compare(a.key(), b.key()) })
	var b strings.Builder
	fmt.Fprintf(&b, "service %s: %d endpoint(s) refused and given no traffic: ", nsName, len(refused))
	for i, r := range refused {
		if i == maxListedRefusals {
			fmt.Fprintf(&b, "; and %d more", len(refused)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s of EndpointSlice %s (%s)", r.address, r.slice, r.reason)
	}
	return b.String()
}
