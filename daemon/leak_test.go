package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

// ourTags are the ownership tags the lab's daemon puts on its ENIs.
var ourTags = map[string]string{"creator": "terway", "terway.alibabacloud.com/instance-id": node1,
	"terway.alibabacloud.com/cluster-id": "c-test"}

func ownedByLabDaemon(e fakecloud.ENIView) bool {
	if e.Type != fakecloud.ENITypeSecondary {
		return false
	}
	for k, v := range ourTags {
		if e.Tags[k] != v {
			return false
		}
	}
	return true
}

// unknownENIs lists the ENIs of the lab's daemon the cloud has that its
// pool does not know ("<id> <status>").
func unknownENIs(l *lab, d *Daemon) []string {
	known := map[string]bool{}
	for _, a := range d.pool.Addresses() {
		known[a.IP.ENIID] = true
	}
	var out []string
	for _, e := range l.cloud.ENIs() {
		if ownedByLabDaemon(e) && !known[e.ID] && e.Status != fakecloud.ENIDeleting {
			out = append(out, e.ID+" "+e.Status+" on "+e.InstanceID)
		}
	}
	sort.Strings(out)
	return out
}

// allocUntil allocates an address for pod, retrying refusals (as kubelet
// retries a failed sandbox) until the deadline.
func allocUntil(c rpc.TerwayBackendClient, ns, name string, deadline time.Time) (*rpc.AllocIPReply, error) {
	var r *rpc.AllocIPReply
	var err error
	_ = poll(100*time.Millisecond, time.Until(deadline), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err = c.AllocIP(ctx, &rpc.AllocIPRequest{K8SPodNamespace: ns, K8SPodName: name, K8SPodInfraContainerId: "c-" + name,
			Netns: "/var/run/netns/c-" + name, IfName: "eth0"})
		return err == nil
	})
	return r, err
}

// TestLostAttachAnswerLeaksNoENI reproduces issue 20's "ENI leak until
// restart after a lost attach answer": AttachNetworkInterface's answer is
// lost once, attaching takes 100 s of world time, and the
// DescribeNetworkInterfaceAttribute that would confirm it fails. The
// creation fails and its rollback cannot detach an ENI still Attaching.
// Once the faults clear, the pool's periodic sync must have adopted (or
// released) every ENI of ours within a few periods, and the node must
// reach its full capacity — 45 pods on an ecs.g7.xlarge, 3 exclusive
// ENIs in ENIOnly mode — without a restart.
func TestLostAttachAnswerLeaksNoENI(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     mode.Mode
		burst    int // pods asking while the faults are on
		capacity int
	}{
		{"ENIMultiIP", mode.ENIMultiIP, 30, 45},
		{"ENIOnly", mode.ENIOnly, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t, func(s *fakecloud.Spec, o *fakecloud.Options) {
				s.Settings.AttachDelay = fakecloud.Duration(100 * time.Second) // 1s at the lab's time scale 0.01
			})
			l.conf = strings.Replace(l.conf, `"pool_check_period":"1h"`, `"pool_check_period":"200ms"`, 1)
			l.conf = strings.Replace(l.conf, `"gc_period":"1h"`, `"gc_period":"500ms"`, 1)
			if tc.mode == mode.ENIOnly {
				l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"max_pool_size":0`, 1)
			}
			// Failed growth pauses long enough for the burst's creations to
			// be seen ending while the faults are on.
			l.conf = strings.Replace(l.conf, `"pool_growth":{"Duration":"20ms","Cap":"200ms"}`, `"pool_growth":{"Duration":"500ms","Cap":"2s"}`, 1)
			// A status poll that outlasts the slow attach when nothing fails.
			l.conf = strings.Replace(l.conf, `"wait_eni_status":{"Duration":"5ms","Factor":1.2,"Steps":12}`,
				`"wait_eni_status":{"Duration":"50ms","Factor":1.5,"Steps":10,"Cap":"400ms"}`, 1)
			for i := 0; i < tc.capacity; i++ {
				l.pod("leak", fmt.Sprintf("p%02d", i), nil)
			}
			d, c, _ := l.daemon(func(o *Options) { o.Mode = tc.mode })
			for _, f := range []fakecloud.Fault{
				{Name: "lost-attach", Kind: fakecloud.FaultLostResponse, Action: "AttachNetworkInterface", Count: 1},
				{Name: "describe-fails", Kind: fakecloud.FaultError, Action: "DescribeNetworkInterfaceAttribute"},
			} {
				if _, err := l.cloud.AddFault(f); err != nil {
					t.Fatal(err)
				}
			}
			// A burst while the faults are on: no creation can be confirmed.
			var wg sync.WaitGroup
			var mu sync.Mutex
			got := map[string]string{}
			for i := 0; i < tc.burst; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					name := fmt.Sprintf("p%02d", i)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					r, err := c.AllocIP(ctx, &rpc.AllocIPRequest{K8SPodNamespace: "leak", K8SPodName: name, K8SPodInfraContainerId: "c-" + name,
						Netns: "/var/run/netns/c-" + name, IfName: "eth0"})
					if err == nil {
						mu.Lock()
						got[name] = podIP(r)
						mu.Unlock()
					}
				}()
			}
			// Wait until the creations the burst started have failed, then
			// clear the faults.
			testwait.Until(t, waitLimit, "the faulted creations to end", func() bool {
				return l.cloud.CallCount(fakecloud.CallFilter{Action: "CreateNetworkInterface", Outcome: fakecloud.OutcomeSuccess}) >= int64(min(tc.burst, 2)) &&
					d.pool.Stats().Inflight == 0 && l.cloud.CallCount(fakecloud.CallFilter{Action: "DetachNetworkInterface"}) > 0
			})
			var during []string
			for _, e := range l.cloud.ENIs() {
				if ownedByLabDaemon(e) {
					during = append(during, e.ID+" "+e.Status)
				}
			}
			start := time.Now()
			t.Logf("our ENIs when the faults clear: %v", during)
			l.cloud.ClearFaults()
			// Within a few sync periods every ENI of ours is known to the pool.
			var unknown []string
			if poll(50*time.Millisecond, 10*time.Second, func() bool { unknown = unknownENIs(l, d); return len(unknown) == 0 }) != nil {
				t.Errorf("ENIs of ours unknown to the pool 10s after the faults cleared: %v", unknown)
			}
			t.Logf("every ENI of ours known %v after the faults cleared", time.Since(start).Round(time.Millisecond))
			wg.Wait()
			// The node reaches its full capacity.
			end := time.Now().Add(45 * time.Second)
			var failed []string
			for i := 0; i < tc.capacity; i++ {
				name := fmt.Sprintf("p%02d", i)
				if _, ok := got[name]; ok {
					continue
				}
				r, err := allocUntil(c, "leak", name, end)
				if err != nil {
					failed = append(failed, fmt.Sprintf("%s: %v", name, err))
					continue
				}
				got[name] = podIP(r)
			}
			if len(failed) > 0 {
				t.Fatalf("%d of %d pods got an address; %d failed, first: %s; ENIs of ours unknown to the pool: %v",
					len(got), tc.capacity, len(failed), failed[0], unknownENIs(l, d))
			}
			seen := map[string]string{}
			for name, ip := range got {
				if prev, dup := seen[ip]; dup {
					t.Fatalf("%s handed to %s and %s", ip, prev, name)
				}
				seen[ip] = name
			}
			t.Logf("full capacity %v after the faults cleared", time.Since(start).Round(time.Millisecond))
			if u := unknownENIs(l, d); len(u) > 0 {
				t.Fatalf("at full capacity, ENIs of ours unknown to the pool: %v", u)
			}
		})
	}
}

// ecsClient is an ECS client of the lab's cloud, for what someone else
// does behind the daemon's back. The SDK's constructors race with the
// daemon's: make it before the daemon starts.
func (l *lab) ecsClient() *ecs.Client {
	l.t.Helper()
	cfg := sdk.NewConfig()
	cfg.Scheme = "HTTP"
	ec, err := ecs.NewClientWithOptions(fakecloud.DefaultRegion, cfg, credentials.NewAccessKeyCredential(testAK, testSK))
	if err != nil {
		l.t.Fatal(err)
	}
	ec.Domain = strings.TrimPrefix(l.apiURL, "http://")
	return ec
}

// createENI creates, through ec, an ENI of type typ ("Secondary" when
// empty) in the lab's vSwitch with tags and secondaries secondary
// addresses, and returns its ID; what names it in a failure.
func (l *lab) createENI(ec *ecs.Client, what, typ string, tags map[string]string, secondaries int) string {
	l.t.Helper()
	req := ecs.CreateCreateNetworkInterfaceRequest()
	req.VSwitchId, req.InstanceType = "vsw-bp1lab0000000000001", typ
	req.SecurityGroupIds = &[]string{fakecloud.DefaultSecurityGroup}
	if secondaries > 0 {
		req.SecondaryPrivateIpAddressCount = requests.NewInteger(secondaries)
	}
	var ts []ecs.CreateNetworkInterfaceTag
	for k, v := range tags {
		ts = append(ts, ecs.CreateNetworkInterfaceTag{Key: k, Value: v})
	}
	req.Tag = &ts
	resp, err := ec.CreateNetworkInterface(req)
	if err != nil {
		l.t.Fatalf("create %s: %v", what, err)
	}
	return resp.NetworkInterfaceId
}

// afterSyncsAndGC lets the daemon's pool sync the node's ENIs — three
// rounds, two of them begun after the call, so that whatever a sync does
// with an ENI has been done or started a period before — then runs a GC
// and waits for two more rounds, one begun after it.
func afterSyncsAndGC(t *testing.T, d *Daemon) {
	t.Helper()
	syncRounds(t, d, 3)
	if err := d.GC(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	syncRounds(t, d, 2)
}

// TestForeignENIsSurviveSync puts ENIs the daemon must never touch on its
// node and next to it — a Trunk ENI with our tags, secondary ENIs tagged
// for another instance, another cluster or by another creator, attached
// and Available — and checks that several pool syncs and a GC neither
// adopt nor detach nor delete any of them; then restarts the daemon, whose
// restore meets them attached, and checks again.
func TestForeignENIsSurviveSync(t *testing.T) {
	l := newLab(t)
	l.conf = strings.Replace(l.conf, `"pool_check_period":"1h"`, `"pool_check_period":"100ms"`, 1)
	with := func(k, v string) map[string]string {
		out := map[string]string{}
		for a, b := range ourTags {
			out[a] = b
		}
		out[k] = v
		return out
	}
	type foreign struct {
		what   string
		typ    string
		tags   map[string]string
		attach bool
		id     string
	}
	enis := []*foreign{
		{what: "trunk with our tags, attached", typ: "Trunk", tags: ourTags, attach: true},
		{what: "tagged for another instance, attached", typ: "Secondary", tags: with("terway.alibabacloud.com/instance-id", "i-bp1lab0000000000002"), attach: true},
		{what: "tagged for another cluster, attached", typ: "Secondary", tags: with("terway.alibabacloud.com/cluster-id", "c-other"), attach: true},
		{what: "trunk with our tags, Available", typ: "Trunk", tags: ourTags},
		{what: "another creator, Available", typ: "Secondary", tags: with("creator", "someone-else")},
		{what: "untagged, Available", typ: "Secondary"},
	}
	ec := l.ecsClient()
	for _, f := range enis {
		f.id = l.createENI(ec, f.what, f.typ, f.tags, 0)
	}
	d, _, stop := l.daemon(nil)
	// Attached after the daemon started: it is the periodic sync that
	// meets them, then the restore of the restart.
	for _, f := range enis {
		if !f.attach {
			continue
		}
		if _, err := d.node.API.WaitENIStatus(ctxT(t), f.id, cloud.StatusAvailable); err != nil {
			t.Fatal(err)
		}
		if err := d.node.API.AttachENI(ctxT(t), f.id, node1); err != nil {
			t.Fatalf("attach %s: %v", f.what, err)
		}
	}
	for _, f := range enis {
		if f.attach {
			if _, err := d.node.API.WaitENIStatus(ctxT(t), f.id, cloud.StatusInUse); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(d *Daemon, when string) {
		t.Helper()
		afterSyncsAndGC(t, d)
		known := map[string]bool{}
		for _, a := range d.pool.Addresses() {
			known[a.IP.ENIID] = true
		}
		views := map[string]fakecloud.ENIView{}
		for _, e := range l.cloud.ENIs() {
			views[e.ID] = e
		}
		for _, f := range enis {
			v, ok := views[f.id]
			switch {
			case !ok:
				t.Errorf("%s: %s (%s) was deleted", when, f.what, f.id)
			case known[f.id]:
				t.Errorf("%s: %s (%s) was adopted by the pool", when, f.what, f.id)
			case f.attach && (v.Status != fakecloud.ENIInUse || v.InstanceID != node1):
				t.Errorf("%s: %s (%s) is %s on %q, want InUse on %s", when, f.what, f.id, v.Status, v.InstanceID, node1)
			case !f.attach && v.Status != fakecloud.ENIAvailable:
				t.Errorf("%s: %s (%s) is %s, want Available", when, f.what, f.id, v.Status)
			}
		}
	}
	check(d, "first run")
	stop()
	d, _, _ = l.daemon(nil)
	check(d, "after a restart")
	if n := l.cloud.CallCount(fakecloud.CallFilter{Action: "DetachNetworkInterface"}) +
		l.cloud.CallCount(fakecloud.CallFilter{Action: "DeleteNetworkInterface"}); n != 0 {
		t.Errorf("%d detach/delete calls on a node whose only ENIs are foreign", n)
	}
}
