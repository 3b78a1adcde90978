package ipam

import (
	"testing"
	"time"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
)

func TestOwnedBy(t *testing.T) {
	tags := map[string]string{"creator": "terway", "terway.alibabacloud.com/instance-id": node1, "terway.alibabacloud.com/cluster-id": "c1"}
	with := func(k, v string) map[string]string {
		out := map[string]string{"extra": "x"}
		for a, b := range tags {
			out[a] = b
		}
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name string
		e    cloud.ENI
		want bool
	}{
		{"ours", cloud.ENI{Type: "Secondary", InstanceID: node1, Tags: with("extra", "y")}, true},
		{"trunk", cloud.ENI{Type: "Trunk", InstanceID: node1, Tags: tags}, false},
		{"member", cloud.ENI{Type: "Member", InstanceID: node1, Tags: tags}, false},
		{"primary", cloud.ENI{Type: "Primary", InstanceID: node1, Tags: tags}, false},
		{"other instance tag", cloud.ENI{Type: "Secondary", InstanceID: node1, Tags: with("terway.alibabacloud.com/instance-id", "i-other")}, false},
		{"other creator", cloud.ENI{Type: "Secondary", InstanceID: node1, Tags: with("creator", "someone")}, false},
		{"other cluster", cloud.ENI{Type: "Secondary", InstanceID: node1, Tags: with("terway.alibabacloud.com/cluster-id", "c2")}, false},
		{"no cluster tag", cloud.ENI{Type: "Secondary", InstanceID: node1, Tags: with("terway.alibabacloud.com/cluster-id", "")}, false},
		{"untagged", cloud.ENI{Type: "Secondary", InstanceID: node1}, false},
		{"on another instance", cloud.ENI{Type: "Secondary", InstanceID: "i-other", Tags: tags}, false},
	} {
		if got := ownedBy(tc.e, node1, tags); got != tc.want {
			t.Errorf("%s: ownedBy = %v, want %v", tc.name, got, tc.want)
		}
	}
	if ownedBy(cloud.ENI{Type: "Secondary", InstanceID: node1}, node1, nil) {
		t.Error("no tags must own nothing")
	}
}

// stray creates and attaches an ENI of ours behind the pool's back.
func (e *env) stray(key string, secondaries int) string {
	e.t.Helper()
	en, err := e.node.API.CreateENI(ctxT(e.t), cloud.CreateENIRequest{IntentKey: key, VSwitchID: vsw1,
		SecurityGroups: []string{fakecloud.DefaultSecurityGroup}, Tags: e.cfg.Tags, SecondaryIPv4: secondaries})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.node.API.AttachENI(ctxT(e.t), en.ID, node1); err != nil {
		e.t.Fatal(err)
	}
	return en.ID
}

func (e *env) calls(action string) int64 {
	return e.cloud.CallCount(fakecloud.CallFilter{Action: action})
}

// TestSyncAdoptsStray: an ENI of ours attached to the node behind the
// pool's back (a rollback that failed) is adopted by the periodic sync,
// its addresses idle, without a restart.
func TestSyncAdoptsStray(t *testing.T) {
	e := newEnv(t, nil)
	e.cfg.SyncPeriod = 50 * time.Millisecond
	p, _ := e.start()
	id := e.stray("stray", 2)
	testwait.Until(t, waitLimit, "the stray adopted", func() bool { st := p.Stats(); return st.ENIs == 1 && st.Idle == 3 })
	creates := e.calls("CreateNetworkInterface")
	ip, err := p.Allocate(ctxT(t), "ns/pod")
	if err != nil || ip.ENIID != id {
		t.Fatalf("allocation after adoption: %+v %v, want an address of %s", ip, err, id)
	}
	if n := e.calls("CreateNetworkInterface") - creates; n != 0 {
		t.Fatalf("%d creations although an adopted address was idle", n)
	}
	if n := e.calls("DetachNetworkInterface"); n != 0 {
		t.Fatalf("%d detach calls", n)
	}
}

// TestSyncReleasesUnwantedStray: a stray the pool has no use for (its
// addresses would all be idle above MaxIdle) is detached and deleted.
func TestSyncReleasesUnwantedStray(t *testing.T) {
	e := newEnv(t, nil)
	e.cfg.SyncPeriod = 50 * time.Millisecond
	e.cfg.MaxIdle = 0
	p, _ := e.start()
	id := e.stray("stray", 2)
	testwait.Until(t, waitLimit, "the stray deleted", func() bool {
		for _, v := range e.cloud.ENIs() {
			if v.ID == id {
				return false
			}
		}
		return true
	})
	if st := p.Stats(); st.ENIs != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSyncSparesCreationInFlight holds the answer to the pool's own
// attach: its ENI is tagged, attached and unknown to the pool for many
// syncs, and the sync must leave it to the creation. The test runs the
// syncs itself (the pool's period is an hour), so each has finished when
// it is checked.
func TestSyncSparesCreationInFlight(t *testing.T) {
	e := newEnv(t, nil)
	p, _ := e.start()
	hold, done := e.allocateHeldAtAttach(p, "ns/pod", fakecloud.StepAfter)
	testwait.Until(t, waitLimit, "the held attach to complete in the cloud", func() bool {
		for _, v := range e.cloud.ENIs() {
			if v.Type == fakecloud.ENITypeSecondary && v.Status == fakecloud.ENIInUse {
				return true
			}
		}
		return false
	})
	// A sync that took the ENI for a stray would have marked it before it
	// returned, and adopted or released it since.
	noStray := func(when string) {
		t.Helper()
		p.sync(ctxT(t))
		p.mu.Lock()
		strays := len(p.strays)
		p.mu.Unlock()
		if strays != 0 {
			t.Fatalf("%s: the sync took the pool's own ENI for a stray", when)
		}
	}
	for range 3 {
		noStray("attach in flight")
		if st := p.Stats(); st.ENIs != 0 {
			t.Fatalf("the sync adopted the pool's own ENI in flight: %+v", st)
		}
	}
	e.cloud.RemoveFault(hold)
	if err := <-done; err != nil {
		t.Fatalf("allocation: %v", err)
	}
	noStray("creation done")
	if st := p.Stats(); st.ENIs != 1 {
		t.Fatalf("stats %+v, want the one ENI", st)
	}
	if n := e.calls("DetachNetworkInterface"); n != 0 {
		t.Fatalf("%d detach calls", n)
	}
}
