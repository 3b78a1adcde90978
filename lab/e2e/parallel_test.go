package e2e

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/terway-sim/terway/fakecloud"
)

// bigNode adds an ecs.g7.4xlarge instance (8 ENIs × 20 addresses) in
// vSwitch 1 and returns its index for env.node.
func (e *env) bigNode() string {
	e.t.Helper()
	inst, err := e.cloud.AddInstance(fakecloud.InstanceSpec{ID: "i-bp1labbig0000000001", Name: "node-big",
		InstanceType: "ecs.g7.4xlarge", VSwitchID: "vsw-bp1lab0000000000001",
		SecurityGroupIDs: []string{fakecloud.DefaultSecurityGroup}, RAMRole: fakecloud.DefaultRAMRole})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.cloud.WaitHypervisor(ctxT(e.t)); err != nil {
		e.t.Fatal(err)
	}
	return inst.ID
}

// TestParallelAddDel: 50 ADDs at once interleaved with DELs of every
// third pod, each in its own namespace: no address twice, every live pod
// reachable, nothing left of the deleted ones.
func TestParallelAddDel(t *testing.T) {
	e := newEnv(t)
	n := e.nodeFor(e.bigNode(), "node-big", nodeOpts{conf: map[string]any{"max_pool_size": 20}})
	const total = 50
	pods := make([]*pod, total)
	for i := range pods {
		pods[i] = n.newPod(fmt.Sprintf("par-%02d", i), nil)
	}
	errs := make([]error, total)
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = p.add("1.0.0"); errs[i] != nil || i%3 != 0 {
				return
			}
			errs[i] = p.del("1.0.0", true)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("pod %d: %v\n%s", i, err, n.pluginLog())
		}
	}
	seen := map[netip.Addr]string{}
	var live []*pod
	for i, p := range pods {
		if i%3 == 0 {
			continue
		}
		if other, dup := seen[p.ip]; dup {
			t.Fatalf("%s and %s both got %s", other, p.name, p.ip)
		}
		seen[p.ip] = p.name
		live = append(live, p)
	}
	to := live[0].serve()
	for _, p := range live[1:] {
		if err := p.dial(to, netip.Addr{}); err != nil {
			t.Fatalf("%s -> %s: %v", p.name, live[0].name, err)
		}
	}
	var gone []netip.Addr
	for i, p := range pods {
		if _, held := seen[p.ip]; i%3 == 0 && !held {
			gone = append(gone, p.ip)
		}
	}
	hs := n.hostState()
	if left := hs.podRelated(gone...); len(left) > 0 {
		t.Fatalf("state of deleted pods left: %v", left)
	}
	if got := len(hs.veths()); got != len(live) {
		t.Fatalf("%d host veths for %d live pods: %v", got, len(live), hs.veths())
	}
	if got := len(n.stateFiles()); got != len(live) {
		t.Fatalf("%d state files for %d live pods", got, len(live))
	}
	for _, p := range live {
		p.mustDel("1.0.0")
	}
	assertClean(t, n, append(gone, keys(seen)...)...)
}

func keys(m map[netip.Addr]string) []netip.Addr {
	var out []netip.Addr
	for k := range m {
		out = append(out, k)
	}
	return out
}
