package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

// syncRounds waits until the daemon's pool has completed n more sync
// rounds (pool_check_period) than when called: the first may have begun
// before the call, the others began after it.
func syncRounds(t testing.TB, d *Daemon, n int) {
	t.Helper()
	from := d.pool.Stats().Syncs
	testwait.Until(t, waitLimit, fmt.Sprintf("%d sync rounds of the pool", n), func() bool { return d.pool.Stats().Syncs >= from+n })
}

// TestPoolWarmUpShrinkAndIdleReclaim runs the pool's whole cycle through
// the daemon: warm-up to min_pool_size with no pod, growth for a burst,
// shrink to max_pool_size when the pods go, and — with idle reclaim on —
// back to min_pool_size after a quiet period. The cloud agrees at each
// step, and the pool stays where it settled through its sync rounds.
func TestPoolWarmUpShrinkAndIdleReclaim(t *testing.T) {
	for _, reclaim := range []bool{false, true} {
		t.Run(fmt.Sprintf("idle_reclaim=%v", reclaim), func(t *testing.T) {
			l := newLab(t)
			extra := `"max_pool_size":6,"min_pool_size":3`
			if reclaim {
				extra += `,"idle_ip_reclaim_after":"300ms","idle_ip_reclaim_interval":"100ms","idle_ip_reclaim_batch_size":2`
			}
			l.conf = strings.Replace(l.conf, `"max_pool_size":5,"min_pool_size":0`, extra, 1)
			l.conf = strings.Replace(l.conf, `"pool_check_period":"1h"`, `"pool_check_period":"100ms"`, 1)
			for i := 0; i < 14; i++ {
				l.pod("w", fmt.Sprintf("p%d", i), nil)
			}
			d, c, _ := l.daemon(nil)
			agrees := func() bool { return len(l.cloudView()) == d.pool.Stats().Total }
			testwait.Until(t, waitLimit, "warm-up to 3 idle", func() bool {
				st := d.pool.Stats()
				return st.Idle >= 3 && agrees()
			})
			if st := d.pool.Stats(); st.InUse != 0 || st.Idle > 6 {
				t.Fatalf("after warm-up: %+v", st)
			}
			for i := 0; i < 14; i++ {
				allocOK(t, c, "w", fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i))
			}
			if st := d.pool.Stats(); st.InUse != 14 {
				t.Fatalf("after 14 pods: %+v", st)
			}
			for i := 0; i < 14; i++ {
				if _, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: "w", K8SPodName: fmt.Sprintf("p%d", i),
					K8SPodInfraContainerId: fmt.Sprintf("c%d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			want := 6
			if reclaim {
				want = 3
			}
			testwait.Until(t, waitLimit, fmt.Sprintf("shrink to %d idle", want), func() bool {
				st := d.pool.Stats()
				return st.InUse == 0 && st.Idle == want && agrees()
			})
			// And it stays there: no flapping below min or above max. Every
			// sync round plans (grows, shrinks, reclaims idle addresses):
			// two begun after the pool settled leave it where it was.
			syncRounds(t, d, 3)
			if st := d.pool.Stats(); st.Idle != want || !agrees() {
				t.Fatalf("pool moved after settling: %+v, cloud %d", st, len(l.cloudView()))
			}
		})
	}
}

// TestVSwitchExhaustionAndRecovery dries out the node's vSwitch: pods
// beyond its addresses fail cleanly, the node condition says so, and when
// someone else gives addresses back the daemon recovers by itself, without
// a restart.
func TestVSwitchExhaustionAndRecovery(t *testing.T) {
	squatter := "eni-bp1squatter000000001"
	var taken []string
	for i := 2; i <= 11; i++ {
		taken = append(taken, fmt.Sprintf("192.168.0.%d", i))
	}
	l := newLab(t, func(s *fakecloud.Spec, _ *fakecloud.Options) {
		s.VSwitches[0].CIDR = "192.168.0.0/27" // 28 usable: eth0, the squatter's 11, 16 left
		s.ENIs = []fakecloud.ENISpec{{ID: squatter, VSwitchID: s.VSwitches[0].ID, SecurityGroupIDs: []string{fakecloud.DefaultSecurityGroup},
			SecondaryIPs: taken}}
	})
	l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"max_pool_size":5,"vswitch_selection_policy":"ordered"`, 1)
	for i := 0; i < 20; i++ {
		l.pod("x", fmt.Sprintf("p%d", i), nil)
	}
	d, c, _ := l.daemon(nil)
	got, failed := map[string]string{}, 0
	for i := 0; i < 20; i++ {
		r, err := alloc(t, c, "x", fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i))
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("p%d on a dry vSwitch: %v", i, err)
			}
			failed++
			continue
		}
		if prev, dup := got[podIP(r)]; dup {
			t.Fatalf("%s handed to %s and p%d", podIP(r), prev, i)
		}
		got[podIP(r)] = fmt.Sprintf("p%d", i)
	}
	if len(got) != 16 || failed != 4 {
		t.Fatalf("%d allocated, %d failed; want 16 and 4", len(got), failed)
	}
	// The supply loop publishes the change by itself, within seconds.
	testwait.Until(t, waitLimit, "SufficientIP False on a dry vSwitch", func() bool {
		return sufficientIP(t, l).Status == corev1.ConditionFalse
	})
	// Someone else releases addresses in the vSwitch.
	if err := d.node.API.UnassignIPv4(ctxT(t), squatter, []netip.Addr{netip.MustParseAddr(taken[0]), netip.MustParseAddr(taken[1]),
		netip.MustParseAddr(taken[2])}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, waitLimit, "allocation after addresses came back", func() bool {
		_, err := alloc(t, c, "x", "p16", "c16")
		return err == nil
	})
	testwait.Until(t, waitLimit, "SufficientIP True after recovery", func() bool {
		return sufficientIP(t, l).Status == corev1.ConditionTrue
	})
}

func sufficientIP(t *testing.T, l *lab) corev1.NodeCondition {
	t.Helper()
	n, err := l.kube.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == "SufficientIP" {
			return c
		}
	}
	t.Fatalf("no SufficientIP condition in %+v", n.Status.Conditions)
	return corev1.NodeCondition{}
}

// TestTerwayDBRefusedThenImported replaces a Terway daemon: its store
// is refused with a message saying what to do, left untouched, and with
// the import on, the pod Terway gave an address keeps it and nobody else
// gets it.
func TestTerwayDBRefusedThenImported(t *testing.T) {
	l := newLab(t)
	l.pod("default", "old", nil)
	d, c, stop := l.daemon(nil)
	r := allocOK(t, c, "default", "old", "c-old")
	held, _ := d.holds("default/old")
	stop()
	// Rewrite the store as Terway would have written it.
	path := l.daemonConfig().StorePath
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(map[string]any{
		"Resources": []map[string]any{{"type": "eniIp", "id": held.ip.MAC + "." + podIP(r), "eni_id": held.ip.ENIID,
			"eni_mac": held.ip.MAC, "ipv4": podIP(r)}},
		"PodInfo": map[string]any{"Name": "old", "Namespace": "default", "PodNetworkType": "ENIMultiIP", "PodUID": "default-old"},
		"NetNs":   "/var/run/netns/c-old", "ContainerID": "c-old",
	})
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("relation"))
		if err != nil {
			return err
		}
		return b.Put([]byte("default/old"), rec)
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, _ := os.ReadFile(path)

	_, err = New(ctxT(t), Options{Mode: mode.ENIMultiIP, Config: l.daemonConfig(), NodeName: nodeName, Kube: clientset.Wrap(l.kube), StoreNoSync: true})
	if err == nil || !strings.Contains(err.Error(), "written by Terway") || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("Terway DB without import: %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("a refused Terway DB was modified")
	}
	d2, c2, _ := l.daemon(func(o *Options) { o.ImportTerwayDB = true })
	if h, ok := d2.holds("default/old"); !ok || h.ip.IPv4.String() != podIP(r) {
		t.Fatalf("imported pod holds %v (%v), want %s", h.ip.IPv4, ok, podIP(r))
	}
	if a, err := d2.store.Get("default", "old"); err != nil || a.ContainerID != "c-old" || a.IPType != store.IPTypeENIMultiIP {
		t.Fatalf("imported record %+v %v", a, err)
	}
	for i := 0; i < 8; i++ {
		l.pod("default", fmt.Sprintf("n%d", i), nil)
		n, err := alloc(t, c2, "default", fmt.Sprintf("n%d", i), fmt.Sprintf("cn%d", i))
		if err != nil || podIP(n) == podIP(r) {
			t.Fatalf("new pod n%d got %v (%v) while the imported pod holds %s", i, n, err, podIP(r))
		}
	}
	// GC keeps the imported pod: it is alive.
	if err := d2.GC(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok := d2.holds("default/old"); !ok {
		t.Fatal("GC released the imported pod's address")
	}
}
