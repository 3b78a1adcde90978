package fakecloud

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Hypervisor is how the emulated platform reaches the machines it runs:
// the lab implements it by creating and removing real interfaces in node
// namespaces. Every argument is plain data with JSON tags, so that a node
// agent can implement it over the network. Calls are made one at a time,
// in the order the changes were committed; events carry full state (all
// addresses of an ENI, all entries of a route table), so an implementation
// can be idempotent. An error from ENIAttached fails the attach: the ENI
// goes back to Available, as a failed attach does in ECS.
type Hypervisor interface {
	InstanceStarted(ctx context.Context, inst InstanceInfo) error
	InstanceStopped(ctx context.Context, inst InstanceInfo) error
	InstanceReleased(ctx context.Context, inst InstanceInfo) error
	ENIAttached(ctx context.Context, instanceID string, eni ENIInfo) error
	ENIDetached(ctx context.Context, instanceID string, eni ENIInfo) error
	AddressesChanged(ctx context.Context, instanceID string, eni ENIInfo) error
	RoutesChanged(ctx context.Context, table RouteTableInfo) error
	// EIPsChanged lists every EIP that forwards (InUse), in ID order,
	// each time one starts or stops forwarding.
	EIPsChanged(ctx context.Context, eips []EIPInfo) error
}

// NopHypervisor ignores every event.
type NopHypervisor struct{}

// InstanceStarted implements Hypervisor.
func (NopHypervisor) InstanceStarted(context.Context, InstanceInfo) error { return nil }

// InstanceStopped implements Hypervisor.
func (NopHypervisor) InstanceStopped(context.Context, InstanceInfo) error { return nil }

// InstanceReleased implements Hypervisor.
func (NopHypervisor) InstanceReleased(context.Context, InstanceInfo) error { return nil }

// ENIAttached implements Hypervisor.
func (NopHypervisor) ENIAttached(context.Context, string, ENIInfo) error { return nil }

// ENIDetached implements Hypervisor.
func (NopHypervisor) ENIDetached(context.Context, string, ENIInfo) error { return nil }

// AddressesChanged implements Hypervisor.
func (NopHypervisor) AddressesChanged(context.Context, string, ENIInfo) error { return nil }

// RoutesChanged implements Hypervisor.
func (NopHypervisor) RoutesChanged(context.Context, RouteTableInfo) error { return nil }

// EIPsChanged implements Hypervisor.
func (NopHypervisor) EIPsChanged(context.Context, []EIPInfo) error { return nil }

// hookTimeout bounds one hypervisor call, so that a stuck implementation
// cannot wedge the world forever.
const hookTimeout = 2 * time.Minute

// hookEvent is a queued hypervisor call and what to do with its result.
type hookEvent struct {
	name  string
	call  func(ctx context.Context) error
	after func(err error)
}

// dispatcher delivers hypervisor calls in commit order on one goroutine.
type dispatcher struct {
	// nop is set when the hypervisor ignores everything, so that events
	// without a completion need not be queued at all.
	nop   bool
	log   *slog.Logger
	mu    sync.Mutex
	cond  *sync.Cond
	queue []hookEvent
	idle  bool
}

func newDispatcher(log *slog.Logger) *dispatcher {
	d := &dispatcher{log: log, idle: true}
	d.cond = sync.NewCond(&d.mu)
	return d
}

func (d *dispatcher) push(ev hookEvent) {
	if d.nop && ev.after == nil {
		return // nobody listens and nothing waits for the result
	}
	d.mu.Lock()
	d.queue = append(d.queue, ev)
	d.idle = false
	d.mu.Unlock()
	d.cond.Broadcast()
}

func (d *dispatcher) run(done <-chan struct{}) {
	go func() {
		<-done
		d.cond.Broadcast()
	}()
	for {
		d.mu.Lock()
		for len(d.queue) == 0 {
			d.idle = true
			d.cond.Broadcast()
			select {
			case <-done:
				d.mu.Unlock()
				return
			default:
			}
			d.cond.Wait()
		}
		ev := d.queue[0]
		d.queue = d.queue[1:]
		d.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), hookTimeout)
		err := ev.call(ctx)
		cancel()
		if err != nil {
			d.log.Warn("hypervisor call failed", "event", ev.name, "err", err)
		}
		if ev.after != nil {
			ev.after(err)
		}
	}
}

// wait blocks until every queued call has been delivered.
func (d *dispatcher) wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, d.cond.Broadcast)
	defer stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for !d.idle || len(d.queue) > 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d.cond.Wait()
	}
	return nil
}
