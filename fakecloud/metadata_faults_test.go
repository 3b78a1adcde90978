package fakecloud_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
)

// metadataFault installs a fault on the metadata service.
func metadataFault(t *testing.T, e *env, f fakecloud.Fault) string {
	t.Helper()
	f.Service = fakecloud.ServiceMetadata
	return try(e.cloud.AddFault(f)).must(t)
}

// fired returns how many reads or calls fault name has hit.
func fired(t *testing.T, e *env, name string) int64 {
	t.Helper()
	for _, f := range e.cloud.Faults() {
		if f.Name == name {
			return f.Fired
		}
	}
	t.Fatalf("no fault %s", name)
	return 0
}

// metadataCount counts node1's reads of path (as accounted, MACs as
// "{mac}") with outcome.
func metadataCount(e *env, path, outcome string) int64 {
	return e.cloud.CallCount(fakecloud.CallFilter{Service: fakecloud.ServiceMetadata, Action: path, InstanceID: node1, Outcome: outcome})
}

func TestMetadataErrorFaults(t *testing.T) {
	e := newEnv(t)
	m := e.imdsFor(node1)
	const macs = "meta-data/network/interfaces/macs/"
	for _, tc := range []struct {
		name  string
		fault fakecloud.Fault
		path  string // read under meta-data/
		want  int    // status of the first read
		then  int    // status of the third read
	}{
		{"outage: every path, 500 by default", fakecloud.Fault{Kind: fakecloud.FaultError}, "instance-id", 500, 500},
		{"a path prefix", fakecloud.Fault{Kind: fakecloud.FaultError, Action: macs, Status: 503}, "network/interfaces/macs/", 503, 503},
		{"outside the prefix", fakecloud.Fault{Kind: fakecloud.FaultError, Action: macs}, "instance-id", 200, 200},
		{"another instance", fakecloud.Fault{Kind: fakecloud.FaultError, Caller: node2}, "instance-id", 200, 200},
		{"the first two reads", fakecloud.Fault{Kind: fakecloud.FaultError, Count: 2, Status: 502}, "zone-id", 502, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.cloud.ClearFaults()
			e.cloud.ResetCalls()
			name := metadataFault(t, e, tc.fault)
			var got []int
			for i := 0; i < 3; i++ {
				st, body := m.get(tc.path)
				got = append(got, st)
				if st != 200 && !strings.Contains(body, "<title>"+strconv.Itoa(st)+" - "+http.StatusText(st)+"</title>") {
					t.Fatalf("error page: %q", body)
				}
			}
			if got[0] != tc.want || got[2] != tc.then {
				t.Fatalf("statuses %v, want %d first and %d third", got, tc.want, tc.then)
			}
			failed := int64(0)
			for _, st := range got {
				if st != 200 {
					failed++
				}
			}
			if n := fired(t, e, name); n != failed {
				t.Fatalf("fault fired %d times for %d failed reads", n, failed)
			}
			if tc.want != 200 {
				if n := metadataCount(e, "meta-data/"+tc.path, "Http"+strconv.Itoa(tc.want)); n == 0 {
					t.Fatalf("no Http%d counted: %+v", tc.want, e.cloud.MetadataCalls())
				}
			}
		})
	}
	// Metadata reads are not API calls.
	if n := e.cloud.CallCount(fakecloud.CallFilter{}); n != 0 {
		t.Fatalf("%d metadata reads counted as API calls: %+v", n, e.cloud.Calls())
	}
}

func TestMetadataErrorPage(t *testing.T) {
	e := newEnv(t)
	metadataFault(t, e, fakecloud.Fault{Kind: fakecloud.FaultError, Status: 500})
	srvURL := e.imdsFor(node1).base
	resp, err := http.Get(srvURL + "/latest/meta-data/instance-id")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || resp.Header.Get("Content-Type") != "text/html" ||
		!strings.Contains(string(b), "<title>500 - Internal Server Error</title>") {
		t.Fatalf("%d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

// TestMetadataHang holds reads with a pause (an outage that hangs) and
// slows them with latency.
func TestMetadataHang(t *testing.T) {
	e := newEnv(t)
	m := e.imdsFor(node1)
	hang := metadataFault(t, e, fakecloud.Fault{Name: "hang", Kind: fakecloud.FaultPause, Action: "meta-data/instance-id"})
	done := make(chan string, 1)
	go func() { _, body := m.get("instance-id"); done <- body }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.cloud.WaitHeld(ctx, hang, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-done:
		t.Fatalf("a paused read answered %q", body)
	case <-time.After(100 * time.Millisecond):
	}
	e.cloud.RemoveFault(hang)
	if body := <-done; body != node1 {
		t.Fatalf("released read: %q", body)
	}
	// A client that gives up is counted as gone.
	metadataFault(t, e, fakecloud.Fault{Kind: fakecloud.FaultPause})
	impatient := &imds{t: t, base: m.base, client: &http.Client{Timeout: 100 * time.Millisecond}}
	if _, err := impatient.client.Get(impatient.base + "/latest/meta-data/zone-id"); err == nil {
		t.Fatal("a paused read answered")
	}
	testwait.Until(t, 5*time.Second, "ClientGone counted", func() bool {
		return metadataCount(e, "meta-data/zone-id", fakecloud.OutcomeClientGone) == 1
	})
	e.cloud.ClearFaults()
	const slow = 300 * time.Millisecond
	metadataFault(t, e, fakecloud.Fault{Kind: fakecloud.FaultLatency, Latency: fakecloud.Duration(slow)})
	start := time.Now()
	if body := m.must("instance-id"); body != node1 || time.Since(start) < slow {
		t.Fatalf("slow read %q after %v", body, time.Since(start))
	}
}

// TestMetadataStale freezes an instance's metadata and checks that ENIs
// and addresses changed since are not seen until the fault is removed.
func TestMetadataStale(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	m := e.imdsFor(node1)
	gone := attachedENI(t, c, vsw1, node1)
	kept := attachedENI(t, c, vsw1, node1)
	goneV, _ := e.cloud.ENI(gone)
	keptV, _ := e.cloud.ENI(kept)
	ipv4s := "network/interfaces/macs/" + keptV.MAC + "/private-ipv4s"
	before := m.must(ipv4s)
	name := metadataFault(t, e, fakecloud.Fault{Kind: fakecloud.FaultStale, Caller: node1, Action: "meta-data/network/"})
	// Detach one, attach a new one, assign addresses to the other.
	det := ecs.CreateDetachNetworkInterfaceRequest()
	det.NetworkInterfaceId, det.InstanceId = gone, node1
	try(c.DetachNetworkInterface(det)).must(t)
	waitStatus(t, c, gone, "Available")
	added := attachedENI(t, c, vsw1, node1)
	addedV, _ := e.cloud.ENI(added)
	try(assignIPs(c, kept, 2)).must(t)
	list := m.must("network/interfaces/macs/")
	if !strings.Contains(list, goneV.MAC) || strings.Contains(list, addedV.MAC) {
		t.Fatalf("stale MACs %q: want %s listed and not %s", list, goneV.MAC, addedV.MAC)
	}
	if got := m.must(ipv4s); got != before {
		t.Fatalf("stale private-ipv4s %s, want %s", got, before)
	}
	if got := m.must("instance-id"); got != node1 {
		t.Fatalf("instance-id outside the fault's prefix: %q", got)
	}
	if n := metadataCount(e, "meta-data/network/interfaces/macs/{mac}/private-ipv4s", fakecloud.OutcomeStale); n != 1 {
		t.Fatalf("stale reads of private-ipv4s counted %d: %+v", n, e.cloud.MetadataCalls())
	}
	if n := fired(t, e, name); n != 2 {
		t.Fatalf("stale fault fired %d times, want 2", n)
	}
	e.cloud.RemoveFault(name)
	list = m.must("network/interfaces/macs/")
	if strings.Contains(list, goneV.MAC) || !strings.Contains(list, addedV.MAC) {
		t.Fatalf("MACs after the fault %q", list)
	}
	if got := m.must(ipv4s); got == before {
		t.Fatal("private-ipv4s still stale after the fault")
	}
}

func TestMetadataFaultValidation(t *testing.T) {
	e := newEnv(t)
	md := fakecloud.ServiceMetadata
	for _, tc := range []struct {
		f    fakecloud.Fault
		want string
	}{
		{fakecloud.Fault{Service: md, Kind: fakecloud.FaultLostResponse}, "not to metadata reads"},
		{fakecloud.Fault{Service: md, Kind: fakecloud.FaultConsistency, Latency: 1}, "not to metadata reads"},
		{fakecloud.Fault{Service: md, Kind: fakecloud.FaultError, Code: "InternalError"}, "mean nothing"},
		{fakecloud.Fault{Service: md, Kind: fakecloud.FaultPause, Step: fakecloud.StepAfter}, "paused only"},
		{fakecloud.Fault{Service: md, Kind: fakecloud.FaultStale, Caller: "i-nosuch"}, "no instance"},
		{fakecloud.Fault{Service: md, Kind: fakecloud.FaultError, Status: 200}, "4xx or 5xx"},
		{fakecloud.Fault{Kind: fakecloud.FaultStale}, "metadata service"},
		{fakecloud.Fault{Service: fakecloud.ServiceAPI, Kind: fakecloud.FaultStale}, "metadata service"},
		{fakecloud.Fault{Service: "ram", Kind: fakecloud.FaultError}, `service "ram"`},
	} {
		if _, err := e.cloud.AddFault(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.f, err, tc.want)
		}
	}
	if n := len(e.cloud.Faults()); n != 0 {
		t.Fatalf("%d refused faults installed", n)
	}
}
