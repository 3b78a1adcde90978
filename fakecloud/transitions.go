package fakecloud

import (
	"context"
	"net/netip"
	"strings"
	"time"
)

// Asynchronous halves of ECS and VPC operations. An operation sets the
// object's transitional status and Due; when Due passes, the scheduler
// fires and the object settles. Attach and detach complete only after the
// hypervisor has plugged or unplugged the device, as a guest sees the NIC
// before ECS reports InUse.

func eniKey(id string) string   { return "eni:" + id }
func routeKey(id string) string { return "route:" + id }
func eipKey(id string) string   { return "eip:" + id }

// scheduleLocked arranges for key to fire after the (scaled) delay d and
// returns the due time.
func (c *Cloud) scheduleLocked(key string, d time.Duration) time.Time {
	due := c.now().Add(c.scale(d))
	c.sched.at(due, key)
	return due
}

// rescheduleLocked re-arms every pending transition, after a restore.
func (c *Cloud) rescheduleLocked() {
	now := c.now()
	for _, e := range c.st.ENIs {
		switch e.Status {
		case ENIAttaching, ENIDetaching, ENIDeleting:
			if e.Due.IsZero() {
				e.Due = now // its hypervisor call was in flight
			}
			c.sched.at(e.Due, eniKey(e.ID))
		}
	}
	for _, r := range c.st.Routes {
		if r.Status == "Pending" {
			c.sched.at(r.Due, routeKey(r.ID))
		}
	}
	for _, e := range c.st.EIPs {
		if !e.Due.IsZero() {
			c.sched.at(e.Due, eipKey(e.ID))
		}
	}
}

func (c *Cloud) fire(key string) {
	kind, id, _ := strings.Cut(key, ":")
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	switch kind {
	case "eni":
		c.settleENILocked(id, now)
	case "route":
		c.settleRouteLocked(id, now)
	case "eip":
		c.settleEIPLocked(id, now)
	}
	_ = c.commitLocked()
}

func (c *Cloud) settleENILocked(id string, now time.Time) {
	e := c.st.ENIs[id]
	if e == nil || e.Due.IsZero() || e.Due.After(now) {
		return
	}
	e.Due = time.Time{}
	c.dirty.eni(id)
	switch e.Status {
	case ENIAttaching:
		inst := e.InstanceID
		info := c.eniInfoLocked(e)
		c.hooks.push(hookEvent{
			name: "ENIAttached " + id,
			call: func(ctx context.Context) error { return c.hv.ENIAttached(ctx, inst, info) },
			after: func(err error) {
				c.mu.Lock()
				defer c.mu.Unlock()
				e := c.st.ENIs[id]
				if e == nil || e.Status != ENIAttaching || e.InstanceID != inst {
					return
				}
				if err != nil {
					c.log.Warn("attach failed in the hypervisor; ENI back to Available", "eni", id, "instance", inst, "err", err)
					e.Status, e.InstanceID, e.DeviceIndex = ENIAvailable, "", 0
				} else {
					e.Status, e.AttachedAt = ENIInUse, c.now()
				}
				c.dirty.eni(id)
				_ = c.commitLocked()
			},
		})
	case ENIDetaching:
		inst := e.InstanceID
		info := c.eniInfoLocked(e)
		c.hooks.push(hookEvent{
			name: "ENIDetached " + id,
			call: func(ctx context.Context) error { return c.hv.ENIDetached(ctx, inst, info) },
			after: func(error) {
				c.mu.Lock()
				defer c.mu.Unlock()
				e := c.st.ENIs[id]
				if e == nil || e.Status != ENIDetaching {
					return
				}
				c.finishDetachLocked(e)
				_ = c.commitLocked()
			},
		})
	case ENIDeleting:
		c.removeENILocked(e)
	}
}

// finishDetachLocked makes e Available; metadata of its former instance
// keeps listing it for the metadata lag.
func (c *Cloud) finishDetachLocked(e *eni) {
	now := c.now()
	e.StaleInstanceID = e.InstanceID
	e.StaleUntil = now.Add(c.scale(c.st.Spec.Settings.MetadataLag.D()))
	e.Status, e.InstanceID, e.DeviceIndex, e.Due = ENIAvailable, "", 0, time.Time{}
	c.dirty.eni(e.ID)
}

// removeENILocked deletes e and returns its addresses to the vSwitch.
func (c *Cloud) removeENILocked(e *eni) {
	v := c.st.VSwitches[e.VSwitchID]
	v.pool4.release(e.PrimaryIP)
	for _, a := range e.IPv4 {
		v.pool4.release(a.Addr)
	}
	for _, a := range e.IPv6 {
		v.pool6.release(a.Addr)
	}
	delete(c.st.ENIs, e.ID)
	delete(c.st.macs, e.MAC)
	c.dirty.eni(e.ID)
}

func (c *Cloud) settleRouteLocked(id string, now time.Time) {
	r := c.st.Routes[id]
	if r == nil || r.Status != "Pending" || r.Due.After(now) {
		return
	}
	r.Status, r.Due = "Available", time.Time{}
	c.dirty.route(id)
	c.pushRoutesLocked(r.TableID)
}

func (c *Cloud) settleEIPLocked(id string, now time.Time) {
	e := c.st.EIPs[id]
	if e == nil || e.Due.IsZero() || e.Due.After(now) {
		return
	}
	switch e.Status {
	case EIPAssociating:
		e.Status = EIPInUse
	case EIPUnassociating:
		e.Status, e.InstanceID, e.InstanceType, e.PrivateIP = EIPAvailable, "", "", netip.Addr{}
	}
	e.Due = time.Time{}
	c.dirty.eip(id)
}

// pushAddressesLocked tells the hypervisor the current addresses of e.
func (c *Cloud) pushAddressesLocked(e *eni) {
	if e.InstanceID == "" || e.Status != ENIInUse {
		return
	}
	inst, info := e.InstanceID, c.eniInfoLocked(e)
	c.hooks.push(hookEvent{
		name: "AddressesChanged " + e.ID,
		call: func(ctx context.Context) error { return c.hv.AddressesChanged(ctx, inst, info) },
	})
}

// pushRoutesLocked tells the hypervisor the current entries of a table.
func (c *Cloud) pushRoutesLocked(tableID string) {
	info := c.routeTableInfoLocked(tableID)
	c.hooks.push(hookEvent{
		name: "RoutesChanged " + tableID,
		call: func(ctx context.Context) error { return c.hv.RoutesChanged(ctx, info) },
	})
}

// WaitHypervisor blocks until every hypervisor call queued so far has
// returned.
func (c *Cloud) WaitHypervisor(ctx context.Context) error { return c.hooks.wait(ctx) }
