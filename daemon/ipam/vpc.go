package ipam

import (
	"context"
	"time"
)

// VPC is the pool of VPC mode: addresses of the node podCIDR, and whole
// ENIs for the pods that ask for one (exclusive ENI). An owner holds one
// or the other; calls that name an owner go to both.
type VPC struct {
	cidr *PodCIDR
	enis *ENIPool // nil when the instance type has no secondary ENI
}

// NewVPC combines the podCIDR with the ENI pool of exclusive-ENI pods
// (enis may be nil).
func NewVPC(cidr *PodCIDR, enis *ENIPool) *VPC { return &VPC{cidr: cidr, enis: enis} }

// Allocate gives owner an address of the podCIDR.
func (v *VPC) Allocate(_ context.Context, owner string) (IP, error) { return v.cidr.Allocate(owner) }

// AllocateENI gives owner a whole ENI.
func (v *VPC) AllocateENI(ctx context.Context, owner string) (IP, error) {
	if v.enis == nil {
		return IP{}, ErrNoExclusiveENI
	}
	return v.enis.Allocate(ctx, owner)
}

// Release frees owner's address or ENI, or keeps it reserved until
// stickyUntil.
func (v *VPC) Release(owner string, stickyUntil time.Time) {
	v.cidr.Release(owner, stickyUntil)
	if v.enis != nil {
		v.enis.Release(owner, stickyUntil)
	}
}

// Holds reports owner's address or ENI (an ENI carries its ID, a podCIDR
// address none).
func (v *VPC) Holds(owner string) (IP, bool) {
	if ip, ok := v.cidr.Holds(owner); ok {
		return ip, true
	}
	if v.enis != nil {
		return v.enis.Holds(owner)
	}
	return IP{}, false
}

// Reassign moves from's address or ENI to to, in use.
func (v *VPC) Reassign(from, to string) bool {
	return v.cidr.Reassign(from, to) || (v.enis != nil && v.enis.Reassign(from, to))
}

// Owners lists who holds or has reserved an address, then an ENI.
func (v *VPC) Owners() []string {
	out := v.cidr.Owners()
	if v.enis != nil {
		out = append(out, v.enis.Owners()...)
	}
	return out
}

// Restore gives the podCIDR the holdings of its addresses and the ENI
// pool the others (exclusive-ENI pods).
func (v *VPC) Restore(ctx context.Context, holdings []Holding) (RestoreReport, error) {
	var inCIDR, other []Holding
	for _, h := range holdings {
		if v.cidr.Contains(h.IPv4) {
			inCIDR = append(inCIDR, h)
		} else {
			other = append(other, h)
		}
	}
	rep := RestoreReport{Broken: v.cidr.Restore(inCIDR)}
	if v.enis == nil {
		for _, h := range other {
			if !h.Optional {
				rep.Broken = append(rep.Broken, h)
			}
		}
		return rep, nil
	}
	r, err := v.enis.Restore(ctx, other)
	if err != nil {
		return rep, err
	}
	rep.ENIs, rep.Swept = r.ENIs, r.Swept
	rep.Broken = append(rep.Broken, r.Broken...)
	return rep, nil
}

// Run serves the ENI pool until ctx ends (the podCIDR needs no loop).
func (v *VPC) Run(ctx context.Context) {
	if v.enis != nil {
		v.enis.Run(ctx)
		return
	}
	<-ctx.Done()
}

// Close closes the ENI pool.
func (v *VPC) Close() {
	if v.enis != nil {
		v.enis.Close()
	}
}

// Stats counts the podCIDR's addresses and the ENI pool's ENIs.
func (v *VPC) Stats() Stats {
	st := Stats{Total: v.cidr.Size()}
	st.InUse = len(v.cidr.Owners())
	st.Idle = st.Total - st.InUse
	if v.enis != nil {
		e := v.enis.Stats()
		st.ENIs, st.Starved, st.Syncs = e.ENIs, e.Starved, e.Syncs
	}
	return st
}

// Addresses lists the podCIDR's held addresses (all "inuse"), then the
// ENI pool's ENIs.
func (v *VPC) Addresses() []Address {
	var out []Address
	for _, o := range v.cidr.Owners() {
		ip, _ := v.cidr.Holds(o)
		out = append(out, Address{IP: ip, State: "inuse", Owner: o})
	}
	if v.enis != nil {
		out = append(out, v.enis.Addresses()...)
	}
	return out
}
