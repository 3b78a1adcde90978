package fabric

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
)

// vpcClient is the real SDK's VPC client on the lab's API server.
func (l *lab) vpcClient() *vpc.Client {
	l.t.Helper()
	cfg := sdk.NewConfig()
	cfg.Scheme = "HTTP"
	c, err := vpc.NewClientWithOptions(fakecloud.DefaultRegion, cfg, credentials.NewAccessKeyCredential(testAK, testSecret))
	if err != nil {
		l.t.Fatal(err)
	}
	u, err := url.Parse(l.apiURL)
	if err != nil {
		l.t.Fatal(err)
	}
	c.Domain = u.Host
	return c
}

// eipStatus waits for an EIP's status and lets the fabric catch up.
func (l *lab) eipStatus(c *vpc.Client, id, want string) {
	l.t.Helper()
	testwait.For(l.t, 20*time.Second, id+" "+want, func() error {
		r := vpc.CreateDescribeEipAddressesRequest()
		r.AllocationId = id
		resp, err := c.DescribeEipAddresses(r)
		if err != nil {
			return err
		}
		if len(resp.EipAddresses.EipAddress) != 1 || resp.EipAddresses.EipAddress[0].Status != want {
			return fmt.Errorf("not %s yet: %+v", want, resp.EipAddresses.EipAddress)
		}
		return nil
	})
	l.settle()
}

// The NAT gateway: an address without an EIP has no path to the internet
// nor from it; with one it is reached at the EIP and leaves with the EIP
// as source; once the EIP is unassociated both paths are gone again.
func TestInternetThroughEIP(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	if _, err := os.Stat(l.f.InternetNetNSPath()); err != nil {
		t.Fatalf("internet namespace: %v", err)
	}
	n := l.node(node1)
	e := l.attachENI(node1, vsw1, 1, 0)
	pod := e.IPv4[0]
	wireENI(t, n, e.eth, pod, e.view.Gateway)
	inet := internetNS{l.f.InternetNetNSPath()}
	public := listen(t, inet, "tcp4", netip.AddrPortFrom(InternetAddr, 80).String())
	inside := listen(t, n, "tcp4", netip.AddrPortFrom(pod, 8080).String())
	mustNotReach(t, n, pod, netip.AddrPortFrom(InternetAddr, 80))

	c := l.vpcClient()
	alloc, err := c.AllocateEipAddress(vpc.CreateAllocateEipAddressRequest())
	if err != nil {
		t.Fatal(err)
	}
	eip := netip.MustParseAddr(alloc.EipAddress)
	mustNotReach(t, inet, InternetAddr, netip.AddrPortFrom(eip, 8080))
	as := vpc.CreateAssociateEipAddressRequest()
	as.AllocationId, as.InstanceType, as.InstanceId, as.PrivateIpAddress = alloc.AllocationId, "NetworkInterface", e.ID, pod.String()
	if _, err := c.AssociateEipAddress(as); err != nil {
		t.Fatal(err)
	}
	l.eipStatus(c, alloc.AllocationId, "InUse")

	if err := dial(n, pod, netip.AddrPortFrom(InternetAddr, 80), 10*time.Second); err != nil {
		t.Fatalf("pod %s to the internet with EIP %s: %v", pod, eip, err)
	}
	if !public.sawPeer(eip) {
		t.Fatalf("the internet saw %v, want the EIP %s as source", public.peers, eip)
	}
	mustReach(t, inet, InternetAddr, inside, netip.AddrPortFrom(eip, 8080))

	un := vpc.CreateUnassociateEipAddressRequest()
	un.AllocationId, un.InstanceType, un.InstanceId = alloc.AllocationId, "NetworkInterface", e.ID
	if _, err := c.UnassociateEipAddress(un); err != nil {
		t.Fatal(err)
	}
	l.eipStatus(c, alloc.AllocationId, "Available")
	mustNotReach(t, inet, InternetAddr, netip.AddrPortFrom(eip, 8080))
	mustNotReach(t, n, pod, netip.AddrPortFrom(InternetAddr, 80))
	if err := l.cloud.WaitHypervisor(context.Background()); err != nil {
		t.Fatal(err)
	}
}
