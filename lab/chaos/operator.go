package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
)

// The SDK fills its endpoint map lazily and racily; filling it while the
// program initialises (as daemon/cloud does) keeps NewSDKOperator from
// racing with other constructors.
var _ = ecs.GetEndpointMap()

// OperatorOptions say how NewSDKOperator reaches the ECS API.
type OperatorOptions struct {
	// Endpoint is "http(s)://host[:port]" (fakecloud), a bare HTTPS host,
	// or "" for the SDK's endpoint resolution.
	Endpoint string
	Region   string
	// AccessKeyID and AccessKeySecret are the operator's AccessKey.
	AccessKeyID, AccessKeySecret string
	// Timeout bounds one call (0: 20s).
	Timeout time.Duration
	// PollEvery is how often DeleteENI looks whether its detach is done
	// (0: half a second).
	PollEvery time.Duration
}

// SDKOperator is an Operator through the Aliyun SDK: one call per action,
// no retries, as a person at the console would.
type SDKOperator struct {
	// mu serialises calls: the SDK's clients are not safe for concurrent
	// use.
	mu   sync.Mutex
	ecs  *ecs.Client
	poll time.Duration
}

// NewSDKOperator builds an operator's ECS client.
func NewSDKOperator(o OperatorOptions) (*SDKOperator, error) {
	scheme, host, err := splitEndpoint(o.Endpoint)
	if err != nil {
		return nil, err
	}
	cfg := sdk.NewConfig()
	cfg.Scheme, cfg.AutoRetry, cfg.UserAgent = scheme, false, "terway-sim-chaos-operator"
	cfg.Timeout = cmp.Or(o.Timeout, 20*time.Second)
	cl, err := ecs.NewClientWithOptions(o.Region, cfg, credentials.NewAccessKeyCredential(o.AccessKeyID, o.AccessKeySecret))
	if err != nil {
		return nil, fmt.Errorf("operator ECS client for %s: %w", o.Region, err)
	}
	cl.Domain = host
	return &SDKOperator{ecs: cl, poll: cmp.Or(o.PollEvery, 500*time.Millisecond)}, nil
}

// splitEndpoint reads "http(s)://host[:port]", a bare host (HTTPS) or ""
// (HTTPS, the SDK's endpoint resolution).
func splitEndpoint(s string) (scheme, host string, err error) {
	if !strings.Contains(s, "://") {
		return "HTTPS", s, nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", "", fmt.Errorf("ECS endpoint %q: want http(s)://host[:port] or a host", s)
	}
	return strings.ToUpper(u.Scheme), u.Host, nil
}

// call makes one SDK call under the mutex, unless ctx has ended.
func (o *SDKOperator) call(ctx context.Context, f func(*ecs.Client) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return f(o.ecs)
}

// DetachENI detaches an ENI from its instance (DetachNetworkInterface).
func (o *SDKOperator) DetachENI(ctx context.Context, eniID, instanceID string) error {
	req := ecs.CreateDetachNetworkInterfaceRequest()
	req.NetworkInterfaceId, req.InstanceId = eniID, instanceID
	err := o.call(ctx, func(c *ecs.Client) error { _, err := c.DetachNetworkInterface(req); return err })
	if err != nil {
		return fmt.Errorf("operator: detach %s from %s: %w", eniID, instanceID, err)
	}
	return nil
}

// DeleteENI deletes an ENI as the console does: an attached one is
// detached first, and deleted once it is Available.
func (o *SDKOperator) DeleteENI(ctx context.Context, eniID string) error {
	status, instance, err := o.describe(ctx, eniID)
	if err != nil {
		return err
	}
	if instance != "" && status != "Available" {
		if err := o.DetachENI(ctx, eniID, instance); err != nil {
			return err
		}
		if err := o.waitAvailable(ctx, eniID); err != nil {
			return err
		}
	}
	req := ecs.CreateDeleteNetworkInterfaceRequest()
	req.NetworkInterfaceId = eniID
	err = o.call(ctx, func(c *ecs.Client) error { _, err := c.DeleteNetworkInterface(req); return err })
	if err != nil {
		return fmt.Errorf("operator: delete %s: %w", eniID, err)
	}
	return nil
}

// describe reads an ENI's status and the instance it is attached to.
func (o *SDKOperator) describe(ctx context.Context, eniID string) (status, instance string, err error) {
	req := ecs.CreateDescribeNetworkInterfaceAttributeRequest()
	req.NetworkInterfaceId = eniID
	err = o.call(ctx, func(c *ecs.Client) error {
		r, err := c.DescribeNetworkInterfaceAttribute(req)
		if err == nil {
			status, instance = r.Status, r.InstanceId
		}
		return err
	})
	if err != nil {
		return "", "", fmt.Errorf("operator: describe %s: %w", eniID, err)
	}
	return status, instance, nil
}

// waitAvailable waits until a detaching ENI is Available.
func (o *SDKOperator) waitAvailable(ctx context.Context, eniID string) error {
	for {
		status, _, err := o.describe(ctx, eniID)
		if err != nil || status == "Available" {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("operator: %s still %s: %w", eniID, status, ctx.Err())
		case <-time.After(o.poll):
		}
	}
}

// UnassignIPs unassigns secondary IPv4 addresses of an ENI
// (UnassignPrivateIpAddresses).
func (o *SDKOperator) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error {
	if len(ips) == 0 {
		return errors.New("operator: no address to unassign")
	}
	addrs := make([]string, len(ips))
	for i, ip := range ips {
		addrs[i] = ip.String()
	}
	req := ecs.CreateUnassignPrivateIpAddressesRequest()
	req.NetworkInterfaceId, req.PrivateIpAddress = eniID, &addrs
	err := o.call(ctx, func(c *ecs.Client) error { _, err := c.UnassignPrivateIpAddresses(req); return err })
	if err != nil {
		return fmt.Errorf("operator: unassign %v from %s: %w", ips, eniID, err)
	}
	return nil
}
