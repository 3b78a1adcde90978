package cloud

import (
	"context"
	"net/netip"
)

// The methods below forward to the node's API client and metadata, so
// that a Node is, as it stands, what a consumer that needs both asks for
// in its own narrow interface (the ipam pools' Cloud): the consumer is
// then tested against a fake of that interface, not the whole client.

// InstanceID is the ID of the instance the node is.
func (n *Node) InstanceID() string { return n.Instance.ID }

// DescribeENI reads one ENI (Client.DescribeENI).
func (n *Node) DescribeENI(ctx context.Context, eniID string) (ENI, error) {
	return n.API.DescribeENI(ctx, eniID)
}

// DescribeENIs lists ENIs (Client.DescribeENIs).
func (n *Node) DescribeENIs(ctx context.Context, f ENIFilter) ([]ENI, error) {
	return n.API.DescribeENIs(ctx, f)
}

// DeleteENI deletes an Available ENI (Client.DeleteENI).
func (n *Node) DeleteENI(ctx context.Context, eniID string) error {
	return n.API.DeleteENI(ctx, eniID)
}

// WaitENIStatus waits until an ENI has one of status (Client.WaitENIStatus).
func (n *Node) WaitENIStatus(ctx context.Context, eniID string, status ...string) (ENI, error) {
	return n.API.WaitENIStatus(ctx, eniID, status...)
}

// UnassignIPv4 takes secondary addresses off an ENI (Client.UnassignIPv4).
func (n *Node) UnassignIPv4(ctx context.Context, eniID string, ips []netip.Addr) error {
	return n.API.UnassignIPv4(ctx, eniID, ips)
}

// UnassignIPv6 is UnassignIPv4 for IPv6 (Client.UnassignIPv6).
func (n *Node) UnassignIPv6(ctx context.Context, eniID string, ips []netip.Addr) error {
	return n.API.UnassignIPv6(ctx, eniID, ips)
}

// DescribeVSwitch reads one vSwitch (Client.DescribeVSwitch).
func (n *Node) DescribeVSwitch(ctx context.Context, id string) (VSwitch, error) {
	return n.API.DescribeVSwitch(ctx, id)
}

// MACs lists the MACs of the ENIs metadata shows (Metadata.MACs).
func (n *Node) MACs(ctx context.Context) ([]string, error) { return n.Metadata.MACs(ctx) }

// IPv4s lists the IPv4 addresses metadata shows on mac (Metadata.IPv4s).
func (n *Node) IPv4s(ctx context.Context, mac string) ([]netip.Addr, error) {
	return n.Metadata.IPv4s(ctx, mac)
}
