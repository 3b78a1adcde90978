package fakecloud

import (
	"net/netip"
	"slices"
	"time"
)

// eni is the world's record of one ENI. Field order and names are the
// persisted form.
type eni struct {
	ID              string     `json:"id"`
	Name            string     `json:"name,omitempty"`
	Description     string     `json:"description,omitempty"`
	Type            string     `json:"type"`
	Status          string     `json:"status"`
	VSwitchID       string     `json:"vswitchId"`
	VPCID           string     `json:"vpcId"`
	ZoneID          string     `json:"zoneId"`
	MAC             string     `json:"mac"`
	SecurityGroups  []string   `json:"securityGroups"`
	PrimaryIP       netip.Addr `json:"primaryIp"`
	IPv4            []addrRec  `json:"ipv4,omitempty"`
	IPv6            []addrRec  `json:"ipv6,omitempty"`
	Tags            []tag      `json:"tags,omitempty"`
	InstanceID      string     `json:"instanceId,omitempty"`
	DeviceIndex     int        `json:"deviceIndex,omitempty"`
	DeleteOnRelease bool       `json:"deleteOnRelease,omitempty"`
	SourceDestCheck bool       `json:"sourceDestCheck,omitempty"`
	ResourceGroupID string     `json:"resourceGroupId,omitempty"`
	TrafficMode     string     `json:"trafficMode,omitempty"`
	QueueNumber     int        `json:"queueNumber,omitempty"`
	CreatedAt       time.Time  `json:"createdAt"`
	// VisibleAt is when Describe starts listing the ENI (eventual
	// consistency); zero means at once.
	VisibleAt  time.Time `json:"visibleAt,omitempty"`
	AttachedAt time.Time `json:"attachedAt,omitempty"`
	// Due is when the pending transition of Attaching, Detaching or
	// Deleting completes.
	Due time.Time `json:"due,omitempty"`
	// Stale* keep a detached ENI visible in its former instance's
	// metadata until the metadata lag has passed.
	StaleInstanceID string    `json:"staleInstanceId,omitempty"`
	StaleUntil      time.Time `json:"staleUntil,omitempty"`
	// Gone* are addresses recently unassigned that metadata still lists.
	Gone4 []addrRec `json:"gone4,omitempty"`
	Gone6 []addrRec `json:"gone6,omitempty"`
}

// addrRec is an address with the time it changed (assigned, or for
// Gone lists, unassigned).
type addrRec struct {
	Addr netip.Addr `json:"addr"`
	At   time.Time  `json:"at"`
}

type tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// instance is one ECS instance.
type instance struct {
	ID               string    `json:"id"`
	Name             string    `json:"name,omitempty"`
	InstanceType     string    `json:"instanceType"`
	ZoneID           string    `json:"zoneId"`
	VPCID            string    `json:"vpcId"`
	VSwitchID        string    `json:"vswitchId"`
	SecurityGroupIDs []string  `json:"securityGroupIds"`
	PrimaryENI       string    `json:"primaryEni"`
	Status           string    `json:"status"`
	RAMRole          string    `json:"ramRole,omitempty"`
	MetadataTokens   string    `json:"metadataTokens,omitempty"`
	Tags             []tag     `json:"tags,omitempty"`
	CreatedAt        time.Time `json:"createdAt"`
}

// vpc, vswitch and securityGroup are static topology.
type vpc struct {
	ID           string       `json:"id"`
	Name         string       `json:"name,omitempty"`
	CIDR         netip.Prefix `json:"cidr"`
	IPv6CIDR     netip.Prefix `json:"ipv6Cidr,omitempty"`
	VRouterID    string       `json:"vRouterId"`
	RouteTableID string       `json:"routeTableId"`
	CreatedAt    time.Time    `json:"createdAt"`
}

type vswitch struct {
	ID        string       `json:"id"`
	Name      string       `json:"name,omitempty"`
	VPCID     string       `json:"vpcId"`
	ZoneID    string       `json:"zoneId"`
	CIDR      netip.Prefix `json:"cidr"`
	IPv6CIDR  netip.Prefix `json:"ipv6Cidr,omitempty"`
	Reserved  []string     `json:"reserved,omitempty"`
	CreatedAt time.Time    `json:"createdAt"`

	pool4 *pool4
	pool6 *pool6
}

type securityGroup struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	VPCID string `json:"vpcId"`
	Tags  []tag  `json:"tags,omitempty"`
}

// routeEntry is a custom (or system) entry of a VPC route table.
type routeEntry struct {
	ID          string       `json:"id"`
	TableID     string       `json:"tableId"`
	Destination netip.Prefix `json:"destination"`
	NextHopType string       `json:"nextHopType"`
	NextHopID   string       `json:"nextHopId,omitempty"`
	Name        string       `json:"name,omitempty"`
	Description string       `json:"description,omitempty"`
	Type        string       `json:"type"` // Custom or System
	Status      string       `json:"status"`
	Due         time.Time    `json:"due,omitempty"`
	CreatedAt   time.Time    `json:"createdAt"`
}

// eip is an elastic IP address.
type eip struct {
	ID                 string     `json:"id"`
	Address            netip.Addr `json:"address"`
	Name               string     `json:"name,omitempty"`
	Description        string     `json:"description,omitempty"`
	Bandwidth          string     `json:"bandwidth"`
	InternetChargeType string     `json:"internetChargeType"`
	ISP                string     `json:"isp"`
	Status             string     `json:"status"`
	InstanceID         string     `json:"instanceId,omitempty"`
	InstanceType       string     `json:"instanceType,omitempty"`
	PrivateIP          netip.Addr `json:"privateIp,omitempty"`
	// BandwidthPackageID is the Internet Shared Bandwidth it is in.
	BandwidthPackageID string    `json:"bandwidthPackageId,omitempty"`
	Tags               []tag     `json:"tags,omitempty"`
	Due                time.Time `json:"due,omitempty"`
	CreatedAt          time.Time `json:"createdAt"`
}

// idempotency is the remembered result of a call made with a ClientToken.
type idempotency struct {
	Action      string    `json:"action"`
	Fingerprint string    `json:"fingerprint"`
	Response    []byte    `json:"response"`
	At          time.Time `json:"at"`
}

// stsCred is a RAM-role credential handed to an instance.
type stsCred struct {
	AccessKeyID string    `json:"accessKeyId"`
	Secret      string    `json:"secret"`
	Token       string    `json:"token"`
	InstanceID  string    `json:"instanceId"`
	Role        string    `json:"role"`
	Issued      time.Time `json:"issued"`
	Expires     time.Time `json:"expires"`
}

// clone returns a copy of e that shares no slice with it, so that the API
// layer can render it after the lock is released while e changes.
func (e *eni) clone() eni {
	c := *e
	c.SecurityGroups = slices.Clone(e.SecurityGroups)
	c.IPv4 = slices.Clone(e.IPv4)
	c.IPv6 = slices.Clone(e.IPv6)
	c.Tags = slices.Clone(e.Tags)
	c.Gone4 = slices.Clone(e.Gone4)
	c.Gone6 = slices.Clone(e.Gone6)
	return c
}

// clone returns a copy of in that shares no slice with it.
func (in *instance) clone() instance {
	c := *in
	c.SecurityGroupIDs = slices.Clone(in.SecurityGroupIDs)
	c.Tags = slices.Clone(in.Tags)
	return c
}

// trafficMode is the ENI's NetworkInterfaceTrafficMode; unset means
// Standard.
func (e *eni) trafficMode() string {
	if e.TrafficMode == "" {
		return "Standard"
	}
	return e.TrafficMode
}
