package daemon

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

// TestENITagFilter runs the daemon with eni_tag_filter {"team": "net"}
// next to ENIs that carry every ownership tag of the lab's daemon but not
// the filter's: one attached before the daemon starts (the restore meets
// it), one attached after (the pool's sync meets it), one Available (the
// orphan sweeps meet it). Across a start, syncs, GC and a restart they
// stay as they were — attached with the same addresses, or Available —
// and the pool never holds them. An Available ENI of ours that does carry
// the filter is still swept, and the ENIs the daemon creates carry the
// filter's tags with its ownership tags and are managed: restored after
// the restart with the pods' addresses on them. In ENIOnly mode the two
// attached ENIs leave the ecs.g7.xlarge (4 ENIs) one slot for the daemon:
// a second exclusive pod is refused, and neither of them is taken for it.
func TestENITagFilter(t *testing.T) {
	for _, m := range []mode.Mode{mode.ENIMultiIP, mode.ENIOnly} {
		t.Run(string(m), func(t *testing.T) { tagFilterRun(t, m) })
	}
}

func tagFilterRun(t *testing.T, m mode.Mode) {
	filter := map[string]string{"team": "net"}
	l := newLab(t)
	l.conf = strings.Replace(l.conf, `"pool_check_period":"1h"`, `"pool_check_period":"100ms"`, 1)
	l.conf = strings.Replace(l.conf, `"cluster_id":"c-test"`, `"cluster_id":"c-test","eni_tag_filter":{"team":"net"}`, 1)
	pods := []string{"p0", "p1", "p2"}
	if m == mode.ENIOnly {
		l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"max_pool_size":0`, 1)
		pods = []string{"p0"}
	}
	if got := l.daemonConfig().ENITagFilter; !maps.Equal(got, filter) {
		t.Fatalf("lab config has eni_tag_filter %v, want %v", got, filter)
	}
	for _, p := range append(slices.Clone(pods), "extra") {
		l.pod("tf", p, nil)
	}
	withFilter := maps.Clone(ourTags)
	maps.Copy(withFilter, filter)

	type other struct {
		what   string
		tags   map[string]string
		attach string // "before" or "after" the daemon starts, or ""
		id     string
		was    fakecloud.ENIView // as it was once set up
	}
	others := []*other{
		{what: "ours without the filter tag, attached before start", tags: ourTags, attach: "before"},
		{what: "ours without the filter tag, attached after start", tags: ourTags, attach: "after"},
		{what: "ours without the filter tag, Available", tags: ourTags},
	}
	orphan := &other{what: "ours with the filter tag, Available", tags: withFilter}
	// Created and attached through the SDK before the daemon starts.
	ec := l.ecsClient()
	for _, o := range append(slices.Clone(others), orphan) {
		o.id = l.createENI(ec, o.what, "", o.tags, 2)
	}
	status := func(id string) string {
		v, ok := l.cloud.ENI(id)
		if !ok {
			return "gone"
		}
		return v.Status
	}
	for _, o := range others {
		testwait.Until(t, waitLimit, o.what+" Available", func() bool { return status(o.id) == fakecloud.ENIAvailable })
		if o.attach != "before" {
			continue
		}
		req := ecs.CreateAttachNetworkInterfaceRequest()
		req.NetworkInterfaceId, req.InstanceId = o.id, node1
		if _, err := ec.AttachNetworkInterface(req); err != nil {
			t.Fatalf("attach %s: %v", o.what, err)
		}
		testwait.Until(t, waitLimit, o.what+" InUse", func() bool { return status(o.id) == fakecloud.ENIInUse })
	}

	d, c, stop := l.daemon(func(o *Options) { o.Mode = m })
	for _, o := range others {
		if o.attach != "after" {
			continue
		}
		if err := d.node.API.AttachENI(ctxT(t), o.id, node1); err != nil {
			t.Fatalf("attach %s: %v", o.what, err)
		}
		if _, err := d.node.API.WaitENIStatus(ctxT(t), o.id, cloud.StatusInUse); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range others {
		o.was, _ = l.cloud.ENI(o.id)
	}
	got := map[string]string{}
	for _, p := range pods {
		r, err := alloc(t, c, "tf", p, "c-"+p)
		if err != nil {
			t.Fatalf("allocate %s: %v", p, err)
		}
		got[p] = podIP(r)
	}
	if m == mode.ENIOnly {
		// The instance's last ENI slot is taken: the attach of another
		// ENI is refused, and the pod with it.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := c.AllocIP(ctx, &rpc.AllocIPRequest{K8SPodNamespace: "tf", K8SPodName: "extra", K8SPodInfraContainerId: "c-extra",
			Netns: "/var/run/netns/c-extra", IfName: "eth0"})
		cancel()
		if err == nil {
			t.Error("a second exclusive ENI was handed out on a node whose other ENI slots hold ENIs outside the filter")
		}
	}

	check := func(d *Daemon, when string) {
		t.Helper()
		afterSyncsAndGC(t, d)
		known := map[string]bool{}
		for _, a := range d.pool.Addresses() {
			known[a.IP.ENIID] = true
		}
		for _, o := range others {
			v, ok := l.cloud.ENI(o.id)
			switch {
			case !ok:
				t.Errorf("%s: %s (%s) was deleted", when, o.what, o.id)
			case known[o.id]:
				t.Errorf("%s: %s (%s) is in the pool", when, o.what, o.id)
			case v.Status != o.was.Status || v.InstanceID != o.was.InstanceID:
				t.Errorf("%s: %s (%s) is %s on %q, was %s on %q", when, o.what, o.id, v.Status, v.InstanceID, o.was.Status, o.was.InstanceID)
			case v.PrimaryIP != o.was.PrimaryIP || !slices.Equal(v.IPv4, o.was.IPv4):
				t.Errorf("%s: %s (%s) has addresses %v %v, had %v %v", when, o.what, o.id, v.PrimaryIP, v.IPv4, o.was.PrimaryIP, o.was.IPv4)
			}
		}
		if st := status(orphan.id); st != "gone" && st != fakecloud.ENIDeleting {
			t.Errorf("%s: %s (%s) is %s, want swept", when, orphan.what, orphan.id, st)
		}
		var created []string
		for _, e := range l.cloud.ENIs() {
			if e.Type != fakecloud.ENITypeSecondary || e.InstanceID != node1 || e.ID == others[0].id || e.ID == others[1].id {
				continue
			}
			created = append(created, e.ID)
			for k, v := range withFilter {
				if e.Tags[k] != v {
					t.Errorf("%s: ENI %s the daemon created has tags %v, want %s=%s among them", when, e.ID, e.Tags, k, v)
				}
			}
			if !known[e.ID] {
				t.Errorf("%s: ENI %s the daemon created is not in its pool", when, e.ID)
			}
		}
		if len(created) == 0 {
			t.Errorf("%s: no ENI of the daemon's on the node", when)
		}
		for _, p := range pods {
			r, err := alloc(t, c, "tf", p, "c-"+p) // a retried ADD: the same answer
			if err != nil || podIP(r) != got[p] {
				t.Errorf("%s: pod %s has %v (%v), had %s", when, p, r, err, got[p])
			}
		}
	}
	check(d, "first run")
	stop()
	d, c, _ = l.daemon(func(o *Options) { o.Mode = m })
	check(d, "after a restart")
}

// TestENITagFilterContradiction: a filter that the daemon's own tags
// contradict would leave every ENI it creates unmanaged after a restart;
// the daemon refuses to start with it.
func TestENITagFilterContradiction(t *testing.T) {
	for _, filter := range []string{`{"creator":"someone-else"}`, `{"team":"ops"}`} {
		l := newLab(t)
		l.conf = strings.Replace(l.conf, `"cluster_id":"c-test"`,
			`"cluster_id":"c-test","eni_tags":{"team":"net"},"eni_tag_filter":`+filter, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		d, err := New(ctx, Options{Mode: mode.ENIMultiIP, Config: l.daemonConfig(), NodeName: nodeName, Kube: clientset.Wrap(l.kube), StoreNoSync: true})
		cancel()
		if err == nil {
			d.Close()
			t.Errorf("eni_tag_filter %s accepted next to eni_tags team=net", filter)
			continue
		}
		if !strings.Contains(err.Error(), "eni_tag_filter") {
			t.Errorf("eni_tag_filter %s refused with %v, want the key named", filter, err)
		}
	}
}

// TestENITagsChangeKeepsOwnENIs: the daemon recognises its ENIs by its
// ownership tags (creator, instance, cluster, eni_tag_filter), not by
// eni_tags. After eni_tags changes and the daemon restarts, the ENIs it
// created before are still its own: restored with the running pods'
// addresses, neither left alone (capacity lost) nor swept, and the ENIs it
// creates from then on carry the new tags.
func TestENITagsChangeKeepsOwnENIs(t *testing.T) {
	l := newLab(t)
	base := l.conf
	l.conf = strings.Replace(base, `"cluster_id":"c-test"`, `"cluster_id":"c-test","eni_tags":{"team":"a"}`, 1)
	for i := 0; i < 20; i++ {
		l.pod("tg", fmt.Sprintf("p%02d", i), nil)
	}
	d, c, stop := l.daemon(nil)
	got := map[string]string{}
	for i := 0; i < 5; i++ {
		p := fmt.Sprintf("p%02d", i)
		r := allocOK(t, c, "tg", p, "c-"+p)
		got[p] = podIP(r)
	}
	before := map[string]bool{}
	for _, e := range l.cloud.ENIs() {
		if e.InstanceID == node1 && e.Type == fakecloud.ENITypeSecondary {
			before[e.ID] = true
		}
	}
	if len(before) == 0 {
		t.Fatal("no ENI created")
	}
	_ = d
	stop()
	l.conf = strings.Replace(base, `"cluster_id":"c-test"`, `"cluster_id":"c-test","eni_tags":{"team":"b"}`, 1)
	d, c, _ = l.daemon(nil)
	for p, ip := range got {
		r, err := alloc(t, c, "tg", p, "c-"+p) // a retried ADD: the same answer
		if err != nil || podIP(r) != ip {
			t.Errorf("after eni_tags changed, pod %s has %v (%v), had %s", p, r, err, ip)
		}
	}
	// Fill the node: the old ENIs' addresses are used, new ENIs are tagged anew.
	for i := 5; i < 20; i++ {
		p := fmt.Sprintf("p%02d", i)
		r, err := alloc(t, c, "tg", p, "c-"+p)
		if err != nil {
			t.Fatalf("allocate %s after eni_tags changed: %v", p, err)
		}
		for q, ip := range got {
			if podIP(r) == ip {
				t.Fatalf("%s got %s, the address of running pod %s", p, ip, q)
			}
		}
		got[p] = podIP(r)
	}
	if err := d.GC(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, a := range d.pool.Addresses() {
		known[a.IP.ENIID] = true
	}
	for _, e := range l.cloud.ENIs() {
		if e.InstanceID != node1 || e.Type != fakecloud.ENITypeSecondary {
			continue
		}
		if !known[e.ID] {
			t.Errorf("ENI %s (tags %v) attached to the node is not in the pool", e.ID, e.Tags)
		}
		if want := map[bool]string{true: "a", false: "b"}[before[e.ID]]; e.Tags["team"] != want {
			t.Errorf("ENI %s has team=%q, want %q", e.ID, e.Tags["team"], want)
		}
	}
	for id := range before {
		if v, ok := l.cloud.ENI(id); !ok || v.InstanceID != node1 {
			t.Errorf("ENI %s created before eni_tags changed is gone or detached", id)
		}
	}
}
