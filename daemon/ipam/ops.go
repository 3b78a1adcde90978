package ipam

import (
	"context"
	"sync"
	"time"
)

// opTimeout bounds one cloud operation of a pool (a creation waits out
// an attach, a release a detach).
const opTimeout = 5 * time.Minute

// ops owns the cloud operations a pool starts. They are detached from
// the request that asked for them (an allocation is finished though the
// pod that wanted it gave up), but not from the pool: stop cancels them
// and waits until every one has returned, so none outlives the pool and
// writes to what its owner has closed.
type ops struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

func newOps() *ops {
	ctx, cancel := context.WithCancel(context.Background())
	return &ops{ctx: ctx, cancel: cancel}
}

// start runs op in its own goroutine with a context that ends at
// opTimeout or at stop. After stop it runs nothing: the pool is gone, and
// so is whatever would use the result.
func (o *ops) start(op func(ctx context.Context)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		ctx, cancel := context.WithTimeout(o.ctx, opTimeout)
		defer cancel()
		op(ctx)
	}()
}

// stop cancels the operations in flight and waits until they have
// returned. It may be called more than once.
func (o *ops) stop() {
	o.mu.Lock()
	o.stopped = true
	o.mu.Unlock()
	o.cancel()
	o.wg.Wait()
}
