package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"

	"github.com/terway-sim/terway/daemon/backoff"
)

// ENI is the cloud's view of one ENI.
type ENI struct {
	ID             string
	MAC            string
	Type           string // Primary, Secondary, Trunk
	Status         string // Available, Attaching, InUse, Detaching, Deleting
	VSwitchID      string
	VPCID          string
	ZoneID         string
	InstanceID     string
	DeviceIndex    int
	PrimaryIP      netip.Addr
	IPv4           []netip.Addr // secondary addresses
	IPv6           []netip.Addr
	SecurityGroups []string
	Tags           map[string]string
}

// ENI statuses.
const (
	StatusAvailable = "Available"
	StatusAttaching = "Attaching"
	StatusInUse     = "InUse"
	StatusDetaching = "Detaching"
	StatusDeleting  = "Deleting"
)

func eniFromSet(s ecs.NetworkInterfaceSet) ENI {
	e := ENI{ID: s.NetworkInterfaceId, MAC: s.MacAddress, Type: s.Type, Status: s.Status, VSwitchID: s.VSwitchId,
		VPCID: s.VpcId, ZoneID: s.ZoneId, InstanceID: s.InstanceId, DeviceIndex: s.Attachment.DeviceIndex,
		SecurityGroups: s.SecurityGroupIds.SecurityGroupId, Tags: map[string]string{}}
	if e.InstanceID == "" {
		e.InstanceID = s.Attachment.InstanceId
	}
	e.PrimaryIP, _ = netip.ParseAddr(s.PrivateIpAddress)
	for _, p := range s.PrivateIpSets.PrivateIpSet {
		if a, err := netip.ParseAddr(p.PrivateIpAddress); err == nil && !p.Primary {
			e.IPv4 = append(e.IPv4, a)
		}
	}
	for _, p := range s.Ipv6Sets.Ipv6Set {
		if a, err := netip.ParseAddr(p.Ipv6Address); err == nil {
			e.IPv6 = append(e.IPv6, a)
		}
	}
	for _, t := range s.Tags.Tag {
		k, v := t.TagKey, t.TagValue
		if k == "" {
			k, v = t.Key, t.Value
		}
		e.Tags[k] = v
	}
	return e
}

// CreateENIRequest describes a secondary ENI to create.
type CreateENIRequest struct {
	// IntentKey names this creation in the journal; a repeated call with
	// the same key reuses the ClientToken.
	IntentKey      string
	VSwitchID      string
	SecurityGroups []string
	// SecondaryIPv4 and IPv6 are how many addresses to assign at creation.
	SecondaryIPv4   int
	IPv6            int
	Tags            map[string]string
	Description     string
	ResourceGroupID string
	// OnCreated, when set, is called by Node.AllocateENI with the new
	// ENI's ID once it exists and before it is attached, so that a pool
	// can tell its own creations in flight from tagged ENIs it does not
	// know. It is not part of the request sent.
	OnCreated func(eniID string) `json:"-"`
}

// CreateENI creates an ENI (Available), retrying retryable answers with
// the eni_create policy and the same ClientToken.
func (c *Client) CreateENI(ctx context.Context, r CreateENIRequest) (ENI, error) {
	in, err := c.begin(r.IntentKey, IntentCreateENI, "", r.VSwitchID, r.SecondaryIPv4)
	if err != nil {
		return ENI{}, err
	}
	req := ecs.CreateCreateNetworkInterfaceRequest()
	req.VSwitchId, req.ClientToken = r.VSwitchID, in.ClientToken
	sgs := append([]string(nil), r.SecurityGroups...)
	req.SecurityGroupIds = &sgs
	req.Description = r.Description
	req.ResourceGroupId = r.ResourceGroupID
	req.InstanceType = "Secondary"
	req.DeleteOnRelease = requests.NewBoolean(true)
	if r.SecondaryIPv4 > 0 {
		req.SecondaryPrivateIpAddressCount = requests.NewInteger(r.SecondaryIPv4)
	}
	if r.IPv6 > 0 {
		req.Ipv6AddressCount = requests.NewInteger(r.IPv6)
	}
	keys := make([]string, 0, len(r.Tags))
	for k := range r.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a retry must send the identical request
	tags := make([]ecs.CreateNetworkInterfaceTag, 0, len(keys))
	for _, k := range keys {
		tags = append(tags, ecs.CreateNetworkInterfaceTag{Key: k, Value: r.Tags[k]})
	}
	req.Tag = &tags
	var out ENI
	err = c.retry(ctx, backoff.ENICreate, func(ctx context.Context) error {
		return c.ecsCall(ctx, "CreateNetworkInterface", allocCall, func(cl *ecs.Client) error {
			resp, err := cl.CreateNetworkInterface(req)
			if err != nil {
				return err
			}
			out = eniFromSet(ecs.NetworkInterfaceSet{NetworkInterfaceId: resp.NetworkInterfaceId, MacAddress: resp.MacAddress,
				Type: resp.Type, Status: resp.Status, VSwitchId: resp.VSwitchId, VpcId: resp.VpcId, ZoneId: resp.ZoneId,
				PrivateIpAddress: resp.PrivateIpAddress, SecurityGroupIds: ecs.SecurityGroupIdsInDescribeNetworkInterfaces{SecurityGroupId: resp.SecurityGroupIds.SecurityGroupId},
				PrivateIpSets: ecs.PrivateIpSetsInDescribeNetworkInterfaces{PrivateIpSet: resp.PrivateIpSets.PrivateIpSet},
				Ipv6Sets:      ecs.Ipv6SetsInDescribeNetworkInterfaces{Ipv6Set: resp.Ipv6Sets.Ipv6Set}})
			for _, t := range resp.Tags.Tag {
				out.Tags[t.TagKey] = t.TagValue
			}
			return nil
		})
	})
	c.finish(in, err)
	if err != nil {
		return ENI{}, fmt.Errorf("create ENI in %s: %w", r.VSwitchID, err)
	}
	return out, nil
}

// finish forgets an intent once its call has a final answer. After a
// retryable failure the call may have been applied without an answer, so
// the intent (and its token) is kept for the next attempt.
func (c *Client) finish(in Intent, err error) {
	if err == nil || !IsRetryable(err) || ErrorCode(err) == CodeIdempotentFailed {
		_ = c.journal.Forget(in.Key)
	}
}

// AttachENI attaches an Available ENI to an instance. A repeated attach
// that finds the ENI already attaching or attached to that instance
// succeeds.
func (c *Client) AttachENI(ctx context.Context, eniID, instanceID string) error {
	req := ecs.CreateAttachNetworkInterfaceRequest()
	req.NetworkInterfaceId, req.InstanceId = eniID, instanceID
	attempts := 0
	err := c.retry(ctx, backoff.ENIOps, func(ctx context.Context) error {
		attempts++
		err := c.ecsCall(ctx, "AttachNetworkInterface", allocCall, func(cl *ecs.Client) error {
			_, err := cl.AttachNetworkInterface(req)
			return err
		})
		if ErrorCode(err) == CodeInvalidENIState && attempts > 1 {
			if e, derr := c.DescribeENI(ctx, eniID); derr == nil && e.InstanceID == instanceID &&
				(e.Status == StatusAttaching || e.Status == StatusInUse) {
				return nil // our earlier attempt went through
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("attach %s to %s: %w", eniID, instanceID, err)
	}
	return nil
}

// DetachENI detaches an ENI. An ENI or instance that no longer exists, or
// an ENI already detaching or detached, counts as done.
func (c *Client) DetachENI(ctx context.Context, eniID, instanceID string) error {
	req := ecs.CreateDetachNetworkInterfaceRequest()
	req.NetworkInterfaceId, req.InstanceId = eniID, instanceID
	err := c.releaseENI(ctx, "DetachNetworkInterface", eniID, func(cl *ecs.Client) error {
		_, err := cl.DetachNetworkInterface(req)
		return err
	}, func(status string) (bool, bool) {
		return status == StatusAvailable || status == StatusDetaching, false
	})
	if err != nil {
		return fmt.Errorf("detach %s from %s: %w", eniID, instanceID, err)
	}
	return nil
}

// DeleteENI deletes an Available ENI; a missing ENI counts as deleted. An
// ENI still detaching is waited for.
func (c *Client) DeleteENI(ctx context.Context, eniID string) error {
	req := ecs.CreateDeleteNetworkInterfaceRequest()
	req.NetworkInterfaceId = eniID
	err := c.releaseENI(ctx, "DeleteNetworkInterface", eniID, func(cl *ecs.Client) error {
		_, err := cl.DeleteNetworkInterface(req)
		return err
	}, func(status string) (bool, bool) {
		return status == StatusDeleting, status == StatusDetaching // it becomes Available shortly
	})
	if err != nil {
		return fmt.Errorf("delete %s: %w", eniID, err)
	}
	// Deletion is asynchronous; an ENI that stays Deleting was not
	// deleted (ECS documents retrying then).
	err = c.backoff.Retry(ctx, backoff.ENIDeleteConfirm, func(ctx context.Context) (bool, error) {
		e, err := c.DescribeENI(ctx, eniID)
		switch {
		case IsNotFound(err):
			return true, nil
		case err != nil:
			return false, err
		}
		return false, fmt.Errorf("%s is still %s", eniID, e.Status)
	})
	if err != nil {
		return fmt.Errorf("delete %s: not confirmed: %w", eniID, err)
	}
	return nil
}

// releaseENI makes a release call (detach, delete) of an ENI with the
// eni_release policy. Release is idempotent: a missing ENI counts as
// done. An InvalidENIState answer asks settled about the ENI's described
// status: done when the ENI already is where the call would take it,
// retry when it is on its way to a status the call can act on; neither
// leaves the answer as it is.
func (c *Client) releaseENI(ctx context.Context, action, eniID string, call func(*ecs.Client) error,
	settled func(status string) (done, retry bool)) error {
	return c.retry(ctx, backoff.ENIRelease, func(ctx context.Context) error {
		err := c.ecsCall(ctx, action, releaseCall, call)
		switch {
		case IsNotFound(err):
			return nil
		case ErrorCode(err) == CodeInvalidOperation:
			// An EIP still bound to one of its addresses.
			return c.unbindStaleEIPs(ctx, eniID, nil, err)
		case ErrorCode(err) != CodeInvalidENIState:
			return err
		}
		e, derr := c.DescribeENI(ctx, eniID)
		if IsNotFound(derr) {
			return nil
		}
		if derr != nil {
			return err
		}
		switch done, retry := settled(e.Status); {
		case done:
			return nil
		case retry:
			return errRetry{err}
		}
		return err
	})
}

// errRetry marks an answer that is final in general but worth waiting
// out here.
type errRetry struct{ error }

func (e errRetry) Unwrap() error { return e.error }

// DescribeENI reads one ENI (DescribeNetworkInterfaceAttribute).
func (c *Client) DescribeENI(ctx context.Context, eniID string) (ENI, error) {
	req := ecs.CreateDescribeNetworkInterfaceAttributeRequest()
	req.NetworkInterfaceId = eniID
	var out ENI
	err := c.ecsCall(ctx, "DescribeNetworkInterfaceAttribute", readCall, func(cl *ecs.Client) error {
		r, err := cl.DescribeNetworkInterfaceAttribute(req)
		if err != nil {
			return err
		}
		out = eniFromSet(ecs.NetworkInterfaceSet{NetworkInterfaceId: r.NetworkInterfaceId, MacAddress: r.MacAddress, Type: r.Type,
			Status: r.Status, VSwitchId: r.VSwitchId, VpcId: r.VpcId, ZoneId: r.ZoneId, InstanceId: r.InstanceId,
			PrivateIpAddress: r.PrivateIpAddress,
			Attachment:       ecs.Attachment{InstanceId: r.Attachment.InstanceId, DeviceIndex: r.Attachment.DeviceIndex},
			SecurityGroupIds: ecs.SecurityGroupIdsInDescribeNetworkInterfaces{SecurityGroupId: r.SecurityGroupIds.SecurityGroupId},
			PrivateIpSets:    ecs.PrivateIpSetsInDescribeNetworkInterfaces{PrivateIpSet: r.PrivateIpSets.PrivateIpSet},
			Ipv6Sets:         ecs.Ipv6SetsInDescribeNetworkInterfaces{Ipv6Set: r.Ipv6Sets.Ipv6Set},
			Tags:             ecs.TagsInDescribeNetworkInterfaces{Tag: r.Tags.Tag}})
		return nil
	})
	return out, err
}

// notFoundGrace is how many not-found answers WaitENIStatus waits out: a
// new ENI can be missing from Describe for a moment, a deleted one for
// good.
const notFoundGrace = 3

// WaitENIStatus polls an ENI until it reaches status, or any one of
// several statuses (wait_eni_status policy).
func (c *Client) WaitENIStatus(ctx context.Context, eniID string, status ...string) (ENI, error) {
	var out ENI
	notFound := 0
	err := c.backoff.Retry(ctx, backoff.WaitENIStatus, func(ctx context.Context) (bool, error) {
		e, err := c.DescribeENI(ctx, eniID)
		switch {
		case err == nil && slices.Contains(status, e.Status):
			out = e
			return true, nil
		case err == nil:
			return false, fmt.Errorf("%s is %s", eniID, e.Status)
		case IsNotFound(err):
			if notFound++; notFound > notFoundGrace {
				return false, backoff.Permanent(err)
			}
			return false, err
		case IsRetryable(err):
			return false, err
		}
		return false, backoff.Permanent(err)
	})
	if err != nil {
		return ENI{}, fmt.Errorf("wait for %s to be %s: %w", eniID, strings.Join(status, " or "), err)
	}
	return out, nil
}

// ENIFilter selects ENIs for DescribeENIs; empty fields match all.
type ENIFilter struct {
	InstanceID string
	VPCID      string
	Type       string
	Status     string
	IDs        []string
	Tags       map[string]string
}

// DescribeENIs lists ENIs, following NextToken pages.
func (c *Client) DescribeENIs(ctx context.Context, f ENIFilter) ([]ENI, error) {
	var out []ENI
	token := ""
	for {
		req := ecs.CreateDescribeNetworkInterfacesRequest()
		req.InstanceId, req.VpcId, req.Type, req.Status = f.InstanceID, f.VPCID, f.Type, f.Status
		req.MaxResults = requests.NewInteger(500)
		req.NextToken = token
		if len(f.IDs) > 0 {
			ids := append([]string(nil), f.IDs...)
			req.NetworkInterfaceId = &ids
		}
		if len(f.Tags) > 0 {
			keys := make([]string, 0, len(f.Tags))
			for k := range f.Tags {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			tags := make([]ecs.DescribeNetworkInterfacesTag, 0, len(keys))
			for _, k := range keys {
				tags = append(tags, ecs.DescribeNetworkInterfacesTag{Key: k, Value: f.Tags[k]})
			}
			req.Tag = &tags
		}
		var resp *ecs.DescribeNetworkInterfacesResponse
		err := c.retry(ctx, backoff.Default, func(ctx context.Context) error {
			return c.ecsCall(ctx, "DescribeNetworkInterfaces", readCall, func(cl *ecs.Client) error {
				var err error
				resp, err = cl.DescribeNetworkInterfaces(req)
				return err
			})
		})
		if err != nil {
			return nil, fmt.Errorf("describe ENIs: %w", err)
		}
		for _, s := range resp.NetworkInterfaceSets.NetworkInterfaceSet {
			out = append(out, eniFromSet(s))
		}
		if token = resp.NextToken; token == "" {
			return out, nil
		}
	}
}

// AssignIPv4 assigns n secondary IPv4 addresses (n ≤ 10) to an ENI,
// retrying retryable answers with the same ClientToken. A dry vSwitch is
// answered at once (IsExhausted).
func (c *Client) AssignIPv4(ctx context.Context, intentKey, eniID string, n int) ([]netip.Addr, error) {
	req := ecs.CreateAssignPrivateIpAddressesRequest()
	req.NetworkInterfaceId = eniID
	req.SecondaryPrivateIpAddressCount = requests.NewInteger(n)
	got, err := c.assign(ctx, intentKey, IntentAssignIPv4, "AssignPrivateIpAddresses", eniID, n,
		func(cl *ecs.Client, token string) ([]string, error) {
			req.ClientToken = token
			r, err := cl.AssignPrivateIpAddresses(req)
			if err != nil {
				return nil, err
			}
			return r.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress, nil
		})
	if err != nil {
		return nil, fmt.Errorf("assign %d IPv4 to %s: %w", n, eniID, err)
	}
	if len(got) != n {
		return nil, fmt.Errorf("assign %d IPv4 to %s: the cloud assigned %d", n, eniID, len(got))
	}
	return parseAddrs(got)
}

// AssignIPv6 assigns n IPv6 addresses to an ENI.
func (c *Client) AssignIPv6(ctx context.Context, intentKey, eniID string, n int) ([]netip.Addr, error) {
	req := ecs.CreateAssignIpv6AddressesRequest()
	req.NetworkInterfaceId = eniID
	req.Ipv6AddressCount = requests.NewInteger(n)
	got, err := c.assign(ctx, intentKey, IntentAssignIPv6, "AssignIpv6Addresses", eniID, n,
		func(cl *ecs.Client, token string) ([]string, error) {
			req.ClientToken = token
			r, err := cl.AssignIpv6Addresses(req)
			if err != nil {
				return nil, err
			}
			return r.Ipv6Sets.Ipv6Address, nil
		})
	if err != nil {
		return nil, fmt.Errorf("assign %d IPv6 to %s: %w", n, eniID, err)
	}
	return parseAddrs(got)
}

// assign records the intent of an assignment, makes the call with the
// intent's ClientToken, retrying as ENI IP operations do, and settles the
// intent with the outcome. call returns the addresses the cloud assigned.
func (c *Client) assign(ctx context.Context, intentKey, kind, action, eniID string, n int,
	call func(cl *ecs.Client, token string) ([]string, error)) ([]string, error) {
	in, err := c.begin(intentKey, kind, eniID, "", n)
	if err != nil {
		return nil, err
	}
	var got []string
	err = c.retry(ctx, backoff.ENIIPOps, func(ctx context.Context) error {
		return c.ecsCall(ctx, action, allocCall, func(cl *ecs.Client) error {
			g, err := call(cl, in.ClientToken)
			if err == nil {
				got = g
			}
			return err
		})
	})
	c.finish(in, err)
	return got, err
}

// UnassignIPv4 gives addresses back; addresses (or an ENI) already gone
// count as unassigned.
func (c *Client) UnassignIPv4(ctx context.Context, eniID string, ips []netip.Addr) error {
	req := ecs.CreateUnassignPrivateIpAddressesRequest()
	req.NetworkInterfaceId = eniID
	strs := addrStrings(ips)
	req.PrivateIpAddress = &strs
	return c.unassign(ctx, "UnassignPrivateIpAddresses", eniID, ips, func(cl *ecs.Client) error {
		_, err := cl.UnassignPrivateIpAddresses(req)
		return err
	})
}

// UnassignIPv6 gives IPv6 addresses back.
func (c *Client) UnassignIPv6(ctx context.Context, eniID string, ips []netip.Addr) error {
	req := ecs.CreateUnassignIpv6AddressesRequest()
	req.NetworkInterfaceId = eniID
	strs := addrStrings(ips)
	req.Ipv6Address = &strs
	return c.unassign(ctx, "UnassignIpv6Addresses", eniID, ips, func(cl *ecs.Client) error {
		_, err := cl.UnassignIpv6Addresses(req)
		return err
	})
}

func (c *Client) unassign(ctx context.Context, action, eniID string, ips []netip.Addr, fn func(*ecs.Client) error) error {
	err := c.retry(ctx, backoff.ENIIPOps, func(ctx context.Context) error {
		err := c.ecsCall(ctx, action, releaseCall, fn)
		switch ErrorCode(err) {
		case CodeIPUnassigned, CodeENINotFound:
			return nil
		case CodeInvalidOperation:
			return c.unbindStaleEIPs(ctx, eniID, ips, err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("unassign %v from %s: %w", ips, eniID, err)
	}
	return nil
}

func addrStrings(ips []netip.Addr) []string {
	out := make([]string, len(ips))
	for i, a := range ips {
		out[i] = a.String()
	}
	return out
}

// Limits are the networking limits of an instance type
// (terway-facts.md §4).
type Limits struct {
	InstanceType string
	// Adapters counts ENIs including eth0.
	Adapters       int
	TotalAdapters  int
	IPv4PerAdapter int
	IPv6PerAdapter int
	TrunkSupported bool
}

// SupportIPv6 reports whether dual-stack ENIMultiIP works on this type:
// as many IPv6 as IPv4 addresses per ENI.
func (l Limits) SupportIPv6() bool {
	return l.IPv6PerAdapter > 0 && l.IPv6PerAdapter >= l.IPv4PerAdapter
}

// MaxPodsENIMultiIP is the shared-ENI pod capacity: every address of
// every secondary ENI.
func (l Limits) MaxPodsENIMultiIP() int { return (l.Adapters - 1) * l.IPv4PerAdapter }

// MaxPodsENIOnly is the exclusive-ENI pod capacity.
func (l Limits) MaxPodsENIOnly() int { return l.Adapters - 1 }

// InstanceTypeLimits returns the limits of an instance type and the
// cloud's description of it as JSON (ecs.InstanceType, what
// LimitsFromInfo reads back), cached for the process's life.
func (c *Client) InstanceTypeLimits(ctx context.Context, instanceType string) (Limits, []byte, error) {
	key := c.region + "/" + instanceType
	if v, ok := c.limitsCache.Load(key); ok {
		li := v.(limitsInfo)
		return li.limits, li.info, nil
	}
	req := ecs.CreateDescribeInstanceTypesRequest()
	req.InstanceTypes = &[]string{instanceType}
	var t *ecs.InstanceType
	err := c.retry(ctx, backoff.Default, func(ctx context.Context) error {
		return c.ecsCall(ctx, "DescribeInstanceTypes", readCall, func(cl *ecs.Client) error {
			r, err := cl.DescribeInstanceTypes(req)
			if err != nil {
				return err
			}
			for i := range r.InstanceTypes.InstanceType {
				if r.InstanceTypes.InstanceType[i].InstanceTypeId == instanceType {
					t = &r.InstanceTypes.InstanceType[i]
				}
			}
			return nil
		})
	})
	if err != nil {
		return Limits{}, nil, fmt.Errorf("describe instance type %s: %w", instanceType, err)
	}
	if t == nil {
		return Limits{}, nil, fmt.Errorf("describe instance type %s: not in the answer", instanceType)
	}
	l, err := limitsOf(t)
	if err != nil {
		return Limits{}, nil, err
	}
	info, err := json.Marshal(t)
	if err != nil {
		return Limits{}, nil, fmt.Errorf("instance type %s: %w", instanceType, err)
	}
	c.limitsCache.Store(key, limitsInfo{limits: l, info: info})
	return l, info, nil
}

type limitsInfo struct {
	limits Limits
	info   []byte
}

// limitsOf reads the limits out of the cloud's description of a type.
func limitsOf(t *ecs.InstanceType) (Limits, error) {
	l := Limits{InstanceType: t.InstanceTypeId, Adapters: t.EniQuantity, TotalAdapters: t.EniTotalQuantity,
		IPv4PerAdapter: max(0, t.EniPrivateIpAddressQuantity), IPv6PerAdapter: max(0, t.EniIpv6AddressQuantity),
		TrunkSupported: t.EniTrunkSupported}
	if l.Adapters < 1 || l.IPv4PerAdapter < 1 {
		return Limits{}, fmt.Errorf("instance type %s: implausible limits %+v", t.InstanceTypeId, l)
	}
	return l, nil
}

// LimitsFromInfo reads limits that InstanceTypeLimits described before
// (kept in the store, or published on a node as Terway does with the
// annotation alibabacloud.com/instance-type-info): the JSON must describe
// instanceType, the type metadata gives this instance now (a resized
// instance must not keep its old type's limits), with plausible limits.
func LimitsFromInfo(info []byte, instanceType string) (Limits, error) {
	var t ecs.InstanceType
	if err := json.Unmarshal(info, &t); err != nil {
		return Limits{}, fmt.Errorf("read instance type info: %w", err)
	}
	if t.InstanceTypeId != instanceType {
		return Limits{}, fmt.Errorf("instance type info describes %q, this instance is %q", t.InstanceTypeId, instanceType)
	}
	return limitsOf(&t)
}

// VSwitch is the cloud's view of a vSwitch.
type VSwitch struct {
	ID        string
	ZoneID    string
	CIDR      netip.Prefix
	CIDR6     netip.Prefix
	Available int
}

// DescribeVSwitch reads one vSwitch.
func (c *Client) DescribeVSwitch(ctx context.Context, id string) (VSwitch, error) {
	req := vpc.CreateDescribeVSwitchesRequest()
	req.VSwitchId = id
	var out VSwitch
	err := c.retryHint(ctx, backoff.Default, func(ctx context.Context) error {
		return c.vpcCall(ctx, "DescribeVSwitches", readCall, func(cl *vpc.Client) error {
			r, err := cl.DescribeVSwitches(req)
			if err != nil {
				return err
			}
			for _, v := range r.VSwitches.VSwitch {
				if v.VSwitchId == id {
					out = VSwitch{ID: id, ZoneID: v.ZoneId, Available: int(v.AvailableIpAddressCount)}
					out.CIDR, _ = netip.ParsePrefix(v.CidrBlock)
					out.CIDR6, _ = netip.ParsePrefix(v.Ipv6CidrBlock)
					return nil
				}
			}
			return errVSwitchNotFound
		})
	})
	if err != nil {
		return VSwitch{}, fmt.Errorf("describe vSwitch %s: %w", id, err)
	}
	return out, nil
}

var errVSwitchNotFound = errors.New("no such vSwitch")

// SecurityGroupsOfInstance returns the security groups of an instance's
// primary ENI, the default for new ENIs when none are configured.
func (c *Client) SecurityGroupsOfInstance(ctx context.Context, instanceID string) ([]string, error) {
	enis, err := c.DescribeENIs(ctx, ENIFilter{InstanceID: instanceID, Type: "Primary"})
	if err != nil {
		return nil, err
	}
	if len(enis) == 0 {
		return nil, fmt.Errorf("instance %s has no primary ENI", instanceID)
	}
	return enis[0].SecurityGroups, nil
}

// AssignIPv4Addrs assigns the given secondary IPv4 addresses (at most 10)
// to an ENI: the heal puts back addresses an operator unassigned while
// pods used them. The call names its addresses, so a retry after a lost
// answer cannot assign others; an address that is another ENI's by now
// is refused (IsAddressTaken).
func (c *Client) AssignIPv4Addrs(ctx context.Context, eniID string, ips []netip.Addr) error {
	req := ecs.CreateAssignPrivateIpAddressesRequest()
	req.NetworkInterfaceId = eniID
	strs := addrStrings(ips)
	req.PrivateIpAddress = &strs
	err := c.retry(ctx, backoff.ENIIPOps, func(ctx context.Context) error {
		return c.ecsCall(ctx, "AssignPrivateIpAddresses", allocCall, func(cl *ecs.Client) error {
			_, err := cl.AssignPrivateIpAddresses(req)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("assign %v to %s: %w", ips, eniID, err)
	}
	return nil
}
