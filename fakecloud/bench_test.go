package fakecloud_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/fakecloud"
)

// benchWorld is a world with one /20 vSwitch and persistence on, plus
// nENIs Available ENIs created through the Go API's HTTP handler.
func benchWorld(b *testing.B, nENIs int) (*fakecloud.Cloud, []string) {
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSecret}}
	spec.VSwitches[0].CIDR = "192.168.0.0/20"
	spec.Settings.ConsistencyWindow, spec.Settings.MetadataLag = 0, 0
	spec.Settings.Throttle = map[string]int{"*": 0}
	c, err := fakecloud.New(fakecloud.Options{Spec: &spec, StatePath: filepath.Join(b.TempDir(), "state.json")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	for i := 0; i < nENIs; i++ {
		w := httptest.NewRecorder()
		p := signedParams("CreateNetworkInterface", url.Values{"VSwitchId": {vsw1}, "SecurityGroupId": {sg}}, time.Now(), testSecret)
		c.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/?"+p.Encode(), nil))
		if w.Code != 200 {
			b.Fatalf("create: %d %s", w.Code, w.Body)
		}
	}
	var enis []string
	for _, v := range c.ENIs() {
		if v.Type == fakecloud.ENITypeSecondary {
			enis = append(enis, v.ID)
		}
	}
	return c, enis
}

// BenchmarkHandlerAssignUnassignPair measures the server side of a
// successful AssignPrivateIpAddresses + UnassignPrivateIpAddresses pair
// across 200 ENIs: request parsing, signature verification, nonce and
// timestamp checks, throttling, accounting, the change itself and its
// journal write. Requests are signed before the timer starts.
func BenchmarkHandlerAssignUnassignPair(b *testing.B) {
	const nENIs = 200
	c, enis := benchWorld(b, nENIs)
	base := netip.MustParseAddr("192.168.8.0") // outside what the ENIs' primaries took
	type pair struct{ assign, unassign *http.Request }
	// Requests are signed in chunks with the timer stopped, and the
	// garbage of signing is collected before the timer restarts, so that
	// only the server's work is measured.
	const chunk = 5000
	prepare := func(from, n int) []pair {
		out := make([]pair, n)
		now := time.Now()
		for i := range out {
			k := (from + i) % nENIs
			ip := base
			for j := 0; j < k; j++ {
				ip = ip.Next()
			}
			biz := url.Values{"NetworkInterfaceId": {enis[k]}, "PrivateIpAddress.1": {ip.String()}}
			pa := signedParams("AssignPrivateIpAddresses", biz, now, testSecret)
			pu := signedParams("UnassignPrivateIpAddresses", biz, now, testSecret)
			out[i] = pair{
				assign:   httptest.NewRequest(http.MethodPost, "/?"+pa.Encode(), nil),
				unassign: httptest.NewRequest(http.MethodPost, "/?"+pu.Encode(), nil),
			}
		}
		runtime.GC()
		return out
	}
	b.ReportAllocs()
	b.ResetTimer()
	var elapsed time.Duration
	for done := 0; done < b.N; {
		b.StopTimer()
		pairs := prepare(done, min(chunk, b.N-done))
		b.StartTimer()
		start := time.Now()
		for i := range pairs {
			w := httptest.NewRecorder()
			c.ServeHTTP(w, pairs[i].assign)
			if w.Code != 200 {
				b.Fatalf("assign %d: %d %s", done+i, w.Code, w.Body)
			}
			w = httptest.NewRecorder()
			c.ServeHTTP(w, pairs[i].unassign)
			if w.Code != 200 {
				b.Fatalf("unassign %d: %d %s", done+i, w.Code, w.Body)
			}
		}
		elapsed += time.Since(start)
		done += len(pairs)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
}

// BenchmarkSDKAssignUnassign measures calls per second through the
// unmodified SDK over loopback HTTP with 8 concurrent clients, each
// cycling an address on its own ENI.
func BenchmarkSDKAssignUnassign(b *testing.B) {
	const clients = 8
	c, enis := benchWorld(b, clients)
	srv := httptest.NewServer(c)
	b.Cleanup(srv.Close)
	host := srv.Listener.Addr().String()
	sdks := make([]*ecs.Client, clients)
	for i := range sdks {
		cl, err := ecs.NewClientWithOptions(fakecloud.DefaultRegion, sdkConfig(), credentials.NewAccessKeyCredential(testAK, testSecret))
		if err != nil {
			b.Fatal(err)
		}
		cl.Domain = host
		sdks[i] = cl
	}
	per := b.N/clients + 1
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < per; j++ {
				a := ecs.CreateAssignPrivateIpAddressesRequest()
				a.NetworkInterfaceId, a.SecondaryPrivateIpAddressCount = enis[i], requests.NewInteger(1)
				resp, err := sdks[i].AssignPrivateIpAddresses(a)
				if err != nil {
					errs <- err
					return
				}
				u := ecs.CreateUnassignPrivateIpAddressesRequest()
				u.NetworkInterfaceId = enis[i]
				u.PrivateIpAddress = &resp.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress
				if _, err := sdks[i].UnassignPrivateIpAddresses(u); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(2*per*clients)/time.Since(start).Seconds(), "calls/s")
}
