package routectl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
)

// Sync makes the route table match nodes once: it deletes owned entries
// that no node asks for or that point to another instance, creates the
// missing ones, and waits until they are Available. A failure on one entry
// does not stop the others; all failures are returned together. Calls are
// serialised.
func (c *Controller) Sync(ctx context.Context, nodes []*corev1.Node) error {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	table, err := c.table(ctx)
	if err != nil {
		return err
	}
	var have []routeEntry
	err = c.retry(ctx, "DescribeRouteEntryList", func() (err error) {
		have, err = c.api.entries(table)
		return err
	})
	if err != nil {
		c.forgetTableOn(err)
		return fmt.Errorf("list route entries of %s: %w", table, err)
	}
	want := desired(nodes, c.o.Region, c.o.ClusterCIDR, c.log)
	p := planFor(want, have, c.o.ClusterCIDR)
	for _, e := range p.blocked {
		c.log.Warn("pod CIDR already routed by an entry this controller does not own; left alone",
			"podCIDR", e.Dst, "node", want[e.Dst].Node, "entry", e.ID, "nextHopType", e.HopType, "nextHop", e.HopID)
	}
	var errs []error
	for _, e := range p.remove {
		if err := c.remove(ctx, table, e); err != nil {
			errs = append(errs, err)
		}
	}
	wait := p.pending
	for _, dst := range p.add {
		if err := c.create(ctx, table, dst, want[dst]); err != nil {
			errs = append(errs, err)
			continue
		}
		wait = append(wait, dst)
	}
	if err := c.waitAvailable(ctx, table, wait, want); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// table returns the VPC's system route table, found once through
// DescribeVpcs (the VRouter) and DescribeRouteTableList.
func (c *Controller) table(ctx context.Context) (string, error) {
	if c.tableID != "" {
		return c.tableID, nil
	}
	var router, table string
	err := c.retry(ctx, "DescribeVpcs", func() (err error) {
		router, err = c.api.vpcRouter(c.o.VpcID)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("find VRouter of %s: %w", c.o.VpcID, err)
	}
	err = c.retry(ctx, "DescribeRouteTableList", func() (err error) {
		table, err = c.api.systemTable(c.o.VpcID, router)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("find route table of %s: %w", c.o.VpcID, err)
	}
	c.log.Info("route table found", "vRouter", router, "routeTable", table)
	c.tableID = table
	return table, nil
}

// forgetTableOn drops the cached table when the cloud says it is gone.
func (c *Controller) forgetTableOn(err error) {
	switch cloud.ErrorCode(err) {
	case codeTableNotFound, codeTableNotFound2:
		c.tableID = ""
	}
}

// remove deletes an owned entry; one already gone is fine. An entry still
// Pending is retried until it can be deleted.
func (c *Controller) remove(ctx context.Context, table string, e routeEntry) error {
	err := c.retry(ctx, "DeleteRouteEntry", func() error {
		err := c.api.remove(table, e.Dst, e.HopID)
		if cloud.ErrorCode(err) == codeEntryNotFound {
			return nil
		}
		return err
	})
	if err != nil {
		c.forgetTableOn(err)
		return fmt.Errorf("delete route %s via %s: %w", e.Dst, e.HopID, err)
	}
	c.log.Info("route entry deleted", "podCIDR", e.Dst, "instance", e.HopID, "entry", e.ID)
	return nil
}

// create asks for the entry dst → t.Instance. Every attempt of one
// creation carries the same ClientToken, so an attempt whose answer was
// lost is not applied twice; an entry that already exists for dst is
// taken as created (waitAvailable checks where it points).
func (c *Controller) create(ctx context.Context, table string, dst netip.Prefix, t target) error {
	token := newClientToken()
	var id string
	err := c.retry(ctx, "CreateRouteEntry", func() (err error) {
		id, err = c.api.create(table, dst, t.Instance, entryName(t.Node), token)
		if cloud.ErrorCode(err) == codeDuplicate {
			id = "(existing)"
			return nil
		}
		return err
	})
	if err != nil {
		c.forgetTableOn(err)
		return fmt.Errorf("create route %s via %s (node %s): %w", dst, t.Instance, t.Node, err)
	}
	c.log.Info("route entry created", "podCIDR", dst, "node", t.Node, "instance", t.Instance, "entry", id)
	return nil
}

// waitAvailable polls the table until every entry of dsts is Available
// and points where the nodes want, within WaitTimeout. An entry that
// points elsewhere or is missing ends its wait with an error, so that the
// sync is repeated and repairs it.
func (c *Controller) waitAvailable(ctx context.Context, table string, dsts []netip.Prefix, want map[netip.Prefix]target) error {
	if len(dsts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.WaitTimeout)
	defer cancel()
	left := map[netip.Prefix]bool{}
	for _, d := range dsts {
		left[d] = true
	}
	var errs []error
	err := c.poll(ctx, func() (bool, error) {
		have, err := c.api.entries(table)
		if err != nil {
			return false, err
		}
		seen := map[netip.Prefix]bool{}
		for _, e := range have {
			if !left[e.Dst] {
				continue
			}
			seen[e.Dst] = true
			t := want[e.Dst]
			switch {
			case e.HopType != hopInstance || e.HopID != t.Instance:
				errs = append(errs, fmt.Errorf("route %s points to %s %s, not to %s of node %s", e.Dst, e.HopType, e.HopID, t.Instance, t.Node))
				delete(left, e.Dst)
			case e.Status == statusReady:
				delete(left, e.Dst)
			}
		}
		for dst := range left {
			if !seen[dst] {
				// Deleted meanwhile, or its creation failed: the
				// failed sync is repeated and creates it again.
				errs = append(errs, fmt.Errorf("route %s of node %s vanished before it was Available", dst, want[dst].Node))
				delete(left, dst)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("wait for %d route entries of %s to be Available: %w", len(left), table, err))
	}
	return errors.Join(errs...)
}

// poll calls fn at PolicyWait's intervals until it is done, fails with a
// final error, or ctx ends; transient errors only make it try again.
func (c *Controller) poll(ctx context.Context, fn func() (bool, error)) error {
	return c.backoff.Poll(ctx, PolicyWait, func(context.Context) (bool, error) {
		done, err := fn()
		if err != nil && !retryable(err) {
			return false, backoff.Permanent(err)
		}
		return done, err
	})
}

// entryName names an entry after its node within VPC's rules (letters
// first, at most 128 characters).
func entryName(node string) string {
	n := "node-" + node
	if len(n) > 128 {
		n = n[:128]
	}
	return n
}

func newClientToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
