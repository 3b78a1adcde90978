package fakecloud_test

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/fakecloud"
)

// TestConcurrentAllocationNoDuplicates runs 60 clients at once, each
// growing and shrinking its own ENI in one shared vSwitch, then checks
// that no address was handed out twice, that every ENI holds exactly what
// its client was told, that the vSwitch's free count is exact, and that
// the call accounting matches what the clients saw.
func TestConcurrentAllocationNoDuplicates(t *testing.T) {
	const workers, rounds = 60, 15
	e := newEnv(t, withSpec(func(s *fakecloud.Spec) { s.VSwitches[0].CIDR = "192.168.0.0/22" }))
	var calls sync.Map // action -> *atomic.Int64 of successes seen by clients
	count := func(action string) {
		v, _ := calls.LoadOrStore(action, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	type result struct {
		eni string
		ips map[string]bool
	}
	results := make([]result, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.ecs()
			req := ecs.CreateCreateNetworkInterfaceRequest()
			req.VSwitchId, req.SecurityGroupId = vsw1, sg
			req.SecondaryPrivateIpAddressCount = requests.NewInteger(2)
			resp, err := c.CreateNetworkInterface(req)
			if err != nil {
				errs <- fmt.Errorf("worker %d create: %w", w, err)
				return
			}
			count("CreateNetworkInterface")
			r := result{eni: resp.NetworkInterfaceId, ips: map[string]bool{}}
			for _, s := range resp.PrivateIpSets.PrivateIpSet[1:] {
				r.ips[s.PrivateIpAddress] = true
			}
			for i := 0; i < rounds; i++ {
				if len(r.ips) < 8 {
					a, err := assignIPs(c, r.eni, 2)
					if err != nil {
						errs <- fmt.Errorf("worker %d assign: %w", w, err)
						return
					}
					count("AssignPrivateIpAddresses")
					for _, ip := range a.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress {
						r.ips[ip] = true
					}
					continue
				}
				var drop []string
				for ip := range r.ips {
					if len(drop) == 3 {
						break
					}
					drop = append(drop, ip)
				}
				if _, err := unassignIPs(c, r.eni, drop...); err != nil {
					errs <- fmt.Errorf("worker %d unassign: %w", w, err)
					return
				}
				count("UnassignPrivateIpAddresses")
				for _, ip := range drop {
					delete(r.ips, ip)
				}
			}
			results[w] = r
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Ground truth from the API, through a fresh client.
	c := e.ecs()
	owner := map[string]string{}
	total := 0
	token := ""
	for {
		r := ecs.CreateDescribeNetworkInterfacesRequest()
		r.VSwitchId, r.MaxResults, r.NextToken = vsw1, requests.NewInteger(50), token
		resp := try(c.DescribeNetworkInterfaces(r)).must(t)
		for _, n := range resp.NetworkInterfaceSets.NetworkInterfaceSet {
			for _, s := range n.PrivateIpSets.PrivateIpSet {
				if prev, dup := owner[s.PrivateIpAddress]; dup {
					t.Fatalf("address %s on %s and %s", s.PrivateIpAddress, prev, n.NetworkInterfaceId)
				}
				if !netip.MustParsePrefix("192.168.0.0/22").Contains(netip.MustParseAddr(s.PrivateIpAddress)) {
					t.Fatalf("address %s outside the vSwitch", s.PrivateIpAddress)
				}
				owner[s.PrivateIpAddress] = n.NetworkInterfaceId
				total++
			}
		}
		if token = resp.NextToken; token == "" {
			break
		}
	}
	for w, r := range results {
		for ip := range r.ips {
			if owner[ip] != r.eni {
				t.Fatalf("worker %d was told %s is on %s, the cloud says %q", w, ip, r.eni, owner[ip])
			}
		}
		v, _ := e.cloud.ENI(r.eni)
		if len(v.IPv4) != len(r.ips) {
			t.Fatalf("worker %d: ENI has %d secondaries, client holds %d", w, len(v.IPv4), len(r.ips))
		}
	}
	if want := 1024 - 4 - total; e.cloud.VSwitches()[0].Available != want {
		t.Fatalf("vSwitch free count %d, want %d (%d addresses in use)", e.cloud.VSwitches()[0].Available, want, total)
	}
	calls.Range(func(k, v any) bool {
		got := e.cloud.CallCount(fakecloud.CallFilter{Action: k.(string), Outcome: fakecloud.OutcomeSuccess})
		if want := v.(*atomic.Int64).Load(); got != want {
			t.Errorf("%s: accounting says %d successes, clients saw %d", k, got, want)
		}
		return true
	})
	if n := e.cloud.CallCount(fakecloud.CallFilter{Outcome: "Operation.Conflict"}); n != 0 {
		t.Fatalf("%d conflicts between workers that share no ENI", n)
	}
}
