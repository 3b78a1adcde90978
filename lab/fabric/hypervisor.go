package fabric

import (
	"context"
	"errors"

	"github.com/terway-sim/terway/fakecloud"
)

// The fakecloud.Hypervisor implementation. fakecloud calls it one event at
// a time with full state; every method converges the namespaces on that
// state, so a repeated or replayed event changes nothing.

var _ fakecloud.Hypervisor = (*Fabric)(nil)

// InstanceStarted creates the node namespace (once) and plugs every ENI
// of the instance; ports of ENIs no longer attached are removed.
func (f *Fabric) InstanceStarted(_ context.Context, inst fakecloud.InstanceInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	n, err := f.ensureNode(inst)
	if err != nil {
		return err
	}
	n.running = true
	want := map[string]bool{}
	for _, e := range inst.ENIs {
		want[e.ID] = true
	}
	var errs []error
	for id, p := range f.ports {
		if p.instanceID == inst.ID && !want[id] {
			errs = append(errs, f.unplug(p))
		}
	}
	for _, e := range inst.ENIs {
		errs = append(errs, f.plug(n, e))
	}
	errs = append(errs, f.sync())
	f.log.Info("instance started", "instance", inst.ID, "enis", len(inst.ENIs))
	return errors.Join(errs...)
}

// InstanceStopped removes the node's ENI links; the namespace stays, as a
// stopped instance keeps its disk.
func (f *Fabric) InstanceStopped(_ context.Context, inst fakecloud.InstanceInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	if n := f.nodes[inst.ID]; n != nil {
		n.running = false
	}
	err := errors.Join(f.unplugInstance(inst.ID), f.sync())
	f.log.Info("instance stopped", "instance", inst.ID)
	return err
}

// InstanceReleased removes the node namespace with everything in it.
func (f *Fabric) InstanceReleased(_ context.Context, inst fakecloud.InstanceInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	errs := []error{f.unplugInstance(inst.ID)}
	if n := f.nodes[inst.ID]; n != nil {
		errs = append(errs, n.remove())
		delete(f.nodes, inst.ID)
	}
	errs = append(errs, f.sync())
	f.log.Info("instance released", "instance", inst.ID)
	return errors.Join(errs...)
}

// ENIAttached plugs the ENI into its running node. An ENI attached to a
// stopped instance appears when the instance starts.
func (f *Fabric) ENIAttached(_ context.Context, instanceID string, eni fakecloud.ENIInfo) error {
	return f.plugIfRunning(instanceID, eni)
}

// plugIfRunning plugs eni into the node of instanceID, or brings a plugged
// one's neighbours and anti-spoofing set up to date, when that node runs.
func (f *Fabric) plugIfRunning(instanceID string, eni fakecloud.ENIInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	n := f.nodes[instanceID]
	if n == nil || !n.running {
		return nil
	}
	if err := f.plug(n, eni); err != nil {
		return err
	}
	return f.sync()
}

// ENIDetached unplugs the ENI: its node link disappears, wherever it is.
func (f *Fabric) ENIDetached(_ context.Context, _ string, eni fakecloud.ENIInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	var err error
	if p := f.ports[eni.ID]; p != nil {
		err = f.unplug(p)
	}
	return errors.Join(err, f.sync())
}

// AddressesChanged updates the ENI's neighbours and anti-spoofing set.
func (f *Fabric) AddressesChanged(_ context.Context, instanceID string, eni fakecloud.ENIInfo) error {
	return f.plugIfRunning(instanceID, eni)
}

// RoutesChanged replaces the route entries of one table.
func (f *Fabric) RoutesChanged(_ context.Context, table fakecloud.RouteTableInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	f.tables[table.ID] = table
	return f.sync()
}

// sync converges the fabric's neighbours, routes and anti-spoofing rules
// on the recorded ports and route tables. Callers hold f.mu.
func (f *Fabric) sync() error {
	return errors.Join(f.syncNeighbours(), f.syncRoutes(), f.syncAntiSpoof())
}
