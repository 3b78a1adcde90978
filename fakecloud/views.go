package fakecloud

import (
	"sort"
)

// Views of the world handed to the hypervisor and the Go API. They are
// copies: callers can keep them after the lock is released.

func (c *Cloud) eniInfoLocked(e *eni) ENIInfo {
	v := c.st.VSwitches[e.VSwitchID]
	info := ENIInfo{
		ID: e.ID, MAC: e.MAC, Type: e.Type, DeviceIndex: e.DeviceIndex, VSwitchID: e.VSwitchID,
		CIDR: v.CIDR, Gateway: v.pool4.gateway(), PrimaryIP: e.PrimaryIP,
		IPv4: addrsOf(e.IPv4), IPv6: addrsOf(e.IPv6),
	}
	if v.pool6 != nil {
		info.IPv6CIDR, info.IPv6Gateway = v.IPv6CIDR, v.pool6.gateway()
	}
	return info
}

func (c *Cloud) instanceInfoLocked(in *instance) InstanceInfo {
	info := InstanceInfo{ID: in.ID, Name: in.Name, InstanceType: in.InstanceType, ZoneID: in.ZoneID,
		VPCID: in.VPCID, Status: in.Status}
	for _, e := range c.st.enisOf(in.ID) {
		if e.Status == ENIInUse || e.Status == ENIDetaching {
			info.ENIs = append(info.ENIs, c.eniInfoLocked(e))
		}
	}
	return info
}

func (c *Cloud) routeTableInfoLocked(tableID string) RouteTableInfo {
	info := RouteTableInfo{ID: tableID}
	for _, v := range c.st.VPCs {
		if v.RouteTableID == tableID {
			info.VPCID = v.ID
		}
	}
	for _, r := range c.st.Routes {
		if r.TableID != tableID || r.Type != "Custom" || r.Status != "Available" {
			continue
		}
		ri := RouteInfo{Destination: r.Destination, NextHopType: r.NextHopType, NextHopID: r.NextHopID}
		if in := c.st.Instances[r.NextHopID]; in != nil {
			if p := c.st.ENIs[in.PrimaryENI]; p != nil {
				ri.NextHopIP = p.PrimaryIP
			}
		} else if e := c.st.ENIs[r.NextHopID]; e != nil {
			ri.NextHopIP = e.PrimaryIP
		}
		info.Entries = append(info.Entries, ri)
	}
	sort.Slice(info.Entries, func(i, j int) bool {
		return info.Entries[i].Destination.String() < info.Entries[j].Destination.String()
	})
	return info
}

// ENI returns a view of one ENI.
func (c *Cloud) ENI(id string) (ENIView, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.st.ENIs[id]
	if e == nil {
		return ENIView{}, false
	}
	return c.eniViewLocked(e), true
}

// ENIs returns views of all ENIs, ordered by ID.
func (c *Cloud) ENIs() []ENIView {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ENIView, 0, len(c.st.ENIs))
	for _, e := range c.st.sortedENIs() {
		out = append(out, c.eniViewLocked(e))
	}
	return out
}

func (c *Cloud) eniViewLocked(e *eni) ENIView {
	v := ENIView{ENIInfo: c.eniInfoLocked(e), Status: e.Status, InstanceID: e.InstanceID, VPCID: e.VPCID, ZoneID: e.ZoneID}
	if len(e.Tags) > 0 {
		v.Tags = map[string]string{}
		for _, t := range e.Tags {
			v.Tags[t.Key] = t.Value
		}
	}
	return v
}

// VSwitches returns views of all vSwitches, ordered by ID.
func (c *Cloud) VSwitches() []VSwitchView {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []VSwitchView
	for _, v := range c.st.VSwitches {
		out = append(out, VSwitchView{ID: v.ID, VPCID: v.VPCID, ZoneID: v.ZoneID, CIDR: v.CIDR, IPv6CIDR: v.IPv6CIDR,
			Gateway: v.pool4.gateway(), Available: v.pool4.available()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Instance returns a view of one instance.
func (c *Cloud) Instance(id string) (InstanceInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.st.Instances[id]
	if in == nil {
		return InstanceInfo{}, false
	}
	return c.instanceInfoLocked(in), true
}

// Instances returns views of all instances, ordered by ID.
func (c *Cloud) Instances() []InstanceInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []InstanceInfo
	for _, in := range c.st.Instances {
		out = append(out, c.instanceInfoLocked(in))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
