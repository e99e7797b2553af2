package binding

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/aws"
)

// LoadBalancerFinder is a provider that knows the load balancers in front
// of its groups (AWS: target group → LoadBalancerArns →
// DescribeLoadBalancers). Their DNS names become the binding's
// status.addresses when spec.publish is empty.
type LoadBalancerFinder interface {
	LoadBalancers(ctx context.Context, groups []string) ([]aws.LoadBalancer, error)
}

var _ LoadBalancerFinder = (*aws.Provider)(nil)

// addresses returns the binding's status.addresses: spec.publish when set,
// else the load balancers the provider finds in front of the groups, else
// none. When finding fails, the addresses last written stay (and the
// error is returned for logs): an address is never dropped because the
// provider was briefly unreachable.
func addresses(ctx context.Context, b *v1alpha1.LoadBalancerBinding, prov lb.Provider, groups []string) ([]v1alpha1.LoadBalancerAddress, error) {
	if len(b.Spec.Publish) > 0 {
		return PublishedAddresses(b.Spec.Publish), nil
	}
	f, ok := prov.(LoadBalancerFinder)
	if !ok {
		return nil, nil
	}
	lbs, err := f.LoadBalancers(ctx, groups)
	if err != nil {
		return b.Status.Addresses, fmt.Errorf("finding the load balancers of %s: %w", strings.Join(groups, ", "), err)
	}
	var out []v1alpha1.LoadBalancerAddress
	for _, l := range lbs {
		if l.DNSName == "" {
			continue
		}
		out = append(out, v1alpha1.LoadBalancerAddress{Hostname: l.DNSName, CanonicalHostedZoneID: l.CanonicalHostedZoneID, LoadBalancerARN: l.ARN})
	}
	if len(out) == 0 && len(b.Status.Addresses) > 0 {
		// No load balancer in front of the groups any more (or not yet
		// visible): keep what was known; the user clears it by setting
		// spec.publish or deleting the binding.
		return b.Status.Addresses, nil
	}
	return out, nil
}

// PublishedAddresses converts spec.publish to status addresses, without
// empty entries or duplicates, in the order given.
func PublishedAddresses(pub []v1alpha1.PublishAddress) []v1alpha1.LoadBalancerAddress {
	var out []v1alpha1.LoadBalancerAddress
	for _, p := range pub {
		a := v1alpha1.LoadBalancerAddress{IP: p.IP, Hostname: p.Hostname}
		if (a.IP == "" && a.Hostname == "") || slices.Contains(out, a) {
			continue
		}
		out = append(out, a)
	}
	return out
}
