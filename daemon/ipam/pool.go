package ipam

import (
	"context"
	"errors"
	"time"
)

// Pool is a mode's pool of pod resources as the daemon uses it: MultiIP
// (ENIMultiIP mode), ENIPool (ENIOnly mode) and VPC (VPC mode).
type Pool interface {
	// Allocate returns owner's resource: the one it holds (a retried
	// ADD), the one reserved for it, an idle one or a new one.
	Allocate(ctx context.Context, owner string) (IP, error)
	// Release gives owner's resource back, reserved for owner until
	// stickyUntil when that is in the future.
	Release(owner string, stickyUntil time.Time)
	// Holds reports the resource owner holds or has reserved.
	Holds(owner string) (IP, bool)
	// Reassign moves what from holds to to, in use, in one step.
	Reassign(from, to string) bool
	// Owners lists who holds or has reserved a resource.
	Owners() []string
	// Restore rebuilds the pool at start from the cloud and metadata,
	// then marks the resources of holdings taken.
	Restore(ctx context.Context, holdings []Holding) (RestoreReport, error)
	// Run serves the pool until ctx ends and its cloud calls have
	// returned; Close ends a pool that never ran (idempotent).
	Run(ctx context.Context)
	Close()
	Stats() Stats
	// Addresses lists the pool's resources with state and owner.
	Addresses() []Address
}

// Sweeper is a Pool that deletes our own Available ENIs when asked (GC
// asks periodically); other pools do it in their own sync or have no
// ENIs.
type Sweeper interface {
	Sweep(ctx context.Context) ([]string, error)
}

// ExclusiveENIs is a Pool that also hands whole ENIs to the pods that ask
// for one (VPC mode).
type ExclusiveENIs interface {
	AllocateENI(ctx context.Context, owner string) (IP, error)
}

// ErrNoExclusiveENI is returned to pods asking for an ENI the node cannot
// give.
var ErrNoExclusiveENI = errors.New("this node has no ENIs for exclusive-ENI pods")

var (
	_ Pool          = (*MultiIP)(nil)
	_ Sweeper       = (*MultiIP)(nil)
	_ Pool          = (*ENIPool)(nil)
	_ Pool          = (*VPC)(nil)
	_ ExclusiveENIs = (*VPC)(nil)
)
