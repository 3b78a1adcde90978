package ipam

import (
	"context"
	"net/netip"

	"github.com/terway-sim/terway/daemon/cloud"
)

// Cloud is what the pools ask of the cloud and of the node's metadata
// service. *cloud.Node provides it; the pools take the interface so that
// their policy (batching, backoff, inhibit, reclaim, shrink) is tested
// against an in-memory cloud on a fake clock.
type Cloud interface {
	// InstanceID names the instance the pools serve.
	InstanceID() string

	// AllocateENI creates an ENI, attaches it and waits until metadata
	// shows it; ReleaseENI detaches and deletes one (cloud.Node).
	AllocateENI(ctx context.Context, r cloud.CreateENIRequest) (cloud.ReadyENI, error)
	ReleaseENI(ctx context.Context, eniID string) error
	// AssignIPv4 and AssignIPv6 add count addresses to an attached ENI
	// and wait until metadata shows them.
	AssignIPv4(ctx context.Context, intentKey string, e cloud.ENIMeta, count int) ([]netip.Addr, error)
	AssignIPv6(ctx context.Context, intentKey string, e cloud.ENIMeta, count int) ([]netip.Addr, error)
	// AssignIPv4Addrs assigns the given addresses to an attached ENI
	// and waits until metadata shows them (the heal's).
	AssignIPv4Addrs(ctx context.Context, e cloud.ENIMeta, ips []netip.Addr) error
	UnassignIPv4(ctx context.Context, eniID string, ips []netip.Addr) error
	UnassignIPv6(ctx context.Context, eniID string, ips []netip.Addr) error

	DescribeENI(ctx context.Context, eniID string) (cloud.ENI, error)
	DescribeENIs(ctx context.Context, f cloud.ENIFilter) ([]cloud.ENI, error)
	WaitENIStatus(ctx context.Context, eniID string, status ...string) (cloud.ENI, error)
	DeleteENI(ctx context.Context, eniID string) error
	DescribeVSwitch(ctx context.Context, id string) (cloud.VSwitch, error)

	// WaitMetadata waits until metadata lists the ENI of mac with at
	// least the given addresses; MACs and IPv4s read metadata once.
	WaitMetadata(ctx context.Context, mac string, v4, v6 []netip.Addr) (cloud.ENIMeta, error)
	MACs(ctx context.Context) ([]string, error)
	IPv4s(ctx context.Context, mac string) ([]netip.Addr, error)
}

// VSwitches chooses the vSwitch of each new ENI; *cloud.VSwitchPool is
// one.
type VSwitches interface {
	// Pick returns a vSwitch with free addresses (cloud.ErrNoVSwitch when
	// none is left).
	Pick(ctx context.Context) (cloud.VSwitch, error)
	// Block keeps a dry vSwitch from being picked for a while.
	Block(id string)
	// Released says addresses of the vSwitch were given back.
	Released(id string)
}

var (
	_ Cloud     = (*cloud.Node)(nil)
	_ VSwitches = (*cloud.VSwitchPool)(nil)
)
