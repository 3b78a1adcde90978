package fakecloud

import (
	"net/netip"
	"slices"
	"sort"
	"time"
)

// instanceMeta is what an instance's metadata service shows at one
// moment: a copy of the instance, its network, and the ENIs metadata
// lists then.
type instanceMeta struct {
	instance
	vpcCIDR     netip.Prefix
	vswitchCIDR netip.Prefix
	primaryIP   netip.Addr
	mac         string
	enis        []eniMeta // primary first, then by MAC
}

// eniMeta is an ENI as metadata shows it: IPv4 and IPv6 are the
// addresses the metadata lag lets through, and IPv6CIDR is valid only on
// an IPv6 vSwitch.
type eniMeta struct {
	ENIInfo
	vpcID       string
	vpcCIDR     netip.Prefix
	vpcIPv6CIDR netip.Prefix
}

// instanceAt returns the instance whose primary address is a.
func (w *world) instanceAt(a netip.Addr) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.st.instanceByIP(a)
	if in == nil {
		return "", false
	}
	return in.ID, true
}

// metadataTokensRequired reports whether an instance's metadata answers
// only requests carrying a token.
func (w *world) metadataTokensRequired(inst string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.st.Instances[inst]
	return in != nil && in.MetadataTokens == "required"
}

// metadata returns what the metadata service of an instance shows now.
func (w *world) metadata(inst string) (instanceMeta, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return viewOf(w.st.Instances[inst], w.metadataLocked)
}

// metadataSnapshot returns what the metadata service of instance inst
// (of every instance, when inst is "") shows now, by instance ID.
func (w *world) metadataSnapshot(inst string) map[string]instanceMeta {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]instanceMeta{}
	for id, in := range w.st.Instances {
		if inst == "" || inst == id {
			out[id] = w.metadataLocked(in)
		}
	}
	return out
}

func (w *world) metadataLocked(in *instance) instanceMeta {
	prim := w.st.ENIs[in.PrimaryENI]
	m := instanceMeta{instance: in.clone(), vpcCIDR: w.st.VPCs[in.VPCID].CIDR,
		vswitchCIDR: w.st.VSwitches[in.VSwitchID].CIDR, primaryIP: prim.PrimaryIP, mac: prim.MAC}
	for _, e := range w.metadataENIsLocked(in.ID) {
		vp := w.st.VPCs[e.VPCID]
		em := eniMeta{ENIInfo: w.eniInfoLocked(e), vpcID: e.VPCID, vpcCIDR: vp.CIDR, vpcIPv6CIDR: vp.IPv6CIDR}
		em.IPv4 = w.metadataAddrsLocked(e.IPv4, e.Gone4)
		em.IPv6 = w.metadataAddrsLocked(e.IPv6, e.Gone6)
		m.enis = append(m.enis, em)
	}
	return m
}

// metadataENIsLocked lists the ENIs an instance's metadata shows now:
// attached ones once the metadata lag has passed, and detached ones until
// it has.
func (w *world) metadataENIsLocked(inst string) []*eni {
	now := w.now()
	lag := w.scale(w.st.Spec.Settings.MetadataLag.D())
	var out []*eni
	for _, e := range w.st.ENIs {
		attached := e.InstanceID == inst && (e.Status == ENIInUse || e.Status == ENIDetaching) &&
			(e.Type == ENITypePrimary || !now.Before(e.AttachedAt.Add(lag)))
		stale := e.StaleInstanceID == inst && now.Before(e.StaleUntil)
		if attached || stale {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type == ENITypePrimary
		}
		return out[i].MAC < out[j].MAC
	})
	return out
}

// metadataAddrsLocked lists the addresses metadata shows for recs: those
// assigned at least the lag ago, plus those unassigned less than the lag
// ago.
func (w *world) metadataAddrsLocked(recs, gone []addrRec) []netip.Addr {
	now := w.now()
	lag := w.scale(w.st.Spec.Settings.MetadataLag.D())
	var out []netip.Addr
	for _, r := range recs {
		if !now.Before(r.At.Add(lag)) {
			out = append(out, r.Addr)
		}
	}
	for _, r := range gone {
		if now.Before(r.At.Add(lag)) && !slices.Contains(out, r.Addr) {
			out = append(out, r.Addr)
		}
	}
	return out
}

// metadataGoneExpired reports whether metadata no longer lists an
// unassigned address.
func (w *world) metadataGoneExpired(r addrRec, now time.Time) bool {
	return !now.Before(r.At.Add(w.scale(w.st.Spec.Settings.MetadataLag.D())))
}
