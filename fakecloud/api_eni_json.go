package fakecloud

import (
	"net/netip"
	"time"
)

// JSON shapes of ECS ENI responses. Names are the API's, case-sensitive;
// every list is emitted as an array inside its wrapper object, as the SDKs
// require.

// timeLayout is how ECS writes times.
const timeLayout = "2006-01-02T15:04:05Z"

func apiTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

type associatedPublicIP struct {
	PublicIPAddress string `json:"PublicIpAddress"`
	AllocationID    string `json:"AllocationId"`
}

type privateIPSet struct {
	PrivateIPAddress   string             `json:"PrivateIpAddress"`
	Primary            bool               `json:"Primary"`
	PrivateDNSName     string             `json:"PrivateDnsName,omitempty"`
	AssociatedPublicIP associatedPublicIP `json:"AssociatedPublicIp"`
}

type ipv6Set struct {
	Ipv6Address string `json:"Ipv6Address"`
}

type tagJSON struct {
	Key      string `json:"Key"`
	Value    string `json:"Value"`
	TagKey   string `json:"TagKey"`
	TagValue string `json:"TagValue"`
}

type securityGroupIDs struct {
	SecurityGroupID []string `json:"SecurityGroupId"`
}

type privateIPSets struct {
	PrivateIPSet []privateIPSet `json:"PrivateIpSet"`
}

type ipv6Sets struct {
	Ipv6Set []ipv6Set `json:"Ipv6Set"`
}

type ipv4PrefixSets struct {
	Ipv4PrefixSet []struct {
		Ipv4Prefix string `json:"Ipv4Prefix"`
	} `json:"Ipv4PrefixSet"`
}

type ipv6PrefixSets struct {
	Ipv6PrefixSet []struct {
		Ipv6Prefix string `json:"Ipv6Prefix"`
	} `json:"Ipv6PrefixSet"`
}

type tagsJSON struct {
	Tag []tagJSON `json:"Tag"`
}

type attachmentJSON struct {
	InstanceID                string `json:"InstanceId"`
	DeviceIndex               int    `json:"DeviceIndex"`
	NetworkCardIndex          int    `json:"NetworkCardIndex"`
	TrunkNetworkInterfaceID   string `json:"TrunkNetworkInterfaceId"`
	AttachedTime              string `json:"AttachedTime,omitempty"`
	MemberNetworkInterfaceIDs struct {
		MemberNetworkInterfaceID []string `json:"MemberNetworkInterfaceId"`
	} `json:"MemberNetworkInterfaceIds"`
}

// eniJSON is an ENI as DescribeNetworkInterfaces lists it; the other ENI
// responses are subsets with the same names.
type eniJSON struct {
	NetworkInterfaceID          string             `json:"NetworkInterfaceId"`
	NetworkInterfaceName        string             `json:"NetworkInterfaceName"`
	Description                 string             `json:"Description"`
	Status                      string             `json:"Status"`
	Type                        string             `json:"Type"`
	VpcID                       string             `json:"VpcId"`
	VSwitchID                   string             `json:"VSwitchId"`
	ZoneID                      string             `json:"ZoneId"`
	MacAddress                  string             `json:"MacAddress"`
	PrivateIPAddress            string             `json:"PrivateIpAddress"`
	InstanceID                  string             `json:"InstanceId"`
	CreationTime                string             `json:"CreationTime"`
	ResourceGroupID             string             `json:"ResourceGroupId"`
	OwnerID                     string             `json:"OwnerId"`
	ServiceID                   int64              `json:"ServiceID"`
	ServiceManaged              bool               `json:"ServiceManaged"`
	NetworkInterfaceTrafficMode string             `json:"NetworkInterfaceTrafficMode"`
	QueueNumber                 int                `json:"QueueNumber"`
	QueuePairNumber             int                `json:"QueuePairNumber"`
	DeleteOnRelease             bool               `json:"DeleteOnRelease"`
	SourceDestCheck             bool               `json:"SourceDestCheck"`
	SecurityGroupIDs            securityGroupIDs   `json:"SecurityGroupIds"`
	PrivateIPSets               privateIPSets      `json:"PrivateIpSets"`
	Ipv6Sets                    ipv6Sets           `json:"Ipv6Sets"`
	Ipv4PrefixSets              ipv4PrefixSets     `json:"Ipv4PrefixSets"`
	Ipv6PrefixSets              ipv6PrefixSets     `json:"Ipv6PrefixSets"`
	Tags                        tagsJSON           `json:"Tags"`
	AssociatedPublicIP          associatedPublicIP `json:"AssociatedPublicIp"`
	Attachment                  *attachmentJSON    `json:"Attachment,omitempty"`
}

// eniJSON renders an ENI as the ENI actions answer it.
func (c *Cloud) eniJSON(e eniSnap) eniJSON {
	j := eniJSON{
		NetworkInterfaceID: e.ID, NetworkInterfaceName: e.Name, Description: e.Description, Status: e.Status,
		Type: e.Type, VpcID: e.VPCID, VSwitchID: e.VSwitchID, ZoneID: e.ZoneID, MacAddress: e.MAC,
		PrivateIPAddress: e.PrimaryIP.String(), InstanceID: e.InstanceID, CreationTime: apiTime(e.CreatedAt),
		ResourceGroupID: e.ResourceGroupID, OwnerID: c.account, NetworkInterfaceTrafficMode: e.trafficMode(),
		QueueNumber: e.QueueNumber, DeleteOnRelease: e.DeleteOnRelease, SourceDestCheck: e.SourceDestCheck,
		SecurityGroupIDs: securityGroupIDs{SecurityGroupID: orEmpty(e.SecurityGroups)},
		PrivateIPSets:    privateIPSets{PrivateIPSet: []privateIPSet{}},
		Ipv6Sets:         ipv6Sets{Ipv6Set: []ipv6Set{}},
		Tags:             tagsJSON{Tag: tagList(e.Tags)},
	}
	j.Ipv4PrefixSets.Ipv4PrefixSet = []struct {
		Ipv4Prefix string `json:"Ipv4Prefix"`
	}{}
	j.Ipv6PrefixSets.Ipv6PrefixSet = []struct {
		Ipv6Prefix string `json:"Ipv6Prefix"`
	}{}
	j.PrivateIPSets.PrivateIPSet = append(j.PrivateIPSets.PrivateIPSet, privateIPSetOf(e, e.PrimaryIP, true))
	for _, a := range e.IPv4 {
		j.PrivateIPSets.PrivateIPSet = append(j.PrivateIPSets.PrivateIPSet, privateIPSetOf(e, a.Addr, false))
	}
	for _, a := range e.IPv6 {
		j.Ipv6Sets.Ipv6Set = append(j.Ipv6Sets.Ipv6Set, ipv6Set{Ipv6Address: a.Addr.String()})
	}
	j.AssociatedPublicIP = publicIPOf(e, e.PrimaryIP)
	if e.InstanceID != "" {
		j.Attachment = &attachmentJSON{InstanceID: e.InstanceID, DeviceIndex: e.DeviceIndex, AttachedTime: apiTime(e.AttachedAt)}
		j.Attachment.MemberNetworkInterfaceIDs.MemberNetworkInterfaceID = []string{}
	}
	return j
}

func privateIPSetOf(e eniSnap, a netip.Addr, primary bool) privateIPSet {
	return privateIPSet{PrivateIPAddress: a.String(), Primary: primary, AssociatedPublicIP: publicIPOf(e, a)}
}

// publicIPOf is the EIP bound to address a of e, if any.
func publicIPOf(e eniSnap, a netip.Addr) associatedPublicIP {
	ref, ok := e.eips[a]
	if !ok {
		return associatedPublicIP{}
	}
	return associatedPublicIP{PublicIPAddress: ref.address.String(), AllocationID: ref.id}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func tagList(tags []tag) []tagJSON {
	out := make([]tagJSON, 0, len(tags))
	for _, t := range tags {
		out = append(out, tagJSON{Key: t.Key, Value: t.Value, TagKey: t.Key, TagValue: t.Value})
	}
	return out
}
