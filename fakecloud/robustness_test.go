package fakecloud_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testlog"
)

// withLog sends the cloud's logs (default level INFO, as cmd/fakecloud)
// to buf.
func withLog(buf *testlog.Buffer) envOption {
	return withOptions(func(o *fakecloud.Options) {
		o.Logger = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
}

// listAt follows a dotted path of JSON objects to a list.
func listAt(t *testing.T, body map[string]any, path string) []any {
	t.Helper()
	var v any = body
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object", path, v)
		}
		v = m[k]
	}
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("%s: %v is not a list", path, v)
	}
	return l
}

// TestPagingOverflow: a huge PageNumber (alone or with a small PageSize)
// is a page past the end, answered with an empty list, in each of the six
// Describe actions that page by number. Before the shared pageStart helper
// (PageNumber-1)*PageSize overflowed to a negative index and the handler
// panicked: the client saw a dropped connection.
func TestPagingOverflow(t *testing.T) {
	e := newEnv(t)
	// The default world has no EIP; every list must have something to
	// page past.
	if st, body := e.post(t, signedParams("AllocateEipAddress", url.Values{"Version": {fakecloud.VPCVersion}}, time.Now(), testSecret)); st != http.StatusOK {
		t.Fatalf("AllocateEipAddress: %d %v", st, body)
	}
	cases := []struct{ action, version, list string }{
		{"DescribeVSwitches", fakecloud.VPCVersion, "VSwitches.VSwitch"},
		{"DescribeNetworkInterfaces", fakecloud.ECSVersion, "NetworkInterfaceSets.NetworkInterfaceSet"},
		{"DescribeVpcs", fakecloud.VPCVersion, "Vpcs.Vpc"},
		{"DescribeInstances", fakecloud.ECSVersion, "Instances.Instance"},
		{"DescribeEipAddresses", fakecloud.VPCVersion, "EipAddresses.EipAddress"},
		{"DescribeRouteTableList", fakecloud.VPCVersion, "RouterTableList.RouterTableListType"},
	}
	pages := []struct{ number, size string }{
		{"9223372036854775807", ""},  // MaxInt64 × default 10 wraps to -20: a panic
		{"9223372036854775807", "1"}, // no wrap, far past the end
		{"4611686018427387904", "4"}, // 2^62 × 4 wraps to -4: a panic
		{"2305843009213693953", "8"}, // wraps to 0: the first page, wrongly
		{"1000000", "50"},            // plainly past the end
	}
	for _, tc := range cases {
		for _, pg := range pages {
			biz := url.Values{"Version": {tc.version}, "PageNumber": {pg.number}}
			if pg.size != "" {
				biz.Set("PageSize", pg.size)
			}
			st, body := e.post(t, signedParams(tc.action, biz, time.Now(), testSecret))
			if st != http.StatusOK {
				t.Fatalf("%s PageNumber=%s PageSize=%s: %d %v", tc.action, pg.number, pg.size, st, body)
			}
			if l := listAt(t, body, tc.list); len(l) != 0 {
				t.Errorf("%s PageNumber=%s PageSize=%s: page past the end lists %d items", tc.action, pg.number, pg.size, len(l))
			}
			if tot, _ := body["TotalCount"].(float64); tot < 1 {
				t.Errorf("%s: TotalCount %v, want the full count of the default world", tc.action, body["TotalCount"])
			}
		}
		if n := e.cloud.CallCount(fakecloud.CallFilter{Action: tc.action, Outcome: fakecloud.OutcomeSuccess}); n != int64(len(pages)) {
			t.Errorf("%s: %d successful calls counted, want %d", tc.action, n, len(pages))
		}
	}
}

// TestHandlerPanicIsInternalError: a handler that panics answers a counted
// 500 InternalError in the API's error format and is logged at ERROR at the
// default level, over HTTP and when ServeHTTP is called in process (where
// no net/http server would recover it).
func TestHandlerPanicIsInternalError(t *testing.T) {
	var logs testlog.Buffer
	e := newEnv(t, withLog(&logs))
	const action = "FakecloudTestPanic" // registered by panic_internal_test.go
	st, body := e.post(t, signedParams(action, nil, time.Now(), testSecret))
	wantError(t, st, body, http.StatusInternalServerError, fakecloud.CodeInternalError)

	// In process: a direct ServeHTTP call must return, not panic.
	p := signedParams(action, nil, time.Now(), testSecret)
	r := httptest.NewRequest(http.MethodPost, "/?"+p.Encode(), nil)
	w := httptest.NewRecorder()
	e.cloud.ServeHTTP(w, r)
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), `"Code":"InternalError"`) {
		t.Fatalf("in-process call answered %d %s", w.Code, w.Body.String())
	}

	if n := e.cloud.CallCount(fakecloud.CallFilter{Action: action, Outcome: fakecloud.CodeInternalError}); n != 2 {
		t.Errorf("%d InternalError calls counted, want 2", n)
	}
	out := logs.String()
	if strings.Count(out, "level=ERROR") < 2 || !strings.Contains(out, "action="+action) || !strings.Contains(out, "deliberate test panic") {
		t.Errorf("panics not logged at ERROR with action and value:\n%s", out)
	}
	// The cloud still serves after the panics (no lock left held).
	st, body = e.post(t, signedParams("DescribeInstances", nil, time.Now(), testSecret))
	if st != http.StatusOK {
		t.Fatalf("after the panics DescribeInstances answered %d %v", st, body)
	}
}

// TestJournalWithoutSnapshotRefused: a journal holding acknowledged
// changes whose snapshot is gone refuses the start, naming both files, and
// is left as it was; before, the world started afresh and the journal was
// truncated.
func TestJournalWithoutSnapshotRefused(t *testing.T) {
	state := filepath.Join(t.TempDir(), "world.json")
	journal := state + ".journal"
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.StatePath = state }))
	createENI(t, e.ecs(), vsw1, nil) // an acknowledged change, in the journal only
	before, err := os.ReadFile(journal)
	if err != nil || len(before) == 0 {
		t.Fatalf("journal after a change: %d bytes, %v", len(before), err)
	}
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	spec := fakecloud.DefaultSpec()
	c, err := fakecloud.New(fakecloud.Options{Spec: &spec, StatePath: state})
	if err == nil {
		c.Close()
		t.Fatal("started over a journal without its snapshot")
	}
	if !strings.Contains(err.Error(), state) || !strings.Contains(err.Error(), journal) {
		t.Fatalf("error does not name both files: %v", err)
	}
	after, err := os.ReadFile(journal)
	if err != nil || !bytes.Equal(after, before) {
		t.Fatalf("journal changed by the refused start: %d bytes before, %d after (%v)", len(before), len(after), err)
	}
}

// TestEmptyJournalWithoutSnapshotRemoved: an empty journal carries no
// change, so a new world starts and the removal is logged at WARN.
func TestEmptyJournalWithoutSnapshotRemoved(t *testing.T) {
	state := filepath.Join(t.TempDir(), "world.json")
	if err := os.WriteFile(state+".journal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs testlog.Buffer
	e := newEnv(t, withLog(&logs), withOptions(func(o *fakecloud.Options) { o.StatePath = state }))
	if len(e.cloud.VSwitches()) == 0 {
		t.Fatal("no world after starting over an empty journal")
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, state+".journal") {
		t.Fatalf("removal of the empty journal not logged at WARN:\n%s", out)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("no snapshot written for the new world: %v", err)
	}
}

// TestMetadataTokenBound: an instance holding 4,096 live tokens is refused
// another with 429 until some expire; other instances are not affected.
// Before, every PUT was answered and the tokens lived for their whole TTL.
func TestMetadataTokenBound(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.Clock = clk }))
	put := func(inst, ttl string) (int, string) {
		r := httptest.NewRequest(http.MethodPut, "/latest/api/token", nil)
		r.Header.Set("X-aliyun-ecs-metadata-token-ttl-seconds", ttl)
		w := httptest.NewRecorder()
		e.cloud.MetadataHandler(inst).ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	const bound = 4096 // documented in fakecloud/README.md
	var first string
	for i := range bound {
		st, tok := put(node1, "1")
		if st != http.StatusOK {
			t.Fatalf("token %d of %d: %d %s", i+1, bound, st, tok)
		}
		if i == 0 {
			first = tok
		}
	}
	if st, body := put(node1, "1"); st != http.StatusTooManyRequests {
		t.Fatalf("token over the bound: %d %s", st, body)
	}
	if st, _ := put(node2, "60"); st != http.StatusOK {
		t.Fatalf("another instance refused because of node1's tokens: %d", st)
	}
	clk.Step(2 * time.Second)
	st, tok := put(node1, "60")
	if st != http.StatusOK || tok == "" {
		t.Fatalf("token after the old ones expired: %d %q", st, tok)
	}
	get := func(tok string) int {
		r := httptest.NewRequest(http.MethodGet, "/latest/meta-data/instance-id", nil)
		r.Header.Set("X-aliyun-ecs-metadata-token", tok)
		w := httptest.NewRecorder()
		e.cloud.MetadataHandler(node1).ServeHTTP(w, r)
		return w.Code
	}
	if st := get(first); st != http.StatusUnauthorized {
		t.Fatalf("expired token answered %d", st)
	}
	if st := get(tok); st != http.StatusOK {
		t.Fatalf("fresh token answered %d", st)
	}
}

// TestServerTimeouts: a listener built by NewHTTPServer cuts a client that
// trickles its body off after the read timeout, closes an idle keep-alive
// connection after the idle timeout, and still lets a call that takes
// longer than both (injected latency) answer.
func TestServerTimeouts(t *testing.T) {
	e := newEnv(t)
	const read, idle = 300 * time.Millisecond, 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := fakecloud.NewHTTPServer(e.cloud, fakecloud.ServerTimeouts{ReadHeader: time.Second, Read: read, Idle: idle}, nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	// closedWithin reads c until the server closes it and reports how long
	// that took (failing after limit).
	closedWithin := func(c net.Conn, limit time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		_ = c.SetReadDeadline(start.Add(limit))
		_, err := io.Copy(io.Discard, c)
		// A server that closes with unread bytes in its buffer (the slow
		// body's) makes the kernel answer with a reset: closed all the same.
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection still open after %v: %v", limit, err)
		}
		return time.Since(start)
	}

	// A body of 1,000 bytes sent one byte per 50 ms would take 50 s.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := io.WriteString(slow, "POST / HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := slow.Write([]byte("a")); err != nil {
				return
			}
		}
	}()
	if d := closedWithin(slow, 5*time.Second); d < read/2 {
		t.Fatalf("slow body cut after %v, before the read timeout %v", d, read)
	}

	// An idle keep-alive connection is closed after its first answer.
	keep, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	if _, err := io.WriteString(keep, "GET /fakecloud/healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(keep), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	closedWithin(keep, 5*time.Second)

	// A call slower than both timeouts still answers: there is no write
	// timeout, and the read timeout stops counting once the body is read.
	if _, err := e.cloud.AddFault(fakecloud.Fault{Name: "slow", Kind: "latency", Action: "DescribeInstances", Latency: fakecloud.Duration(800 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	p := signedParams("DescribeInstances", nil, time.Now(), testSecret)
	r, err := http.Post("http://"+addr+"/?"+p.Encode(), "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatalf("slow call: %v", err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("slow call answered %d", r.StatusCode)
	}
}

// TestENIParameterLimits: values ECS refuses are refused with its codes
// and change nothing; before, each was answered 200 and stored (a 200 KB
// name went into state, journal and every Describe answer).
func TestENIParameterLimits(t *testing.T) {
	state := filepath.Join(t.TempDir(), "world.json")
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.StatePath = state }))
	create := func(extra url.Values) (int, map[string]any) {
		biz := url.Values{"VSwitchId": {vsw1}, "SecurityGroupId": {fakecloud.DefaultSecurityGroup}}
		for k, v := range extra {
			biz[k] = v
		}
		return e.post(t, signedParams("CreateNetworkInterface", biz, time.Now(), testSecret))
	}
	enis := func() int { return len(e.cloud.World().ENIs) }
	before := enis()
	huge := "a" + strings.Repeat("b", 200<<10)
	refused := []struct {
		name   string
		params url.Values
		status int
		code   string
	}{
		{"QueueNumber -1", url.Values{"QueueNumber": {"-1"}}, 403, fakecloud.CodeInvalidQueueNumber},
		{"QueueNumber 0", url.Values{"QueueNumber": {"0"}}, 403, fakecloud.CodeInvalidQueueNumber},
		{"QueueNumber 2049", url.Values{"QueueNumber": {"2049"}}, 403, fakecloud.CodeInvalidQueueNumber},
		{"200 KB name", url.Values{"NetworkInterfaceName": {huge}}, 400, fakecloud.CodeInvalidParameter},
		{"1-character name", url.Values{"NetworkInterfaceName": {"a"}}, 400, fakecloud.CodeInvalidParameter},
		{"129-character name", url.Values{"NetworkInterfaceName": {"a" + strings.Repeat("b", 128)}}, 400, fakecloud.CodeInvalidParameter},
		{"name starting with a digit", url.Values{"NetworkInterfaceName": {"1eni"}}, 400, fakecloud.CodeInvalidParameter},
		{"name with a space", url.Values{"NetworkInterfaceName": {"my eni"}}, 400, fakecloud.CodeInvalidParameter},
		{"name starting http://", url.Values{"NetworkInterfaceName": {"http://x"}}, 400, fakecloud.CodeInvalidParameter},
		{"1-character description", url.Values{"Description": {"x"}}, 400, fakecloud.CodeDescriptionMalformed},
		{"257-character description", url.Values{"Description": {strings.Repeat("d", 257)}}, 400, fakecloud.CodeDescriptionMalformed},
		{"description starting https://", url.Values{"Description": {"https://example.com/eni"}}, 400, fakecloud.CodeDescriptionMalformed},
		{"200 KB resource group", url.Values{"ResourceGroupId": {huge}}, 404, "InvalidResourceGroup.NotFound"},
	}
	for _, tc := range refused {
		st, body := create(tc.params)
		if st != tc.status || body["Code"] != tc.code {
			t.Errorf("%s: %d %v, want %d %s", tc.name, st, body["Code"], tc.status, tc.code)
		}
		if msg, _ := body["Message"].(string); len(msg) > 1024 {
			t.Errorf("%s: the message echoes the value (%d bytes)", tc.name, len(msg))
		}
	}
	if n := enis(); n != before {
		t.Fatalf("refused creates left %d ENIs, want %d", n, before)
	}
	if fi, err := os.Stat(state + ".journal"); err != nil || fi.Size() > 64<<10 {
		t.Fatalf("journal after refused creates: %v, %v", fi, err)
	}

	// The limits themselves, and what real clients send, are accepted.
	accepted := []url.Values{
		{"QueueNumber": {"1"}, "NetworkInterfaceName": {"ab"}, "Description": {"dd"}},
		{"QueueNumber": {"2048"}, "NetworkInterfaceName": {"a" + strings.Repeat("b", 127)}, "Description": {strings.Repeat("d", 256)}},
		{"NetworkInterfaceName": {"eni-cni_abc:1.2"}, "Description": {"interface create by terway"}, "ResourceGroupId": {"rg-acfmxazb4ph6aiy"}},
		{"NetworkInterfaceName": {"网卡名"}, "Description": {"弹性网卡 a*b~c+d/e"}},
	}
	var id string
	for _, p := range accepted {
		st, body := create(p)
		if st != http.StatusOK {
			t.Fatalf("create with %v: %d %v", p, st, body)
		}
		id, _ = body["NetworkInterfaceId"].(string)
	}

	// ModifyNetworkInterfaceAttribute applies the same limits and keeps
	// the old values when it refuses.
	modify := func(extra url.Values) (int, map[string]any) {
		biz := url.Values{"NetworkInterfaceId": {id}}
		for k, v := range extra {
			biz[k] = v
		}
		return e.post(t, signedParams("ModifyNetworkInterfaceAttribute", biz, time.Now(), testSecret))
	}
	if st, body := modify(url.Values{"NetworkInterfaceName": {huge}}); st != 400 || body["Code"] != fakecloud.CodeInvalidParameter {
		t.Errorf("modify with a 200 KB name: %d %v", st, body["Code"])
	}
	if st, body := modify(url.Values{"QueueNumber": {"-1"}}); st != 403 || body["Code"] != fakecloud.CodeInvalidQueueNumber {
		t.Errorf("modify QueueNumber -1: %d %v", st, body["Code"])
	}
	st, body := e.post(t, signedParams("DescribeNetworkInterfaceAttribute", url.Values{"NetworkInterfaceId": {id}}, time.Now(), testSecret))
	if st != http.StatusOK || body["NetworkInterfaceName"] != "网卡名" {
		t.Errorf("name after refused modifies: %d %v", st, body["NetworkInterfaceName"])
	}
}

// TestDescribeInstancesRefusesMalformedLists: entries DescribeInstances
// cannot match against are InvalidParameter, not an empty 200 answer.
func TestDescribeInstancesRefusesMalformedLists(t *testing.T) {
	e := newEnv(t)
	describe := func(k, v string) (int, map[string]any) {
		return e.post(t, signedParams("DescribeInstances", url.Values{k: {v}}, time.Now(), testSecret))
	}
	for _, tc := range []struct{ k, v string }{
		{"PrivateIpAddresses", `["not-an-ip"]`},
		{"PrivateIpAddresses", `["192.168.0.1", "192.168.0.300"]`},
		{"PrivateIpAddresses", `[null]`},
		{"InstanceIds", `[null]`},
		{"InstanceIds", `[""]`},
		{"InstanceIds", `["` + node1 + `", null]`},
		{"InstanceIds", `{"not": "a list"}`},
	} {
		st, body := describe(tc.k, tc.v)
		wantError(t, st, body, 400, fakecloud.CodeInvalidParameter)
	}
	st, body := describe("InstanceIds", `["`+node1+`"]`)
	if st != http.StatusOK || len(listAt(t, body, "Instances.Instance")) != 1 {
		t.Fatalf("valid InstanceIds: %d %v", st, body)
	}
	in, ok := e.cloud.Instance(node1)
	if !ok || len(in.ENIs) == 0 {
		t.Fatalf("instance %s: %+v", node1, in)
	}
	st, body = describe("PrivateIpAddresses", `["`+in.ENIs[0].PrimaryIP.String()+`"]`)
	if st != http.StatusOK || len(listAt(t, body, "Instances.Instance")) != 1 {
		t.Fatalf("valid PrivateIpAddresses: %d %v", st, body)
	}
}
