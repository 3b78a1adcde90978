package fakecloud

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Spec describes a world: account, network topology, instances and the
// behaviour knobs. It is what a world file (YAML or JSON) holds.
type Spec struct {
	RegionID  string `json:"regionId"`
	AccountID string `json:"accountId"`
	// AccessKeys are static AccessKey pairs of the account.
	AccessKeys     []AccessKeySpec     `json:"accessKeys,omitempty"`
	Zones          []string            `json:"zones,omitempty"`
	VPCs           []VPCSpec           `json:"vpcs,omitempty"`
	VSwitches      []VSwitchSpec       `json:"vswitches,omitempty"`
	SecurityGroups []SecurityGroupSpec `json:"securityGroups,omitempty"`
	Instances      []InstanceSpec      `json:"instances,omitempty"`
	// ENIs are secondary ENIs that exist when the world starts (left over
	// by an earlier client, say).
	ENIs []ENISpec `json:"enis,omitempty"`
	// InstanceTypes adds types to, or replaces whole entries of, the
	// built-in table (DefaultInstanceTypes).
	InstanceTypes []InstanceType `json:"instanceTypes,omitempty"`
	// EIPCIDR is where AllocateEipAddress takes public addresses from. The
	// default, 198.18.0.0/15, is the benchmarking range: it exists only
	// inside lab namespaces.
	EIPCIDR string `json:"eipCidr,omitempty"`
	// BandwidthPackages are the Internet Shared Bandwidth instances EIPs
	// can be added to (AddCommonBandwidthPackageIp).
	BandwidthPackages []BandwidthPackageSpec `json:"bandwidthPackages,omitempty"`
	Settings          Settings               `json:"settings"`
}

// BandwidthPackageSpec is one Internet Shared Bandwidth instance.
type BandwidthPackageSpec struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// ISP is its line type; only EIPs of the same line join it. Default BGP.
	ISP string `json:"isp,omitempty"`
}

// isp is the package's line type.
func (p BandwidthPackageSpec) isp() string {
	if p.ISP == "" {
		return "BGP"
	}
	return p.ISP
}

// DefaultBandwidthPackageID is the default world's Internet Shared
// Bandwidth.
const DefaultBandwidthPackageID = "cbwp-bp1lab0000000000001"

// AccessKeySpec is a static AccessKey pair. With SecurityToken set it is
// an STS credential issued outside the emulation: calls must carry the
// token, and InstanceID (if set) is who they are attributed to.
type AccessKeySpec struct {
	ID            string `json:"id"`
	Secret        string `json:"secret"`
	SecurityToken string `json:"securityToken,omitempty"`
	InstanceID    string `json:"instanceId,omitempty"`
}

// VPCSpec is one VPC with its system route table.
type VPCSpec struct {
	ID           string `json:"id"`
	Name         string `json:"name,omitempty"`
	CIDR         string `json:"cidr"`
	IPv6CIDR     string `json:"ipv6Cidr,omitempty"`
	VRouterID    string `json:"vRouterId,omitempty"`
	RouteTableID string `json:"routeTableId,omitempty"`
}

// VSwitchSpec is one vSwitch. The first and the last three addresses of
// its CIDR are always reserved, as in ECS; Reserved holds more (addresses
// or CIDRs) taken by things outside the emulation.
type VSwitchSpec struct {
	ID       string   `json:"id"`
	Name     string   `json:"name,omitempty"`
	VPCID    string   `json:"vpcId"`
	ZoneID   string   `json:"zoneId"`
	CIDR     string   `json:"cidr"`
	IPv6CIDR string   `json:"ipv6Cidr,omitempty"`
	Reserved []string `json:"reserved,omitempty"`
}

// SecurityGroupSpec is one security group.
type SecurityGroupSpec struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	VPCID string `json:"vpcId"`
}

// InstanceSpec is one ECS instance. Its primary ENI is created from
// VSwitchID, with PrimaryIP if set.
type InstanceSpec struct {
	ID               string   `json:"id"`
	Name             string   `json:"name,omitempty"`
	InstanceType     string   `json:"instanceType"`
	VSwitchID        string   `json:"vswitchId"`
	SecurityGroupIDs []string `json:"securityGroupIds"`
	PrimaryIP        string   `json:"primaryIp,omitempty"`
	// Status is Running (default) or Stopped.
	Status string `json:"status,omitempty"`
	// RAMRole is the role whose STS credentials the metadata service
	// hands out; empty means the instance has no role.
	RAMRole string `json:"ramRole,omitempty"`
	// MetadataTokens is "optional" (default) or "required": whether
	// metadata GETs need an X-aliyun-ecs-metadata-token.
	MetadataTokens string `json:"metadataTokens,omitempty"`
}

// ENISpec is a secondary ENI present at start: Available, or InUse on
// InstanceID.
type ENISpec struct {
	ID               string            `json:"id"`
	VSwitchID        string            `json:"vswitchId"`
	SecurityGroupIDs []string          `json:"securityGroupIds"`
	PrimaryIP        string            `json:"primaryIp,omitempty"`
	SecondaryIPs     []string          `json:"secondaryIps,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
	InstanceID       string            `json:"instanceId,omitempty"`
	DeleteOnRelease  bool              `json:"deleteOnRelease,omitempty"`
}

// Throttling budgets (calls per window, account-wide per region). ECS
// publishes no per-API numbers; these are assumed, generous enough for a
// few hundred nodes, and overridable per action.
var defaultThrottle = map[string]int{
	"*":                                 1200,
	"DescribeNetworkInterfaces":         3600,
	"DescribeNetworkInterfaceAttribute": 3600,
	"DescribeInstanceTypes":             600,
	"CreateNetworkInterface":            1200,
	"AttachNetworkInterface":            1200,
	"DetachNetworkInterface":            1200,
	"DeleteNetworkInterface":            1200,
	"AssignPrivateIpAddresses":          1200,
	"UnassignPrivateIpAddresses":        1200,
}

// DefaultSettings returns the documented defaults: realistic delays, a
// small metadata lag, no consistency window (CreateNetworkInterface is
// synchronous), 60 s throttle windows answered with Throttling.User.
func DefaultSettings() Settings {
	th := make(map[string]int, len(defaultThrottle))
	for k, v := range defaultThrottle {
		th[k] = v
	}
	return Settings{
		AttachDelay:     Duration(2 * time.Second),
		DetachDelay:     Duration(2 * time.Second),
		DeleteDelay:     Duration(time.Second),
		RouteEntryDelay: Duration(time.Second),
		EIPDelay:        Duration(time.Second),
		MetadataLag:     Duration(time.Second),
		ThrottleWindow:  Duration(time.Minute),
		Throttle:        th,
		ThrottleCodes:   map[string]string{"*": CodeThrottling},
		ExhaustionCode:  CodeIPNotEnough,
		TimestampWindow: Duration(15 * time.Minute),
		STSLifetime:     Duration(6 * time.Hour),
	}
}

// IDs of the default world, for tests and documentation.
const (
	DefaultRegion        = "cn-hangzhou"
	DefaultAccountID     = "1234567890123456"
	DefaultVPCID         = "vpc-bp1lab0000000000001"
	DefaultRouteTableID  = "vtb-bp1lab0000000000001"
	DefaultVRouterID     = "vrt-bp1lab0000000000001"
	DefaultSecurityGroup = "sg-bp1lab0000000000001"
	DefaultRAMRole       = "FakecloudNodeRole"
)

// DefaultSpec is the world used without a world file: region cn-hangzhou,
// three zones, one VPC 192.168.0.0/16 (IPv6 fd00:192:168::/56) with a /24
// vSwitch per zone, and three running instances of different types.
func DefaultSpec() Spec {
	zones := []string{"cn-hangzhou-h", "cn-hangzhou-i", "cn-hangzhou-j"}
	s := Spec{
		RegionID:  DefaultRegion,
		AccountID: DefaultAccountID,
		Zones:     zones,
		VPCs: []VPCSpec{{ID: DefaultVPCID, Name: "lab", CIDR: "192.168.0.0/16", IPv6CIDR: "fd00:192:168::/56",
			VRouterID: DefaultVRouterID, RouteTableID: DefaultRouteTableID}},
		SecurityGroups:    []SecurityGroupSpec{{ID: DefaultSecurityGroup, Name: "lab", VPCID: DefaultVPCID}},
		BandwidthPackages: []BandwidthPackageSpec{{ID: DefaultBandwidthPackageID, Name: "lab"}},
		Settings:          DefaultSettings(),
	}
	types := []string{"ecs.g7.xlarge", "ecs.g6.2xlarge", "ecs.g8i.xlarge"}
	for i, z := range zones {
		vsw := fmt.Sprintf("vsw-bp1lab000000000000%d", i+1)
		s.VSwitches = append(s.VSwitches, VSwitchSpec{ID: vsw, Name: "lab-" + z, VPCID: DefaultVPCID, ZoneID: z,
			CIDR: fmt.Sprintf("192.168.%d.0/24", i), IPv6CIDR: fmt.Sprintf("fd00:192:168:%d::/64", i)})
		s.Instances = append(s.Instances, InstanceSpec{ID: fmt.Sprintf("i-bp1lab000000000000%d", i+1),
			Name: fmt.Sprintf("node-%d", i+1), InstanceType: types[i], VSwitchID: vsw,
			SecurityGroupIDs: []string{DefaultSecurityGroup}, RAMRole: DefaultRAMRole})
	}
	return s
}

// LoadSpec reads a world file (YAML or JSON). Unknown keys are an error,
// so that a typo does not silently leave a default in place. Settings not
// given keep their defaults; with no topology at all the default world's
// topology is used.
func LoadSpec(path string) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("read world file: %w", err)
	}
	return ParseSpec(data)
}

// ParseSpec is LoadSpec on bytes.
func ParseSpec(data []byte) (Spec, error) {
	s := Spec{Settings: DefaultSettings()}
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return Spec{}, fmt.Errorf("parse world file: %w", err)
	}
	if len(s.VPCs) == 0 && len(s.VSwitches) == 0 && len(s.Instances) == 0 {
		d := DefaultSpec()
		s.Zones, s.VPCs, s.VSwitches, s.SecurityGroups, s.Instances = d.Zones, d.VPCs, d.VSwitches, d.SecurityGroups, d.Instances
	}
	if s.RegionID == "" {
		s.RegionID = DefaultRegion
	}
	if s.AccountID == "" {
		s.AccountID = DefaultAccountID
	}
	return s, s.Validate()
}

// Validate checks references and addresses so that a broken world file
// fails at load with a message naming the offending entry.
func (s Spec) Validate() error {
	vpcs, err := s.validateVPCs()
	if err != nil {
		return err
	}
	vsws, err := s.validateVSwitches(vpcs)
	if err != nil {
		return err
	}
	sgs := map[string]bool{}
	for _, g := range s.SecurityGroups {
		if _, ok := vpcs[g.VPCID]; !ok {
			return fmt.Errorf("security group %s: unknown vpc %q", g.ID, g.VPCID)
		}
		sgs[g.ID] = true
	}
	if err := s.validateInstances(vsws, sgs); err != nil {
		return err
	}
	if err := s.validateENIs(vsws, sgs); err != nil {
		return err
	}
	for _, k := range s.AccessKeys {
		if k.ID == "" || k.Secret == "" {
			return fmt.Errorf("access key %q: id and secret are required", k.ID)
		}
	}
	seen := map[string]bool{}
	for _, p := range s.BandwidthPackages {
		if !strings.HasPrefix(p.ID, "cbwp-") || seen[p.ID] {
			return fmt.Errorf("bandwidth package %q: the id must start with cbwp- and be unique", p.ID)
		}
		seen[p.ID] = true
	}
	return validateSettings(s.Settings)
}

// validateVPCs checks the VPCs and returns them by ID.
func (s Spec) validateVPCs() (map[string]VPCSpec, error) {
	vpcs := map[string]VPCSpec{}
	for _, v := range s.VPCs {
		if v.ID == "" {
			return nil, fmt.Errorf("vpc without id")
		}
		if _, err := netip.ParsePrefix(v.CIDR); err != nil {
			return nil, fmt.Errorf("vpc %s: cidr: %w", v.ID, err)
		}
		if v.IPv6CIDR != "" {
			if _, err := netip.ParsePrefix(v.IPv6CIDR); err != nil {
				return nil, fmt.Errorf("vpc %s: ipv6Cidr: %w", v.ID, err)
			}
		}
		vpcs[v.ID] = v
	}
	return vpcs, nil
}

// validateVSwitches checks the vSwitches against their zones and VPCs and
// returns them by ID.
func (s Spec) validateVSwitches(vpcs map[string]VPCSpec) (map[string]VSwitchSpec, error) {
	zones := map[string]bool{}
	for _, z := range s.Zones {
		zones[z] = true
	}
	vsws := map[string]VSwitchSpec{}
	for _, v := range s.VSwitches {
		vpc, ok := vpcs[v.VPCID]
		if !ok {
			return nil, fmt.Errorf("vswitch %s: unknown vpc %q", v.ID, v.VPCID)
		}
		if len(zones) > 0 && !zones[v.ZoneID] {
			return nil, fmt.Errorf("vswitch %s: unknown zone %q", v.ID, v.ZoneID)
		}
		if err := v.validateAddresses(vpc); err != nil {
			return nil, err
		}
		vsws[v.ID] = v
	}
	return vsws, nil
}

// validateAddresses checks a vSwitch's CIDRs (inside its VPC's) and its
// reserved addresses.
func (v VSwitchSpec) validateAddresses(vpc VPCSpec) error {
	p, err := netip.ParsePrefix(v.CIDR)
	if err != nil {
		return fmt.Errorf("vswitch %s: cidr: %w", v.ID, err)
	}
	if !p.Addr().Is4() || p.Bits() < 16 || p.Bits() > 29 {
		return fmt.Errorf("vswitch %s: cidr %s must be an IPv4 prefix between /16 and /29", v.ID, v.CIDR)
	}
	if vp := netip.MustParsePrefix(vpc.CIDR); !vp.Contains(p.Addr()) || p.Bits() < vp.Bits() {
		return fmt.Errorf("vswitch %s: cidr %s is outside vpc %s (%s)", v.ID, v.CIDR, vpc.ID, vpc.CIDR)
	}
	if v.IPv6CIDR != "" {
		if p6, err := netip.ParsePrefix(v.IPv6CIDR); err != nil || !p6.Addr().Is6() || p6.Bits() != 64 {
			return fmt.Errorf("vswitch %s: ipv6Cidr %q must be an IPv6 /64", v.ID, v.IPv6CIDR)
		}
	}
	for _, r := range v.Reserved {
		if _, err := parseAddrOrPrefix(r); err != nil {
			return fmt.Errorf("vswitch %s: reserved %q: %w", v.ID, r, err)
		}
	}
	return nil
}

// validateInstances checks the instances against the vSwitches, the
// security groups and the instance types.
func (s Spec) validateInstances(vsws map[string]VSwitchSpec, sgs map[string]bool) error {
	types := map[string]bool{}
	for _, t := range mergeInstanceTypes(DefaultInstanceTypes(), s.InstanceTypes) {
		if t.EniQuantity < 1 || t.EniPrivateIPAddressQuantity < 1 {
			return fmt.Errorf("instance type %s: eniQuantity and eniPrivateIpAddressQuantity must be at least 1", t.InstanceTypeID)
		}
		types[t.InstanceTypeID] = true
	}
	for _, in := range s.Instances {
		if _, ok := vsws[in.VSwitchID]; !ok {
			return fmt.Errorf("instance %s: unknown vswitch %q", in.ID, in.VSwitchID)
		}
		if !types[in.InstanceType] {
			return fmt.Errorf("instance %s: unknown instance type %q", in.ID, in.InstanceType)
		}
		if err := checkGroups("instance", in.ID, in.SecurityGroupIDs, sgs); err != nil {
			return err
		}
		switch in.Status {
		case "", StatusRunning, StatusStopped:
		default:
			return fmt.Errorf("instance %s: status %q must be Running or Stopped", in.ID, in.Status)
		}
		switch in.MetadataTokens {
		case "", "optional", "required":
		default:
			return fmt.Errorf("instance %s: metadataTokens %q must be optional or required", in.ID, in.MetadataTokens)
		}
	}
	return nil
}

// validateENIs checks the pre-existing ENIs against the vSwitches and the
// security groups.
func (s Spec) validateENIs(vsws map[string]VSwitchSpec, sgs map[string]bool) error {
	enis := map[string]bool{}
	for _, e := range s.ENIs {
		if e.ID != "" && enis[e.ID] {
			return fmt.Errorf("eni %s defined twice", e.ID)
		}
		enis[e.ID] = true
		if _, ok := vsws[e.VSwitchID]; !ok {
			return fmt.Errorf("eni %s: unknown vswitch %q", e.ID, e.VSwitchID)
		}
		if err := checkGroups("eni", e.ID, e.SecurityGroupIDs, sgs); err != nil {
			return err
		}
	}
	return nil
}

// checkGroups checks that an instance or ENI (what, id) has security
// groups and that all are known.
func checkGroups(what, id string, groups []string, sgs map[string]bool) error {
	if len(groups) == 0 {
		return fmt.Errorf("%s %s: needs at least one security group", what, id)
	}
	for _, g := range groups {
		if !sgs[g] {
			return fmt.Errorf("%s %s: unknown security group %q", what, id, g)
		}
	}
	return nil
}

// validateSettings checks the behaviour knobs.
func validateSettings(s Settings) error {
	switch s.ExhaustionCode {
	case CodeIPNotEnough, CodeQuotaPrivateIP:
	default:
		return fmt.Errorf("settings.exhaustionCode %q must be %s or %s", s.ExhaustionCode, CodeIPNotEnough, CodeQuotaPrivateIP)
	}
	if s.ThrottleWindow <= 0 {
		return fmt.Errorf("settings.throttleWindow must be positive")
	}
	for k, v := range s.Throttle {
		if v < 0 {
			return fmt.Errorf("settings.throttle[%s] must not be negative", k)
		}
	}
	for k, v := range s.ThrottleCodes {
		if !isThrottleCode(v) {
			return fmt.Errorf("settings.throttleCodes[%s] %q must be %s, %s or %s", k, v, CodeThrottlingPlain, CodeThrottling, CodeThrottlingAPI)
		}
	}
	if s.ConsistencyWindow < 0 {
		return fmt.Errorf("settings.consistencyWindow must not be negative")
	}
	return nil
}

func parseAddrOrPrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
