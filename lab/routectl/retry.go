package routectl

import (
	"context"
	"fmt"
	"strings"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
)

// VPC error codes the controller reacts to.
const (
	codeDuplicate      = "InvalidCIDRBlock.Duplicate"
	codeEntryNotFound  = "InvalidRouteEntry.NotFound"
	codeEntryStatus    = "IncorrectRouteEntryStatus"
	codeTableNotFound  = "InvalidRouteTableId.NotFound"
	codeTableNotFound2 = "InvalidRouteTable.NotFound"
)

// retryable reports whether repeating a VPC call may succeed: what the
// daemon's cloud client retries (throttling, internal errors, transport
// failures), plus answers that only say the table is busy: an entry still
// Pending, or another change of the same table under way.
func retryable(err error) bool {
	if cloud.IsRetryable(err) {
		return true
	}
	switch c := cloud.ErrorCode(err); {
	case c == codeEntryStatus, c == "OperationConflict", c == "TaskConflict",
		strings.HasPrefix(c, "IncorrectStatus"):
		return true
	}
	return false
}

// retry runs one VPC call until it succeeds, fails for good, or its policy
// runs out: after a Throttling answer by backoff.ThrottledAPIRetry, after
// any other transient failure by PolicyAPI. The first failure picks the
// policy; the attempt that made it counts as the first of the loop.
func (c *Controller) retry(ctx context.Context, action string, call func() error) error {
	err := call()
	if err == nil {
		return nil
	}
	if !retryable(err) {
		return fmt.Errorf("%s: %w", action, err)
	}
	policy := PolicyAPI
	if cloud.IsThrottling(err) {
		policy = backoff.ThrottledAPIRetry
	}
	c.log.Debug("retrying VPC call", "action", action, "policy", policy, "err", err)
	first := err
	err = c.backoff.Retry(ctx, policy, func(context.Context) (bool, error) {
		if first != nil {
			e := first
			first = nil
			return false, e
		}
		err := call()
		switch {
		case err == nil:
			return true, nil
		case !retryable(err):
			return false, backoff.Permanent(err)
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	return nil
}
