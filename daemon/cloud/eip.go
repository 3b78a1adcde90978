package cloud

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"

	"github.com/terway-sim/terway/daemon/backoff"
)

// EIP is the cloud's view of one elastic IP address.
type EIP struct {
	ID      string
	Address netip.Addr
	// Status is Available, Associating, InUse or Unassociating.
	Status string
	// InstanceID and InstanceType are what it is bound to (an ENI:
	// NetworkInterface), PrivateIP the address there.
	InstanceID, InstanceType string
	PrivateIP                netip.Addr
	// BandwidthPackageID is the Internet Shared Bandwidth it is in.
	BandwidthPackageID string
	Name, Description  string
	ISP                string
	Bandwidth          int
	InternetChargeType string
	Tags               map[string]string
}

// EIP statuses.
const (
	EIPAvailable     = "Available"
	EIPAssociating   = "Associating"
	EIPInUse         = "InUse"
	EIPUnassociating = "Unassociating"
)

// EIP error codes the client handles.
const (
	CodeEIPNotFound        = "InvalidAllocationId.NotFound"
	CodeIncorrectEIPStatus = "IncorrectEipStatus"
	CodeEIPDuplicated      = "InvalidAssociation.Duplicated"
	CodeIPNotInCbwp        = "OperationUnsupported.IpNotInCbwp"
	CodeTaskConflict       = "TaskConflict"
)

// IntentAllocateEIP is the intent kind of AllocateEIP.
const IntentAllocateEIP = "AllocateEIP"

func eipFromAPI(a vpc.EipAddress) EIP {
	e := EIP{ID: a.AllocationId, Status: a.Status, InstanceID: a.InstanceId, InstanceType: a.InstanceType,
		BandwidthPackageID: a.BandwidthPackageId, Name: a.Name, Description: a.Description, ISP: a.ISP,
		InternetChargeType: a.InternetChargeType, Tags: map[string]string{}}
	e.Address, _ = netip.ParseAddr(a.IpAddress)
	e.PrivateIP, _ = netip.ParseAddr(a.PrivateIpAddress)
	e.Bandwidth, _ = strconv.Atoi(a.Bandwidth)
	for _, t := range a.Tags.Tag {
		e.Tags[t.Key] = t.Value
	}
	return e
}

// AllocateEIPRequest describes an EIP to allocate.
type AllocateEIPRequest struct {
	// IntentKey names this allocation in the journal; a repeated call
	// with the same key reuses the ClientToken, so a lost answer does not
	// allocate twice.
	IntentKey string
	// Bandwidth in Mbit/s; 0 is the cloud's default (5).
	Bandwidth int
	// InternetChargeType is PayByTraffic (default) or PayByBandwidth.
	InternetChargeType string
	ISP                string
	// Name and Description mark the EIP at once: tags come with a
	// second call, which a crash in between would miss.
	Name, Description string
}

// AllocateEIP allocates an EIP (Available), retrying retryable answers
// with the same ClientToken.
func (c *Client) AllocateEIP(ctx context.Context, r AllocateEIPRequest) (EIP, error) {
	in, err := c.begin(r.IntentKey, IntentAllocateEIP, "", "", 1)
	if err != nil {
		return EIP{}, err
	}
	req := vpc.CreateAllocateEipAddressRequest()
	req.ClientToken, req.InternetChargeType, req.ISP = in.ClientToken, r.InternetChargeType, r.ISP
	req.Name, req.Description = r.Name, r.Description
	if r.Bandwidth > 0 {
		req.Bandwidth = strconv.Itoa(r.Bandwidth)
	}
	var out EIP
	err = c.retry(ctx, backoff.Default, func(ctx context.Context) error {
		return c.vpcCall(ctx, "AllocateEipAddress", allocCall, func(cl *vpc.Client) error {
			resp, err := cl.AllocateEipAddress(req)
			if err != nil {
				return err
			}
			out = EIP{ID: resp.AllocationId, Status: EIPAvailable, Name: r.Name, Description: r.Description, Tags: map[string]string{}}
			out.Address, _ = netip.ParseAddr(resp.EipAddress)
			return nil
		})
	})
	c.finish(in, err)
	if err != nil {
		return EIP{}, fmt.Errorf("allocate EIP: %w", err)
	}
	return out, nil
}

// TagEIP sets tags on an EIP (VPC's TagResources).
func (c *Client) TagEIP(ctx context.Context, id string, tags map[string]string) error {
	req := vpc.CreateTagResourcesRequest()
	req.ResourceType, req.ResourceId = "EIP", &[]string{id}
	list := make([]vpc.TagResourcesTag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		list = append(list, vpc.TagResourcesTag{Key: k, Value: tags[k]})
	}
	req.Tag = &list
	err := c.retry(ctx, backoff.Default, func(ctx context.Context) error {
		return c.vpcCall(ctx, "TagResources", allocCall, func(cl *vpc.Client) error {
			_, err := cl.TagResources(req)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("tag EIP %s: %w", id, err)
	}
	return nil
}

// AssociateEIP binds an EIP to privateIP of an ENI (the ENI's primary
// address when invalid) and returns once the call is accepted; see
// WaitEIPStatus. A repeat that finds the EIP already bound or binding to
// that target succeeds.
func (c *Client) AssociateEIP(ctx context.Context, id, eniID string, privateIP netip.Addr) error {
	req := vpc.CreateAssociateEipAddressRequest()
	req.AllocationId, req.InstanceId, req.InstanceType = id, eniID, "NetworkInterface"
	if privateIP.IsValid() {
		req.PrivateIpAddress = privateIP.String()
	}
	err := c.retry(ctx, backoff.Default, func(ctx context.Context) error {
		err := c.vpcCall(ctx, "AssociateEipAddress", allocCall, func(cl *vpc.Client) error {
			_, err := cl.AssociateEipAddress(req)
			return err
		})
		if code := ErrorCode(err); code == CodeIncorrectEIPStatus || code == CodeEIPDuplicated {
			if e, derr := c.DescribeEIP(ctx, id); derr == nil && e.InstanceID == eniID &&
				(!privateIP.IsValid() || e.PrivateIP == privateIP) && (e.Status == EIPAssociating || e.Status == EIPInUse) {
				return nil // an earlier attempt went through
			}
		}
		return retryTaskConflict(err)
	})
	if err != nil {
		return fmt.Errorf("associate EIP %s with %s %s: %w", id, eniID, privateIP, err)
	}
	return nil
}

// UnassociateEIP unbinds an EIP from privateIP of an ENI (any address
// of it when invalid). An EIP that is gone, already unbinding or
// Available, or bound elsewhere now (another ENI, or another address of
// this one: a pod that took a user's EIP from another on the node), counts
// as done: the binding this call was about no longer exists.
func (c *Client) UnassociateEIP(ctx context.Context, id, eniID string, privateIP netip.Addr) error {
	return c.UnassociateEIPFrom(ctx, id, "NetworkInterface", eniID, privateIP)
}

// UnassociateEIPFrom is UnassociateEIP from an instance of any type
// (EcsInstance, NetworkInterface, ...), as DescribeEIP reports it.
func (c *Client) UnassociateEIPFrom(ctx context.Context, id, instanceType, instanceID string, privateIP netip.Addr) error {
	eniID := instanceID
	req := vpc.CreateUnassociateEipAddressRequest()
	req.AllocationId, req.InstanceId, req.InstanceType = id, instanceID, instanceType
	if privateIP.IsValid() {
		req.PrivateIpAddress = privateIP.String()
	}
	err := c.retry(ctx, backoff.Default, func(ctx context.Context) error {
		err := c.vpcCall(ctx, "UnassociateEipAddress", releaseCall, func(cl *vpc.Client) error {
			_, err := cl.UnassociateEipAddress(req)
			return err
		})
		if err == nil || ErrorCode(err) == CodeEIPNotFound {
			return nil
		}
		e, derr := c.DescribeEIP(ctx, id)
		switch {
		case errors.Is(derr, ErrEIPNotFound):
			return nil
		case derr == nil && (e.InstanceID != eniID || (privateIP.IsValid() && e.PrivateIP != privateIP) ||
			e.Status == EIPAvailable || e.Status == EIPUnassociating):
			return nil
		case derr == nil && e.Status == EIPAssociating:
			return errRetry{err} // it can be unbound once bound
		}
		return retryTaskConflict(err)
	})
	if err != nil {
		return fmt.Errorf("unassociate EIP %s from %s: %w", id, eniID, err)
	}
	return nil
}

// ReleaseEIP releases an Available EIP; a missing one counts as released.
// One still unbinding is waited for.
func (c *Client) ReleaseEIP(ctx context.Context, id string) error {
	req := vpc.CreateReleaseEipAddressRequest()
	req.AllocationId = id
	err := c.retry(ctx, backoff.Default, func(ctx context.Context) error {
		err := c.vpcCall(ctx, "ReleaseEipAddress", releaseCall, func(cl *vpc.Client) error {
			_, err := cl.ReleaseEipAddress(req)
			return err
		})
		switch {
		case err == nil || ErrorCode(err) == CodeEIPNotFound:
			return nil
		case ErrorCode(err) == CodeIncorrectEIPStatus:
			if e, derr := c.DescribeEIP(ctx, id); derr == nil && e.Status == EIPUnassociating {
				return errRetry{err}
			}
		}
		return retryTaskConflict(err)
	})
	if err != nil {
		return fmt.Errorf("release EIP %s: %w", id, err)
	}
	return nil
}

// AddEIPToBandwidthPackage puts an EIP into an Internet Shared Bandwidth.
func (c *Client) AddEIPToBandwidthPackage(ctx context.Context, pkg, id string) error {
	req := vpc.CreateAddCommonBandwidthPackageIpRequest()
	req.BandwidthPackageId, req.IpInstanceId = pkg, id
	err := c.retry(ctx, backoff.Default, func(ctx context.Context) error {
		return retryTaskConflict(c.vpcCall(ctx, "AddCommonBandwidthPackageIp", allocCall, func(cl *vpc.Client) error {
			_, err := cl.AddCommonBandwidthPackageIp(req)
			return err
		}))
	})
	if err != nil {
		return fmt.Errorf("add EIP %s to bandwidth package %s: %w", id, pkg, err)
	}
	return nil
}

// RemoveEIPFromBandwidthPackage takes an EIP out of one; an EIP not in it
// (or gone) counts as removed.
func (c *Client) RemoveEIPFromBandwidthPackage(ctx context.Context, pkg, id string) error {
	req := vpc.CreateRemoveCommonBandwidthPackageIpRequest()
	req.BandwidthPackageId, req.IpInstanceId = pkg, id
	err := c.retry(ctx, backoff.Default, func(ctx context.Context) error {
		err := c.vpcCall(ctx, "RemoveCommonBandwidthPackageIp", releaseCall, func(cl *vpc.Client) error {
			_, err := cl.RemoveCommonBandwidthPackageIp(req)
			return err
		})
		if code := ErrorCode(err); code == CodeIPNotInCbwp || code == CodeEIPNotFound {
			return nil
		}
		return retryTaskConflict(err)
	})
	if err != nil {
		return fmt.Errorf("remove EIP %s from bandwidth package %s: %w", id, pkg, err)
	}
	return nil
}

// ErrEIPNotFound is DescribeEIP's answer for an EIP that does not exist.
var ErrEIPNotFound = errors.New("EIP not found")

// DescribeEIP reads one EIP; ErrEIPNotFound when it does not exist.
func (c *Client) DescribeEIP(ctx context.Context, id string) (EIP, error) {
	l, err := c.DescribeEIPs(ctx, EIPFilter{IDs: []string{id}})
	if err != nil {
		return EIP{}, err
	}
	if i := slices.IndexFunc(l, func(e EIP) bool { return e.ID == id }); i >= 0 {
		return l[i], nil
	}
	return EIP{}, fmt.Errorf("describe EIP %s: %w", id, ErrEIPNotFound)
}

// EIPFilter selects EIPs; empty fields match any.
type EIPFilter struct {
	IDs []string
	// ENIID selects the EIPs bound to an ENI.
	ENIID string
	Tags  map[string]string
}

// DescribeEIPs lists the EIPs f selects, every page.
func (c *Client) DescribeEIPs(ctx context.Context, f EIPFilter) ([]EIP, error) {
	var out []EIP
	for page := 1; ; page++ {
		req := vpc.CreateDescribeEipAddressesRequest()
		req.PageNumber, req.PageSize = requests.NewInteger(page), requests.NewInteger(100)
		if len(f.IDs) > 0 {
			req.AllocationId = strings.Join(f.IDs, ",")
		}
		if f.ENIID != "" {
			req.AssociatedInstanceType, req.AssociatedInstanceId = "NetworkInterface", f.ENIID
		}
		if len(f.Tags) > 0 {
			tags := make([]vpc.DescribeEipAddressesTag, 0, len(f.Tags))
			for _, k := range slices.Sorted(maps.Keys(f.Tags)) {
				tags = append(tags, vpc.DescribeEipAddressesTag{Key: k, Value: f.Tags[k]})
			}
			req.Tag = &tags
		}
		var resp *vpc.DescribeEipAddressesResponse
		err := c.retry(ctx, backoff.Default, func(ctx context.Context) error {
			return c.vpcCall(ctx, "DescribeEipAddresses", readCall, func(cl *vpc.Client) error {
				var err error
				resp, err = cl.DescribeEipAddresses(req)
				return err
			})
		})
		if err != nil {
			return nil, fmt.Errorf("describe EIPs: %w", err)
		}
		for _, a := range resp.EipAddresses.EipAddress {
			out = append(out, eipFromAPI(a))
		}
		if len(resp.EipAddresses.EipAddress) < 100 || len(out) >= resp.TotalCount {
			return out, nil
		}
	}
}

// WaitEIPStatus polls an EIP until it is in one of status.
func (c *Client) WaitEIPStatus(ctx context.Context, id string, status ...string) (EIP, error) {
	var out EIP
	err := c.backoff.Retry(ctx, backoff.WaitENIStatus, func(ctx context.Context) (bool, error) {
		e, err := c.DescribeEIP(ctx, id)
		if err != nil {
			return false, err
		}
		out = e
		if slices.Contains(status, e.Status) {
			return true, nil
		}
		return false, fmt.Errorf("EIP %s is %s, waiting for %v", id, e.Status, status)
	})
	if err != nil {
		return EIP{}, fmt.Errorf("wait for EIP %s: %w", id, err)
	}
	return out, nil
}

// WaitEIPUnbound polls an EIP until it no longer binds privateIP of
// instanceID: Available, bound elsewhere since, or gone. Until then the
// address cannot be unassigned.
func (c *Client) WaitEIPUnbound(ctx context.Context, id, instanceID string, privateIP netip.Addr) error {
	err := c.backoff.Retry(ctx, backoff.WaitENIStatus, func(ctx context.Context) (bool, error) {
		e, err := c.DescribeEIP(ctx, id)
		switch {
		case errors.Is(err, ErrEIPNotFound):
			return true, nil
		case err != nil:
			return false, err
		case e.Status == EIPAvailable || e.InstanceID != instanceID || (privateIP.IsValid() && e.PrivateIP != privateIP):
			return true, nil
		}
		return false, fmt.Errorf("EIP %s is %s on %s %s", id, e.Status, e.InstanceID, e.PrivateIP)
	})
	if err != nil {
		return fmt.Errorf("wait for EIP %s to be unbound: %w", id, err)
	}
	return nil
}

// unbindStaleEIPs answers a refusal (cause) to unassign ips from an ENI,
// or to delete it (ips nil): EIPs still bound there are unbound, and the
// refused call is retried. The callers release only addresses and ENIs no
// pod holds, so such a binding is stale (a pod's record lost with its
// EIP): the EIP itself stays, for its owner (GC releases the daemon's own).
// Without such an EIP the refusal stands.
func (c *Client) unbindStaleEIPs(ctx context.Context, eniID string, ips []netip.Addr, cause error) error {
	l, err := c.DescribeEIPs(ctx, EIPFilter{ENIID: eniID})
	if err != nil {
		return errors.Join(cause, err)
	}
	n := 0
	for _, e := range l {
		if len(ips) > 0 && !slices.Contains(ips, e.PrivateIP) {
			continue
		}
		n++
		if err := c.UnassociateEIP(ctx, e.ID, eniID, e.PrivateIP); err != nil {
			return errors.Join(cause, err)
		}
		if err := c.WaitEIPUnbound(ctx, e.ID, eniID, e.PrivateIP); err != nil {
			return errors.Join(cause, err)
		}
	}
	if n == 0 {
		return cause
	}
	return errRetry{cause}
}

// retryTaskConflict marks VPC's TaskConflict (another task on the EIP)
// for a retry, as Terway retries every EIP call on it.
func retryTaskConflict(err error) error {
	if ErrorCode(err) == CodeTaskConflict {
		return errRetry{err}
	}
	return err
}
