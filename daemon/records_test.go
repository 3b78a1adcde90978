package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

// recordsClient dials the daemon's socket for TerwayRecords.
func (l *lab) recordsClient() rpc.TerwayRecordsClient {
	l.t.Helper()
	conn, err := grpc.NewClient("unix://"+l.daemonConfig().SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { conn.Close() })
	return rpc.NewTerwayRecordsClient(conn)
}

// TestListRecords: the daemon answers its store's records over its
// socket: the intent of a cloud call while the cloud holds it, then the
// pod's attachment, with its address, ENI and type, once it is served.
func TestListRecords(t *testing.T) {
	l := newLab(t)
	l.pod("default", "p1", nil)
	hold, err := l.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultPause, Action: "CreateNetworkInterface"})
	if err != nil {
		t.Fatal(err)
	}
	_, c, _ := l.daemon(nil)
	rc := l.recordsClient()
	allocated := make(chan *rpc.AllocIPReply, 1)
	go func() {
		r, err := alloc(t, c, "default", "p1", "c1")
		if err != nil {
			t.Errorf("alloc: %v", err)
		}
		allocated <- r
	}()
	if err := l.cloud.WaitHeld(ctxT(t), hold, 1); err != nil {
		t.Fatal(err)
	}
	got, err := rc.ListRecords(ctxT(t), &rpc.ListRecordsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Intents) != 1 || got.Intents[0].Kind != "CreateENI" || !strings.HasPrefix(got.Intents[0].VswitchId, "vsw-") ||
		got.Intents[0].CreatedAt == nil || len(got.Attachments) != 0 {
		t.Fatalf("records while CreateNetworkInterface is held: %v", got)
	}
	l.cloud.RemoveFault(hold)
	r := <-allocated
	if r == nil {
		t.FailNow()
	}
	testwait.For(t, 10*time.Second, "the pod's attachment and no intent", func() error {
		if got, err = rc.ListRecords(ctxT(t), &rpc.ListRecordsRequest{}); err != nil {
			return err
		}
		if len(got.Intents) != 0 || len(got.Attachments) != 1 {
			return fmt.Errorf("records %v", got)
		}
		return nil
	})
	a := got.Attachments[0]
	if a.PodNamespace != "default" || a.PodName != "p1" || a.PodUid != "default-p1" || a.ContainerId != "c1" ||
		a.IpType != "ENIMultiIP" || a.CreatedAt == nil || a.StickyUntil != nil || len(a.Resources) != 1 {
		t.Fatalf("attachment %v", a)
	}
	res := a.Resources[0]
	var eniID string
	for _, e := range l.cloud.ENIs() {
		if strings.EqualFold(e.MAC, r.NetConfs[0].ENIInfo.MAC) {
			eniID = e.ID
		}
	}
	if res.Type != "eniIp" || res.Ipv4 != podIP(r) || res.EniId != eniID || !strings.EqualFold(res.EniMac, r.NetConfs[0].ENIInfo.MAC) {
		t.Errorf("resource %v, want eniIp %s on %s (%s)", res, podIP(r), eniID, r.NetConfs[0].ENIInfo.MAC)
	}
}

// TestListRecordsUnavailable: a daemon that is not serving yet, or has
// stopped, says so (Unavailable) instead of answering empty records.
func TestListRecordsUnavailable(t *testing.T) {
	l := newLab(t)
	d, err := New(ctxT(t), Options{Mode: mode.ENIMultiIP, Config: l.daemonConfig(), NodeName: nodeName, Kube: clientset.Wrap(l.kube), StoreNoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rc := l.recordsClient()
	_, err = rc.ListRecords(ctxT(t), &rpc.ListRecordsRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "initialising") {
		t.Errorf("before Serve: %v, want Unavailable, initialising", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = rc.ListRecords(ctx, &rpc.ListRecordsRequest{})
	if status.Code(err) != codes.Unavailable || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("after Close: %v, want Unavailable", err)
	}
}
