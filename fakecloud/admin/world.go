package admin

import "net/netip"

// WorldView is the admin view of the whole world (GET /fakecloud/world).
// It holds no secrets.
type WorldView struct {
	RegionID    string           `json:"regionId"`
	AccountID   string           `json:"accountId"`
	AccessKeys  []string         `json:"accessKeyIds"`
	Instances   []InstanceInfo   `json:"instances"`
	ENIs        []ENIView        `json:"enis"`
	VSwitches   []VSwitchView    `json:"vswitches"`
	RouteTables []RouteTableInfo `json:"routeTables"`
	EIPs        []EIPView        `json:"eips"`
}

// InstanceInfo describes an instance and the ENIs attached to it (primary
// first). The emulator's hypervisor hook receives it too.
type InstanceInfo struct {
	ID           string    `json:"id"`
	Name         string    `json:"name,omitempty"`
	InstanceType string    `json:"instanceType"`
	ZoneID       string    `json:"zoneId"`
	VPCID        string    `json:"vpcId"`
	Status       string    `json:"status"`
	ENIs         []ENIInfo `json:"enis"`
}

// ENIInfo describes an ENI as a hypervisor plugs it in.
type ENIInfo struct {
	ID          string       `json:"id"`
	MAC         string       `json:"mac"`
	Type        string       `json:"type"`
	DeviceIndex int          `json:"deviceIndex"`
	VSwitchID   string       `json:"vswitchId"`
	CIDR        netip.Prefix `json:"cidr"`
	Gateway     netip.Addr   `json:"gateway"`
	IPv6CIDR    netip.Prefix `json:"ipv6Cidr,omitzero"`
	IPv6Gateway netip.Addr   `json:"ipv6Gateway,omitzero"`
	PrimaryIP   netip.Addr   `json:"primaryIp"`
	// IPv4 are the secondary IPv4 addresses; IPv6 all IPv6 addresses.
	IPv4 []netip.Addr `json:"ipv4,omitempty"`
	IPv6 []netip.Addr `json:"ipv6,omitempty"`
}

// ENIView is an ENI with its status and attachment.
type ENIView struct {
	ENIInfo
	Status     string            `json:"status"`
	InstanceID string            `json:"instanceId,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	VPCID      string            `json:"vpcId"`
	ZoneID     string            `json:"zoneId"`
}

// VSwitchView is a vSwitch with its free address count. Available is how
// many IPv4 addresses are free (the vSwitch's AvailableIpAddressCount,
// which a drain lowers) and Drained how many a drain holds (POST
// /fakecloud/vswitches/{id}/drain) until a refill gives them back.
type VSwitchView struct {
	ID        string       `json:"id"`
	VPCID     string       `json:"vpcId"`
	ZoneID    string       `json:"zoneId"`
	CIDR      netip.Prefix `json:"cidr"`
	IPv6CIDR  netip.Prefix `json:"ipv6Cidr,omitzero"`
	Gateway   netip.Addr   `json:"gateway"`
	Available int          `json:"availableIpAddressCount"`
	Drained   int          `json:"drained"`
}

// RouteTableInfo is a VPC route table with its custom entries.
type RouteTableInfo struct {
	ID      string      `json:"id"`
	VPCID   string      `json:"vpcId"`
	Entries []RouteInfo `json:"entries"`
}

// RouteInfo is one route entry; for next hop type Instance, NextHopIP is
// the instance's primary address.
type RouteInfo struct {
	Destination netip.Prefix `json:"destination"`
	NextHopType string       `json:"nextHopType"`
	NextHopID   string       `json:"nextHopId"`
	NextHopIP   netip.Addr   `json:"nextHopIp,omitzero"`
}

// EIPView is an elastic IP address and what it is bound to.
type EIPView struct {
	ID         string `json:"id"`
	Address    string `json:"address"`
	Status     string `json:"status"`
	InstanceID string `json:"instanceId,omitempty"`
	PrivateIP  string `json:"privateIp,omitempty"`
	// Name is the name its allocation gave it.
	Name string `json:"name,omitempty"`
	// BandwidthPackageID is the Internet Shared Bandwidth the EIP is in.
	BandwidthPackageID string `json:"bandwidthPackageId,omitempty"`
}

// EIPInfo is an EIP that forwards: InUse, bound to PrivateIP. The
// emulator's hypervisor hook receives the whole list of them whenever an
// EIP starts or stops forwarding.
type EIPInfo struct {
	ID        string     `json:"id"`
	Address   netip.Addr `json:"address"`
	PrivateIP netip.Addr `json:"privateIp"`
}

// ENI statuses as ECS reports them.
const (
	ENIAvailable = "Available"
	ENIAttaching = "Attaching"
	ENIInUse     = "InUse"
	ENIDetaching = "Detaching"
	ENIDeleting  = "Deleting"
)

// ENI types.
const (
	ENITypePrimary   = "Primary"
	ENITypeSecondary = "Secondary"
	ENITypeTrunk     = "Trunk"
)

// Instance statuses.
const (
	StatusRunning = "Running"
	StatusStopped = "Stopped"
)

// EIP statuses.
const (
	EIPAvailable     = "Available"
	EIPAssociating   = "Associating"
	EIPInUse         = "InUse"
	EIPUnassociating = "Unassociating"
	EIPReleasing     = "Releasing"
)
