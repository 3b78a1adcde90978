package fakecloud

import (
	"fmt"
	"net/netip"
	"sort"
	"time"
)

// state is the whole world. The exported fields are its persisted form;
// the rest is derived at load.
type state struct {
	Spec           Spec                      `json:"spec"`
	Seed           int64                     `json:"seed"`
	Created        time.Time                 `json:"created"`
	Seq            map[string]uint64         `json:"seq"`
	Instances      map[string]*instance      `json:"instances"`
	ENIs           map[string]*eni           `json:"enis"`
	EIPs           map[string]*eip           `json:"eips"`
	Routes         map[string]*routeEntry    `json:"routes"`
	Tokens         map[string]*idempotency   `json:"tokens"`
	STS            map[string]*stsCred       `json:"sts"`
	SecurityGroups map[string]*securityGroup `json:"securityGroups"`
	// Drains are the addresses held by vSwitch drains, by vSwitch ID.
	Drains map[string]*drain `json:"drains,omitempty"`

	VPCs      map[string]*vpc          `json:"-"`
	VSwitches map[string]*vswitch      `json:"-"`
	types     map[string]InstanceType  `json:"-"`
	keys      map[string]AccessKeySpec `json:"-"`
	macs      map[string]string        `json:"-"`
	eipPool   *pool4                   `json:"-"`
	byIP      map[netip.Addr]string    `json:"-"`
	// tables are the persisted maps by journal record kind.
	tables *[numKinds]table
	// seqDirty records that Seq changed since the last journal write.
	seqDirty bool
}

// newState builds a fresh world from spec at time now.
func newState(spec Spec, seed int64, now time.Time) (*state, error) {
	st := &state{
		Spec:           spec,
		Seed:           seed,
		Created:        now,
		Seq:            map[string]uint64{},
		Instances:      map[string]*instance{},
		ENIs:           map[string]*eni{},
		EIPs:           map[string]*eip{},
		Routes:         map[string]*routeEntry{},
		Tokens:         map[string]*idempotency{},
		STS:            map[string]*stsCred{},
		SecurityGroups: map[string]*securityGroup{},
		Drains:         map[string]*drain{},
	}
	for _, g := range spec.SecurityGroups {
		st.SecurityGroups[g.ID] = &securityGroup{ID: g.ID, Name: g.Name, VPCID: g.VPCID}
	}
	if err := st.derive(); err != nil {
		return nil, err
	}
	for _, v := range st.VSwitches {
		st.addSystemRoute(v, now)
	}
	for _, in := range spec.Instances {
		if err := st.addInstance(in, now); err != nil {
			return nil, err
		}
	}
	for _, e := range spec.ENIs {
		if err := st.addENI(e, now); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// addENI creates a world file's pre-existing ENI.
func (st *state) addENI(s ENISpec, now time.Time) error {
	v := st.VSwitches[s.VSwitchID]
	if v == nil {
		return fmt.Errorf("eni %s: unknown vswitch %s", s.ID, s.VSwitchID)
	}
	if s.ID == "" {
		s.ID = st.newID("eni")
	}
	if _, dup := st.ENIs[s.ID]; dup {
		return fmt.Errorf("eni %s defined twice", s.ID)
	}
	e := &eni{ID: s.ID, Type: ENITypeSecondary, Status: ENIAvailable, VSwitchID: v.ID, VPCID: v.VPCID, ZoneID: v.ZoneID,
		MAC: st.newMAC(), SecurityGroups: append([]string(nil), s.SecurityGroupIDs...), DeleteOnRelease: s.DeleteOnRelease,
		CreatedAt: now}
	if err := claimSpecAddrs(e, s, v, now); err != nil {
		return err
	}
	keys := make([]string, 0, len(s.Tags))
	for k := range s.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e.Tags = append(e.Tags, tag{Key: k, Value: s.Tags[k]})
	}
	if s.InstanceID != "" {
		if err := st.attachSpecENI(e, s.InstanceID, now); err != nil {
			return err
		}
	}
	st.ENIs[e.ID] = e
	st.macs[e.MAC] = e.ID
	return nil
}

// claimSpecAddrs gives a world file's ENI its addresses: the explicit
// ones first, so that the automatic primary cannot take one of them.
func claimSpecAddrs(e *eni, s ENISpec, v *vswitch, now time.Time) error {
	claim := func(str string) (netip.Addr, error) {
		a, err := netip.ParseAddr(str)
		if err == nil {
			err = v.pool4.claim(a)
		}
		if err != nil {
			return netip.Addr{}, fmt.Errorf("eni %s: address %q: %w", e.ID, str, err)
		}
		return a, nil
	}
	if s.PrimaryIP != "" {
		a, err := claim(s.PrimaryIP)
		if err != nil {
			return err
		}
		e.PrimaryIP = a
	}
	for _, str := range s.SecondaryIPs {
		a, err := claim(str)
		if err != nil {
			return err
		}
		e.IPv4 = append(e.IPv4, addrRec{Addr: a, At: now})
	}
	if s.PrimaryIP == "" {
		got, ok := v.pool4.take(1)
		if !ok {
			return fmt.Errorf("eni %s: vswitch %s has no free address", e.ID, v.ID)
		}
		e.PrimaryIP = got[0]
	}
	return nil
}

// attachSpecENI attaches a world file's ENI to its instance.
func (st *state) attachSpecENI(e *eni, instID string, now time.Time) error {
	in := st.Instances[instID]
	if in == nil {
		return fmt.Errorf("eni %s: unknown instance %s", e.ID, instID)
	}
	if in.ZoneID != e.ZoneID || in.VPCID != e.VPCID {
		return fmt.Errorf("eni %s: instance %s is in another zone or VPC", e.ID, instID)
	}
	attached := st.enisOf(in.ID)
	if t := st.types[in.InstanceType]; len(attached) >= t.EniQuantity {
		return fmt.Errorf("eni %s: instance %s (%s) already has %d ENIs", e.ID, in.ID, in.InstanceType, t.EniQuantity)
	}
	e.Status, e.InstanceID, e.DeviceIndex, e.AttachedAt = ENIInUse, in.ID, freeDeviceIndex(attached), now
	return nil
}

// derive rebuilds the static topology and indexes from Spec and the
// persisted objects.
func (st *state) derive() error {
	st.deriveTopology()
	st.types = map[string]InstanceType{}
	for _, t := range mergeInstanceTypes(DefaultInstanceTypes(), st.Spec.InstanceTypes) {
		st.types[t.InstanceTypeID] = t
	}
	st.keys = map[string]AccessKeySpec{}
	for _, k := range st.Spec.AccessKeys {
		st.keys[k.ID] = k
	}
	st.byIP = map[netip.Addr]string{}
	for _, in := range st.Instances {
		if e := st.ENIs[in.PrimaryENI]; e != nil {
			st.byIP[e.PrimaryIP] = in.ID
		}
	}
	st.macs = map[string]string{}
	for _, e := range st.ENIs {
		st.macs[e.MAC] = e.ID
		if err := st.claimENIAddrs(e); err != nil {
			return err
		}
	}
	if err := st.claimDrains(); err != nil {
		return err
	}
	return st.deriveEIPPool()
}

// deriveTopology builds the VPCs and vSwitches of Spec, with empty
// address pools.
func (st *state) deriveTopology() {
	st.VPCs = map[string]*vpc{}
	for _, v := range st.Spec.VPCs {
		x := &vpc{ID: v.ID, Name: v.Name, CIDR: netip.MustParsePrefix(v.CIDR), VRouterID: v.VRouterID, RouteTableID: v.RouteTableID}
		if v.IPv6CIDR != "" {
			x.IPv6CIDR = netip.MustParsePrefix(v.IPv6CIDR)
		}
		if x.VRouterID == "" {
			x.VRouterID = "vrt-" + v.ID[len("vpc-"):]
		}
		if x.RouteTableID == "" {
			x.RouteTableID = "vtb-" + v.ID[len("vpc-"):]
		}
		st.VPCs[v.ID] = x
	}
	st.VSwitches = map[string]*vswitch{}
	for _, v := range st.Spec.VSwitches {
		x := &vswitch{ID: v.ID, Name: v.Name, VPCID: v.VPCID, ZoneID: v.ZoneID,
			CIDR: netip.MustParsePrefix(v.CIDR).Masked(), Reserved: v.Reserved}
		x.pool4 = newPool4(x.CIDR, v.Reserved)
		if v.IPv6CIDR != "" {
			x.IPv6CIDR = netip.MustParsePrefix(v.IPv6CIDR).Masked()
			x.pool6 = newPool6(x.IPv6CIDR)
		}
		st.VSwitches[v.ID] = x
	}
}

// claimENIAddrs marks the addresses of a persisted ENI taken in its
// vSwitch's pools.
func (st *state) claimENIAddrs(e *eni) error {
	v := st.VSwitches[e.VSwitchID]
	if v == nil {
		return fmt.Errorf("state: eni %s refers to unknown vswitch %s", e.ID, e.VSwitchID)
	}
	for _, a := range append([]netip.Addr{e.PrimaryIP}, addrsOf(e.IPv4)...) {
		if err := v.pool4.claim(a); err != nil {
			return fmt.Errorf("state: eni %s address %s: %w", e.ID, a, err)
		}
	}
	for _, a := range e.IPv6 {
		if v.pool6 == nil {
			return fmt.Errorf("state: eni %s has IPv6 on a vswitch without IPv6", e.ID)
		}
		if err := v.pool6.claim(a.Addr); err != nil {
			return fmt.Errorf("state: eni %s address %s: %w", e.ID, a.Addr, err)
		}
	}
	return nil
}

// deriveEIPPool builds the EIP pool with the addresses of the EIPs taken.
func (st *state) deriveEIPPool() error {
	cidr := st.Spec.EIPCIDR
	if cidr == "" {
		cidr = "198.18.0.0/15"
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() > 29 {
		return fmt.Errorf("eipCidr %q must be an IPv4 prefix of /29 or larger", cidr)
	}
	st.eipPool = newPool4(p, nil)
	for _, e := range st.EIPs {
		if err := st.eipPool.claim(e.Address); err != nil {
			return fmt.Errorf("state: eip %s address %s: %w", e.ID, e.Address, err)
		}
	}
	return nil
}

// addSystemRoute adds the route table's entry for a vSwitch CIDR, as
// every VPC route table has.
func (st *state) addSystemRoute(v *vswitch, now time.Time) {
	vp := st.VPCs[v.VPCID]
	id := "rte-sys-" + v.ID
	st.Routes[id] = &routeEntry{ID: id, TableID: vp.RouteTableID, Destination: v.CIDR,
		NextHopType: "local", Type: "System", Status: "Available", CreatedAt: now}
}

// addInstance creates an instance and its primary ENI.
func (st *state) addInstance(in InstanceSpec, now time.Time) error {
	if _, ok := st.Instances[in.ID]; ok {
		return fmt.Errorf("instance %s already exists", in.ID)
	}
	v := st.VSwitches[in.VSwitchID]
	if v == nil {
		return fmt.Errorf("instance %s: unknown vswitch %s", in.ID, in.VSwitchID)
	}
	var ip netip.Addr
	if in.PrimaryIP != "" {
		a, err := netip.ParseAddr(in.PrimaryIP)
		if err != nil {
			return fmt.Errorf("instance %s: primaryIp: %w", in.ID, err)
		}
		if err := v.pool4.claim(a); err != nil {
			return fmt.Errorf("instance %s: primaryIp %s: %w", in.ID, a, err)
		}
		ip = a
	} else {
		got, ok := v.pool4.take(1)
		if !ok {
			return fmt.Errorf("instance %s: vswitch %s has no free address", in.ID, v.ID)
		}
		ip = got[0]
	}
	status := in.Status
	if status == "" {
		status = StatusRunning
	}
	e := &eni{ID: st.newID("eni"), Type: ENITypePrimary, Status: ENIInUse, VSwitchID: v.ID, VPCID: v.VPCID,
		ZoneID: v.ZoneID, MAC: st.newMAC(), SecurityGroups: append([]string(nil), in.SecurityGroupIDs...),
		PrimaryIP: ip, InstanceID: in.ID, DeleteOnRelease: true, CreatedAt: now, AttachedAt: now}
	st.ENIs[e.ID] = e
	st.macs[e.MAC] = e.ID
	st.byIP[ip] = in.ID
	st.Instances[in.ID] = &instance{ID: in.ID, Name: in.Name, InstanceType: in.InstanceType, ZoneID: v.ZoneID,
		VPCID: v.VPCID, VSwitchID: v.ID, SecurityGroupIDs: append([]string(nil), in.SecurityGroupIDs...),
		PrimaryENI: e.ID, Status: status, RAMRole: in.RAMRole, MetadataTokens: in.MetadataTokens, CreatedAt: now}
	return nil
}

// idAlphabet is what ECS resource IDs are made of.
const idAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// newID returns a fresh ID such as eni-bp1… derived from the seed and a
// per-kind counter, so that a replayed run produces the same IDs.
func (st *state) newID(kind string) string {
	st.seqDirty = true
	for {
		st.Seq[kind]++
		n := st.Seq[kind]
		h := mix64(uint64(st.Seed) ^ mix64(n) ^ strHash(kind))
		b := make([]byte, 0, 20)
		b = append(b, "bp1"...)
		for i := 0; i < 17; i++ {
			b = append(b, idAlphabet[h%36])
			h /= 36
			if h == 0 {
				h = mix64(n + uint64(i) + 1)
			}
		}
		id := kind + "-" + string(b)
		if !st.idTaken(id) {
			return id
		}
	}
}

func (st *state) idTaken(id string) bool {
	if _, ok := st.ENIs[id]; ok {
		return true
	}
	if _, ok := st.EIPs[id]; ok {
		return true
	}
	_, ok := st.Routes[id]
	return ok
}

// newMAC returns a fresh MAC in Alibaba's 00:16:3e OUI.
func (st *state) newMAC() string {
	st.seqDirty = true
	for {
		st.Seq["mac"]++
		h := mix64(uint64(st.Seed) ^ mix64(st.Seq["mac"]) ^ strHash("mac"))
		mac := fmt.Sprintf("00:16:3e:%02x:%02x:%02x", byte(h>>16), byte(h>>8), byte(h))
		if _, ok := st.macs[mac]; !ok {
			return mac
		}
	}
}

// enisOf returns the ENIs attached (or attaching/detaching) to an
// instance, ordered by device index.
func (st *state) enisOf(instanceID string) []*eni {
	var out []*eni
	for _, e := range st.ENIs {
		if e.InstanceID == instanceID {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DeviceIndex < out[j].DeviceIndex })
	return out
}

// instanceByIP finds the instance whose primary ENI has address a.
func (st *state) instanceByIP(a netip.Addr) *instance {
	return st.Instances[st.byIP[a.Unmap()]]
}

// mix64 is SplitMix64's finaliser: a cheap, well-distributed hash.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func strHash(s string) uint64 {
	h := uint64(1469598103934665603)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
