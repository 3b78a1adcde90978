package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/terway-sim/terway/daemon/backoff"
)

// Node binds the API client to the instance the daemon runs on and its
// metadata service: the operations that need both live here.
type Node struct {
	API      *Client
	Metadata *Metadata
	Instance Instance
	// MetadataTimeout bounds how long an ENI or address may take to
	// appear in (or leave) metadata (default 30s).
	MetadataTimeout time.Duration
}

func (n *Node) metadataContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := n.MetadataTimeout
	if d <= 0 {
		d = 30 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

// ReadyENI is an ENI attached to this node and visible in its metadata.
type ReadyENI struct {
	ENI
	Meta ENIMeta
}

// RollbackTimeout bounds the rollback of a failed AllocateENI: waiting
// out an attach whose outcome is unknown, detaching and deleting. It runs
// even when the caller's context has ended.
const RollbackTimeout = 5 * time.Minute

// AllocateENI creates an ENI, attaches it and waits until this node's
// metadata shows its MAC and addresses (attachAndWait). Any failure
// rolls back (detach, delete) so that nothing is left behind, and the
// returned error says what failed and whether the rollback did too. An
// ENI whose rollback failed is tagged like every other: the pool's
// periodic sync adopts or releases it.
func (n *Node) AllocateENI(ctx context.Context, r CreateENIRequest) (ReadyENI, error) {
	e, err := n.API.CreateENI(ctx, r)
	if err != nil {
		return ReadyENI{}, err
	}
	if r.OnCreated != nil {
		r.OnCreated(e.ID)
	}
	ready, err := n.attachAndWait(ctx, e)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RollbackTimeout)
		defer cancel()
		if rerr := n.ReleaseENI(rctx, e.ID); rerr != nil {
			return ReadyENI{}, fmt.Errorf("%w; rolling back %s also failed, the pool's sync will adopt or release it: %w", err, e.ID, rerr)
		}
		return ReadyENI{}, fmt.Errorf("%w (rolled back: %s deleted)", err, e.ID)
	}
	return ready, nil
}

// attachAndWait attaches e, created a moment ago, and waits until this
// node's metadata lists it with its addresses. Metadata lists an ENI only
// once it is attached to this instance: that is its InUse, read without
// the API's budget (Terway polls DescribeNetworkInterfaces, two or three
// calls per ENI). Only when metadata does not show it does the API say
// why: still attaching, back to Available (the attach failed), or InUse
// while metadata lags.
func (n *Node) attachAndWait(ctx context.Context, e ENI) (ReadyENI, error) {
	if err := n.API.AttachENI(ctx, e.ID, n.Instance.ID); err != nil {
		return ReadyENI{}, err
	}
	want := append([]netip.Addr{e.PrimaryIP}, e.IPv4...)
	meta, merr := n.WaitMetadata(ctx, e.MAC, want, e.IPv6)
	if merr == nil {
		e.Status, e.InstanceID = StatusInUse, n.Instance.ID
		return ReadyENI{ENI: e, Meta: meta}, nil
	}
	if _, err := n.API.WaitENIStatus(ctx, e.ID, StatusInUse); err != nil {
		return ReadyENI{}, fmt.Errorf("attach %s: %w (metadata: %w)", e.ID, err, merr)
	}
	return ReadyENI{}, fmt.Errorf("ENI %s is InUse but metadata does not show it: %w", e.ID, merr)
}

// errNotYet marks a metadata view that has not caught up.
var errNotYet = errors.New("metadata has not caught up")

// WaitMetadata polls this node's metadata until the ENI with mac is listed
// with at least the given addresses (meta_assign_private_ip policy).
func (n *Node) WaitMetadata(ctx context.Context, mac string, v4, v6 []netip.Addr) (ENIMeta, error) {
	var out ENIMeta
	ctx, cancel := n.metadataContext(ctx)
	defer cancel()
	err := n.API.backoff.Poll(ctx, backoff.MetaAssignIP, func(ctx context.Context) (bool, error) {
		macs, err := n.Metadata.MACs(ctx)
		if err != nil {
			return false, err
		}
		if !slices.Contains(macs, mac) {
			return false, fmt.Errorf("%w: MAC %s not listed", errNotYet, mac)
		}
		m, err := n.Metadata.ENI(ctx, mac)
		if err != nil {
			return false, err
		}
		if missing := subtract(v4, m.IPv4); len(missing) > 0 {
			return false, fmt.Errorf("%w: %s lacks %v", errNotYet, mac, missing)
		}
		if missing := subtract(v6, m.IPv6); len(missing) > 0 {
			return false, fmt.Errorf("%w: %s lacks %v", errNotYet, mac, missing)
		}
		out = m
		return true, nil
	})
	return out, err
}

// WaitAddressesGone polls metadata until none of ips is listed on mac
// (meta_unassign_private_ip policy).
func (n *Node) WaitAddressesGone(ctx context.Context, mac string, ips []netip.Addr) error {
	ctx, cancel := n.metadataContext(ctx)
	defer cancel()
	return n.API.backoff.Poll(ctx, backoff.MetaUnassignIP, func(ctx context.Context) (bool, error) {
		v4, err := n.Metadata.IPv4s(ctx, mac)
		if errors.Is(err, ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		v6, err := n.Metadata.IPv6s(ctx, mac)
		if err != nil {
			return false, err
		}
		if left := intersect(ips, append(v4, v6...)); len(left) > 0 {
			return false, fmt.Errorf("%w: %s still lists %v", errNotYet, mac, left)
		}
		return true, nil
	})
}

// releaseRounds is how many times ReleaseENI waits out an ENI in a state
// that cannot be detached (Attaching) and tries again.
const releaseRounds = 3

// ReleaseENI detaches an ENI from this node, waits until it is
// Available and deletes it. It does not start with a Describe: right after
// creation an ENI can be missing from Describe answers, and "not found"
// must not be mistaken for "already gone". An ENI still Attaching (an
// attach whose answer was lost, or that has not finished) cannot be
// detached: ReleaseENI waits until the attach ends, InUse or Available,
// and detaches then, within ctx.
func (n *Node) ReleaseENI(ctx context.Context, eniID string) error {
	for round := 1; ; round++ {
		err := n.API.DetachENI(ctx, eniID, n.Instance.ID)
		if err == nil {
			break
		}
		if ErrorCode(err) != CodeInvalidENIState || round == releaseRounds {
			return fmt.Errorf("release %s: %w", eniID, err)
		}
		got, werr := n.API.WaitENIStatus(ctx, eniID, StatusInUse, StatusAvailable)
		if werr != nil {
			if IsNotFound(werr) {
				return nil
			}
			return fmt.Errorf("release %s: %w; waiting for its attach to end: %w", eniID, err, werr)
		}
		if got.Status == StatusAvailable {
			// Detached already (an earlier detach whose delete failed, or
			// whose answer was lost): only the delete is left.
			break
		}
	}
	if _, err := n.API.WaitENIStatus(ctx, eniID, StatusAvailable); err != nil && !IsNotFound(err) {
		return fmt.Errorf("release %s: %w", eniID, err)
	}
	if err := n.API.DeleteENI(ctx, eniID); err != nil {
		return fmt.Errorf("release %s: %w", eniID, err)
	}
	return nil
}

// AssignIPv4 assigns n addresses to an attached ENI and waits until
// metadata lists them.
func (n *Node) AssignIPv4(ctx context.Context, intentKey string, e ENIMeta, count int) ([]netip.Addr, error) {
	ips, err := n.API.AssignIPv4(ctx, intentKey, e.ID, count)
	if err != nil {
		return nil, err
	}
	return ips, n.awaitAssigned(ctx, e, ips, nil)
}

// AssignIPv4Addrs assigns the given addresses to an attached ENI and
// waits until metadata lists them.
func (n *Node) AssignIPv4Addrs(ctx context.Context, e ENIMeta, ips []netip.Addr) error {
	if err := n.API.AssignIPv4Addrs(ctx, e.ID, ips); err != nil {
		return err
	}
	return n.awaitAssigned(ctx, e, ips, nil)
}

// AssignIPv6 is AssignIPv4 for IPv6.
func (n *Node) AssignIPv6(ctx context.Context, intentKey string, e ENIMeta, count int) ([]netip.Addr, error) {
	ips, err := n.API.AssignIPv6(ctx, intentKey, e.ID, count)
	if err != nil {
		return nil, err
	}
	return ips, n.awaitAssigned(ctx, e, nil, ips)
}

// awaitAssigned waits until metadata lists the addresses the cloud just
// assigned. The caller returns them even on error: they are assigned,
// and whoever holds them must give them back.
func (n *Node) awaitAssigned(ctx context.Context, e ENIMeta, v4, v6 []netip.Addr) error {
	if _, err := n.WaitMetadata(ctx, e.MAC, v4, v6); err != nil {
		return fmt.Errorf("assigned %v to %s but metadata does not show them: %w", slices.Concat(v4, v6), e.ID, err)
	}
	return nil
}

// subtract returns the members of want not in have.
func subtract(want, have []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range want {
		if !slices.Contains(have, a) {
			out = append(out, a)
		}
	}
	return out
}

func intersect(a, b []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
