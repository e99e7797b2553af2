package managedlb

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"sluice.dev/sluice/internal/lb/aws/managed"
)

// EC2 is the part of the EC2 client SDKCloud uses (*ec2.Client).
type EC2 interface {
	ec2.DescribeSubnetsAPIClient
}

var _ EC2 = (*ec2.Client)(nil)

// Subnets lists the subnets carrying every tag of tags.
func (c *SDKCloud) Subnets(ctx context.Context, tags map[string]string) ([]managed.Subnet, error) {
	if c.EC2 == nil {
		return nil, fmt.Errorf("discovering subnets: no EC2 client")
	}
	in := &ec2.DescribeSubnetsInput{}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	var out []managed.Subnet
	p := ec2.NewDescribeSubnetsPaginator(c.EC2, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("discovering subnets: %w", err)
		}
		for _, s := range page.Subnets {
			out = append(out, managed.Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone), VPC: aws.ToString(s.VpcId)})
		}
	}
	return out, nil
}
