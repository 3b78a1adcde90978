package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

// metadataView reads what the node's metadata lists: address → ENI ID.
func (l *lab) metadataView() map[string]string {
	l.t.Helper()
	get := func(path string) string {
		resp, err := http.Get(l.mdURL + "/latest/meta-data/" + path)
		if err != nil {
			l.t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b))
	}
	out := map[string]string{}
	primary := get("mac")
	for _, m := range strings.Split(get("network/interfaces/macs/"), "\n") {
		m = strings.Trim(m, "/")
		if m == "" || m == primary {
			continue
		}
		id := get("network/interfaces/macs/" + m + "/network-interface-id")
		var ips []string
		_ = json.Unmarshal([]byte(get("network/interfaces/macs/"+m+"/private-ipv4s")), &ips)
		for _, ip := range ips {
			out[ip] = id
		}
	}
	return out
}

// cloudView is what fakecloud says is assigned to node1's secondary ENIs.
func (l *lab) cloudView() map[string]string {
	out := map[string]string{}
	for _, e := range l.cloud.ENIs() {
		if e.Type != fakecloud.ENITypeSecondary || e.InstanceID != node1 {
			continue
		}
		out[e.PrimaryIP.String()] = e.ID
		for _, a := range e.IPv4 {
			out[a.String()] = e.ID
		}
	}
	return out
}

// TestBurstWithFaults sends more pods than the node can hold at once to an
// empty node, with realistic attach and metadata delays and 5% of mutating
// calls failing. No address may be handed out twice, the excess must fail
// cleanly, store, metadata and fakecloud must agree afterwards, and the
// calls stay near the batching bound.
func TestBurstWithFaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		timeScale float64
		lag       time.Duration
	}{
		{"default metadata lag", 1, time.Second},
		{"10s metadata lag", 0.1, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t, func(s *fakecloud.Spec, o *fakecloud.Options) {
				o.TimeScale = tc.timeScale
				s.Settings.MetadataLag = fakecloud.Duration(tc.lag)
			})
			const pods = 55 // ecs.g7.xlarge holds 45
			for i := 0; i < pods; i++ {
				l.pod("burst", fmt.Sprintf("p%02d", i), nil)
			}
			l.conf = strings.Replace(l.conf, `"ip_batch_window":"10ms"`, `"ip_batch_window":"200ms"`, 1)
			l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"max_pool_size":50`, 1)
			// Realistic attach times need a realistic status poll.
			l.conf = strings.Replace(l.conf, `"wait_eni_status":{"Duration":"5ms","Factor":1.2,"Steps":12}`,
				`"wait_eni_status":{"Duration":"200ms","Factor":1.2,"Steps":20,"Cap":"1s"}`, 1)
			l.conf = strings.Replace(l.conf, `"meta_assign_private_ip":{"Duration":"5ms","Steps":10}`,
				`"meta_assign_private_ip":{"Duration":"100ms","Steps":10}`, 1)
			d, c, _ := l.daemon(nil)
			for _, action := range []string{"CreateNetworkInterface", "AttachNetworkInterface", "AssignPrivateIpAddresses"} {
				if _, err := l.cloud.AddFault(fakecloud.Fault{Name: "flaky-" + action, Kind: fakecloud.FaultError, Action: action,
					Probability: 0.05, Code: "InternalError", Status: 500}); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			got := map[string]string{}
			var failed []error
			var wg sync.WaitGroup
			start := time.Now()
			for i := 0; i < pods; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					name := fmt.Sprintf("p%02d", i)
					r, err := c.AllocIP(ctx, &rpc.AllocIPRequest{K8SPodNamespace: "burst", K8SPodName: name, K8SPodInfraContainerId: "c-" + name})
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failed = append(failed, err)
						return
					}
					got[name] = podIP(r)
				}()
			}
			wg.Wait()
			took := time.Since(start)
			seen := map[string]string{}
			for name, ip := range got {
				if prev, dup := seen[ip]; dup {
					t.Fatalf("%s handed to %s and %s", ip, prev, name)
				}
				seen[ip] = name
			}
			if len(got) != 45 || len(failed) != pods-45 {
				t.Fatalf("%d allocated, %d failed (want 45 and %d); first failure %v", len(got), len(failed), pods-45, first(failed))
			}
			for _, err := range failed {
				if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "capacity") {
					t.Fatalf("excess request failed unclearly: %v", err)
				}
			}
			l.cloud.ClearFaults()
			// store = metadata = fakecloud.
			cv := l.cloudView()
			if len(cv) != 45 {
				t.Fatalf("cloud has %d addresses on our ENIs; want 45", len(cv))
			}
			var mv map[string]string
			testwait.For(t, time.Duration(float64(tc.lag)*tc.timeScale)+10*time.Second, "metadata to catch up with the cloud", func() error {
				if mv = l.metadataView(); len(mv) != len(cv) {
					return fmt.Errorf("metadata shows %d of the cloud's %d addresses", len(mv), len(cv))
				}
				return nil
			})
			atts, err := d.store.List()
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range atts {
				r := a.Resources[0]
				if cv[r.IPv4] != r.ENIID || mv[r.IPv4] != r.ENIID {
					t.Fatalf("%s: store says %s on %s, cloud %q, metadata %q", a.Key(), r.IPv4, r.ENIID, cv[r.IPv4], mv[r.IPv4])
				}
			}
			if len(atts) != 45 {
				t.Fatalf("store has %d records", len(atts))
			}
			calls := func(action, outcome string) int64 {
				return l.cloud.CallCount(fakecloud.CallFilter{Action: action, Outcome: outcome})
			}
			enis := calls("CreateNetworkInterface", fakecloud.OutcomeSuccess)
			okAddr := enis + calls("AssignPrivateIpAddresses", fakecloud.OutcomeSuccess)
			var mutating, failedCalls int64
			for _, a := range []string{"CreateNetworkInterface", "AttachNetworkInterface", "AssignPrivateIpAddresses",
				"UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface"} {
				all := calls(a, "")
				mutating += all
				failedCalls += all - calls(a, fakecloud.OutcomeSuccess)
			}
			if bound := int64((45+9)/10) + enis; okAddr > bound {
				t.Fatalf("%d successful Create+Assign calls for 45 addresses on %d ENIs, bound %d", okAddr, enis, bound)
			}
			// The bound: ⌈pods/10⌉ + ENIs created + retries.
			if bound := int64((45+9)/10) + enis + failedCalls; mutating > bound {
				t.Fatalf("%d mutating calls, bound %d (%d ENIs, %d failed calls retried)", mutating, bound, enis, failedCalls)
			}
			var summary []string
			for _, s := range l.cloud.Calls() {
				summary = append(summary, fmt.Sprintf("%s=%s×%d", s.Action, s.Outcome, s.Count))
			}
			sort.Strings(summary)
			t.Logf("45 pods in %v; %d ENIs; %d mutating calls (%d failed and retried); %s", took.Round(time.Millisecond),
				enis, mutating, failedCalls, strings.Join(summary, " "))
		})
	}
}

func first(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// TestThrottledRegion gives the account tiny API budgets: allocations
// still succeed (the client slows down and retries), and the calls that
// reach the cloud stay bounded.
func TestThrottledRegion(t *testing.T) {
	l := newLab(t, func(s *fakecloud.Spec, o *fakecloud.Options) {
		s.Settings.ThrottleWindow = fakecloud.Duration(500 * time.Millisecond)
		s.Settings.Throttle = map[string]int{"*": 1, "DescribeNetworkInterfaceAttribute": 4, "DescribeNetworkInterfaces": 4}
	})
	const pods = 40
	for i := 0; i < pods; i++ {
		l.pod("th", fmt.Sprintf("p%02d", i), nil)
	}
	l.conf = strings.Replace(l.conf, `"ip_batch_window":"10ms"`, `"ip_batch_window":"100ms"`, 1)
	for _, k := range []string{"eni_create", "eni_ops", "eni_ip_ops"} {
		l.conf = strings.Replace(l.conf, `"`+k+`":{"Duration":"5ms","Steps":`, `"`+k+`":{"Duration":"200ms","Cap":"1s","Factor":1.5,"Steps":`, 1)
	}
	l.conf = strings.Replace(l.conf, `"":{"Duration":"5ms","Factor":1.2,"Steps":6}`, `"":{"Duration":"200ms","Factor":1.5,"Cap":"1s","Steps":12}`, 1)
	l.conf = strings.Replace(l.conf, `"wait_eni_status":{"Duration":"5ms","Factor":1.2,"Steps":12}`,
		`"wait_eni_status":{"Duration":"100ms","Factor":1.2,"Steps":30,"Cap":"1s"}`, 1)
	_, c, _ := l.daemon(nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	ips := map[string]bool{}
	for i := 0; i < pods; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := alloc(t, c, "th", fmt.Sprintf("p%02d", i), fmt.Sprintf("c%d", i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if ips[podIP(r)] {
				t.Errorf("%s handed out twice", podIP(r))
			}
			ips[podIP(r)] = true
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d allocations failed under throttling; first: %v", len(errs), errs[0])
	}
	throttled := l.cloud.CallCount(fakecloud.CallFilter{Outcome: "Throttling.User"})
	total := l.cloud.CallCount(fakecloud.CallFilter{})
	if throttled == 0 {
		t.Fatal("the budgets never throttled: the test proves nothing")
	}
	if total > 200 {
		t.Fatalf("%d calls (%d throttled) for %d pods: the client does not back off", total, throttled, pods)
	}
	t.Logf("%d pods under tiny budgets: %d calls, %d throttled", pods, total, throttled)
}
