package managed

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Subnet is a subnet found by spec.subnetTags.
type Subnet struct{ ID, Zone, VPC string }

// ErrNoSubnets: subnet discovery found nothing to put a load balancer in.
var ErrNoSubnets = errors.New("no subnet found")

// PickSubnets chooses the subnets of a load balancer among those found by
// tag: one per availability zone (the smallest ID, so the choice is
// stable), ordered by zone, all in one VPC (returned too).
func PickSubnets(found []Subnet) ([]string, string, error) {
	if len(found) == 0 {
		return nil, "", ErrNoSubnets
	}
	s := slices.Clone(found)
	slices.SortFunc(s, func(a, b Subnet) int { return cmp.Or(cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.ID, b.ID)) })
	vpc := s[0].VPC
	var out []string
	for i, x := range s {
		if x.VPC != vpc {
			return nil, "", fmt.Errorf("picking subnets: %s is in %s and %s in %s: the tags must select subnets of one VPC", s[0].ID, vpc, x.ID, x.VPC)
		}
		if i == 0 || x.Zone != s[i-1].Zone {
			out = append(out, x.ID)
		}
	}
	return out, vpc, nil
}
