package fakecloud_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
)

var (
	nonceSeq    atomic.Int64
	pctReplacer = strings.NewReplacer("+", "%20", "*", "%2A", "%7E", "~")
)

// signedParams returns the common parameters of an ECS call signed with
// the test key at time ts (signature v1, aliyun-wire.md §2.4).
func signedParams(action string, biz url.Values, ts time.Time, secret string) url.Values {
	p := url.Values{}
	for k, v := range biz {
		p[k] = v
	}
	p.Set("Action", action)
	if p.Get("Version") == "" {
		p.Set("Version", fakecloud.ECSVersion)
	}
	p.Set("AccessKeyId", testAK)
	p.Set("Format", "JSON")
	p.Set("RegionId", fakecloud.DefaultRegion)
	p.Set("SignatureMethod", "HMAC-SHA1")
	p.Set("SignatureVersion", "1.0")
	p.Set("SignatureType", "")
	p.Set("SignatureNonce", fmt.Sprintf("nonce-%d-%d", time.Now().UnixNano(), nonceSeq.Add(1)))
	p.Set("Timestamp", ts.UTC().Format("2006-01-02T15:04:05Z"))
	pct := func(s string) string { return pctReplacer.Replace(url.QueryEscape(s)) }
	var keys []string
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, pct(k)+"="+pct(p.Get(k)))
	}
	m := hmac.New(sha1.New, []byte(secret+"&"))
	m.Write([]byte("POST&%2F&" + pct(strings.Join(parts, "&"))))
	p.Set("Signature", base64.StdEncoding.EncodeToString(m.Sum(nil)))
	return p
}

// post sends raw query parameters and returns the status and JSON body.
func (e *env) post(t *testing.T, p url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(e.srv.URL+"/?"+p.Encode(), "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("non-JSON answer %d: %s", resp.StatusCode, b)
	}
	if resp.Header.Get("X-Acs-Request-Id") == "" || body["RequestId"] != resp.Header.Get("X-Acs-Request-Id") {
		t.Fatalf("request id header %q and body %v differ", resp.Header.Get("X-Acs-Request-Id"), body["RequestId"])
	}
	return resp.StatusCode, body
}

func wantError(t *testing.T, gotStatus int, body map[string]any, wantStatus int, wantCode string) {
	t.Helper()
	if gotStatus != wantStatus || body["Code"] != wantCode {
		t.Fatalf("got %d %v, want %d %s (body %v)", gotStatus, body["Code"], wantStatus, wantCode, body)
	}
	for _, k := range []string{"RequestId", "HostId", "Message", "Recommend"} {
		if s, _ := body[k].(string); s == "" {
			t.Fatalf("error body lacks %s: %v", k, body)
		}
	}
}

func TestGatewayErrors(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	st, body := e.post(t, signedParams("DescribeNetworkInterfaces", nil, now, testSecret))
	if st != 200 {
		t.Fatalf("baseline call: %d %v", st, body)
	}
	// signed returns a well-signed call to action, changed by edits after
	// signing.
	signed := func(action string, biz url.Values, edits ...func(url.Values)) func(*testing.T) url.Values {
		return func(*testing.T) url.Values {
			p := signedParams(action, biz, now, testSecret)
			for _, edit := range edits {
				edit(p)
			}
			return p
		}
	}
	del := func(key string) func(url.Values) { return func(p url.Values) { p.Del(key) } }
	set := func(key, v string) func(url.Values) { return func(p url.Values) { p.Set(key, v) } }
	cases := []struct {
		name   string
		params func(*testing.T) url.Values
		status int
		code   string
		inMsg  string // what the message must hold, if anything
	}{
		{"unknown action", signed("DescribeUnicorns", nil), 404, "InvalidApi.NotFound", ""},
		{"ECS action with the VPC version", signed("CreateNetworkInterface", url.Values{"Version": {fakecloud.VPCVersion}}),
			404, "InvalidApi.NotFound", ""},
		{"missing action", signed("X", nil, del("Action")), 400, "MissingParameter", ""},
		{"expired timestamp", func(*testing.T) url.Values {
			return signedParams("DescribeNetworkInterfaces", nil, now.Add(-16*time.Minute), testSecret)
		}, 400, "InvalidTimeStamp.Expired", ""},
		{"timestamp from the future", func(*testing.T) url.Values {
			return signedParams("DescribeNetworkInterfaces", nil, now.Add(16*time.Minute), testSecret)
		}, 400, "InvalidTimeStamp.Expired", ""},
		{"nonce reuse", func(t *testing.T) url.Values {
			p := signedParams("DescribeNetworkInterfaces", nil, now, testSecret)
			if st, body := e.post(t, p); st != 200 {
				t.Fatalf("first use: %d %v", st, body)
			}
			return p
		}, 400, "SignatureNonceUsed", ""},
		{"wrong secret", func(*testing.T) url.Values {
			return signedParams("DescribeNetworkInterfaces", nil, now, "not-the-secret")
		}, 400, "SignatureDoesNotMatch", "server string to sign is:POST&%2F&"},
		{"tampered parameter", signed("DescribeNetworkInterfaces", url.Values{"VpcId": {"vpc-a"}}, set("VpcId", "vpc-b")),
			400, "SignatureDoesNotMatch", ""},
		{"unknown access key", signed("DescribeNetworkInterfaces", nil, set("AccessKeyId", "LTAIunknown")),
			404, "InvalidAccessKeyId.NotFound", ""},
		{"unsigned", signed("DescribeNetworkInterfaces", nil, del("Signature")), 400, "MissingSignature", ""},
		{"missing business parameter", signed("CreateNetworkInterface", url.Values{"SecurityGroupId": {sg}}),
			400, "MissingParameter", "VSwitchId"},
		{"invalid business parameter", signed("CreateNetworkInterface", url.Values{"VSwitchId": {vsw1}, "SecurityGroupId": {sg},
			"SecondaryPrivateIpAddressCount": {"many"}}), 400, "InvalidParameter", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, body := e.post(t, c.params(t))
			wantError(t, st, body, c.status, c.code)
			if msg, _ := body["Message"].(string); !strings.Contains(msg, c.inMsg) {
				t.Fatalf("message lacks %q: %v", c.inMsg, body["Message"])
			}
		})
	}
	t.Run("unknown path", func(t *testing.T) {
		resp, err := http.Get(e.srv.URL + "/api/v1/pods")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("unknown path answered %d", resp.StatusCode)
		}
	})
}

// TestSDKWrongSecretHint checks the shape the old SDK relies on to tell a
// wrong secret from a signing bug.
func TestSDKWrongSecretHint(t *testing.T) {
	e := newEnv(t)
	c := e.ecsWith(credentials.NewAccessKeyCredential(testAK, "wrong"))
	_, err := c.DescribeNetworkInterfaces(ecs.CreateDescribeNetworkInterfacesRequest())
	var se *sdkerrors.ServerError
	if !errors.As(err, &se) || se.ErrorCode() != "SignatureDoesNotMatch" || !strings.Contains(se.Recommend(), "InvalidAccessKeySecret") {
		t.Fatalf("want the SDK's InvalidAccessKeySecret hint, got %v", err)
	}
	c = e.ecsWith(credentials.NewAccessKeyCredential("LTAIunknown", testSecret))
	_, err = c.DescribeNetworkInterfaces(ecs.CreateDescribeNetworkInterfacesRequest())
	if code(t, err) != "InvalidAccessKeyId.NotFound" || status(t, err) != 404 {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestENIErrorCodes(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	attach := func(eni, inst string) error {
		r := ecs.CreateAttachNetworkInterfaceRequest()
		r.NetworkInterfaceId, r.InstanceId = eni, inst
		_, err := c.AttachNetworkInterface(r)
		return err
	}
	detach := func(eni, inst string) error {
		r := ecs.CreateDetachNetworkInterfaceRequest()
		r.NetworkInterfaceId, r.InstanceId = eni, inst
		_, err := c.DetachNetworkInterface(r)
		return err
	}
	// fresh creates an Available ENI in vsw; primary names node1's
	// primary ENI.
	fresh := func(vsw string) string { return createENI(t, c, vsw, nil).NetworkInterfaceId }
	primary := func() string { in, _ := e.cloud.Instance(node1); return in.ENIs[0].ID }
	create := func(vsw, group string) error {
		r := ecs.CreateCreateNetworkInterfaceRequest()
		r.VSwitchId, r.SecurityGroupId = vsw, group
		_, err := c.CreateNetworkInterface(r)
		return err
	}
	cases := []struct {
		name   string
		err    func() error
		status int
		code   string
	}{
		{"attach unknown ENI", func() error { return attach("eni-bp1nothere", node1) }, 404, "InvalidEniId.NotFound"},
		{"attach to unknown instance", func() error { return attach(fresh(vsw1), "i-bp1nothere") }, 404, "InvalidEcsId.NotFound"},
		{"attach across zones", func() error { return attach(fresh(vsw2), node1) }, 403, "InvalidOperation.AvailabilityZoneMismatch"},
		{"detach a primary ENI", func() error { return detach(primary(), node1) }, 400, "InvalidOperation.DetachPrimaryEniNotAllowed"},
		{"detach an Available ENI", func() error { return detach(fresh(vsw1), node1) }, 400, "InvalidOperation.InvalidEniState"},
		{"delete a primary ENI", func() error {
			r := ecs.CreateDeleteNetworkInterfaceRequest()
			r.NetworkInterfaceId = primary()
			_, err := c.DeleteNetworkInterface(r)
			return err
		}, 403, "InvalidOperation.InvalidEniType"},
		{"create on unknown vSwitch", func() error { return create("vsw-bp1nothere", sg) }, 404, "InvalidVSwitchId.NotFound"},
		{"create with unknown security group", func() error { return create(vsw1, "sg-bp1nothere") }, 404, "InvalidSecurityGroupId.NotFound"},
		{"assign on unknown ENI", func() error { _, err := assignIPs(c, "eni-bp1nothere", 1); return err }, 404, "InvalidEniId.NotFound"},
		{"describe attribute of unknown ENI", func() error {
			r := ecs.CreateDescribeNetworkInterfaceAttributeRequest()
			r.NetworkInterfaceId = "eni-bp1nothere"
			_, err := c.DescribeNetworkInterfaceAttribute(r)
			return err
		}, 404, "InvalidEniId.NotFound"},
		{"describe unknown instance", func() error {
			r := ecs.CreateDescribeInstanceAttributeRequest()
			r.InstanceId = "i-bp1nothere"
			_, err := c.DescribeInstanceAttribute(r)
			return err
		}, 404, "InvalidInstanceId.NotFound"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if code(t, err) != tc.code || status(t, err) != tc.status {
				t.Fatalf("got %d %s (%v), want %d %s", status(t, err), code(t, err), err, tc.status, tc.code)
			}
		})
	}
}

func TestENIPerInstanceLimit(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	// ecs.g6.2xlarge: 4 ENIs including eth0.
	for i := 0; i < 3; i++ {
		attachedENI(t, c, vsw2, node2)
	}
	id := createENI(t, c, vsw2, nil).NetworkInterfaceId
	r := ecs.CreateAttachNetworkInterfaceRequest()
	r.NetworkInterfaceId, r.InstanceId = id, node2
	if _, err := c.AttachNetworkInterface(r); code(t, err) != "EniPerInstanceLimitExceeded" || status(t, err) != 403 {
		t.Fatalf("5th ENI: %v", err)
	}
}

// smallVSwitchWorld has one /29 vSwitch: 8 addresses, 4 reserved, so 4
// usable, one of which the instance's eth0 takes.
func smallVSwitchWorld(s *fakecloud.Spec) {
	s.VSwitches[0].CIDR = "192.168.0.0/29"
}

func TestVSwitchExhaustion(t *testing.T) {
	for _, want := range []string{"InvalidVSwitchId.IpNotEnough", "QuotaExceeded.PrivateIpAddress"} {
		t.Run(want, func(t *testing.T) {
			e := newEnv(t, withSpec(smallVSwitchWorld), withSettings(func(s *fakecloud.Settings) { s.ExhaustionCode = want }))
			c := e.ecs()
			created := createENI(t, c, vsw1, func(r *ecs.CreateNetworkInterfaceRequest) {
				r.SecondaryPrivateIpAddressCount = requests.NewInteger(1)
			})
			if _, err := assignIPs(c, created.NetworkInterfaceId, 2); code(t, err) != want || status(t, err) != 403 {
				t.Fatalf("assign beyond the vSwitch: %v", err)
			}
			try(assignIPs(c, created.NetworkInterfaceId, 1)).must(t)
			r := ecs.CreateCreateNetworkInterfaceRequest()
			r.VSwitchId, r.SecurityGroupId = vsw1, sg
			if _, err := c.CreateNetworkInterface(r); code(t, err) != want {
				t.Fatalf("create on a dry vSwitch: %v", err)
			}
			// Recovery: releasing addresses makes the vSwitch usable again.
			ips := describeENI(t, c, created.NetworkInterfaceId).PrivateIpSets.PrivateIpSet
			try(unassignIPs(c, created.NetworkInterfaceId, ips[1].PrivateIpAddress)).must(t)
			try(c.CreateNetworkInterface(r)).must(t)
		})
	}
}

func TestOperationConflict(t *testing.T) {
	// On a fake clock a delayed call stays in flight until the test steps
	// past its latency, so the calls below surely overlap.
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.Clock = clk }), withSettings(func(s *fakecloud.Settings) {
		s.AttachDelay = 0 // attach without a timer: only the latency's are stepped
	}))
	c := e.ecs()
	id := attachedENI(t, c, vsw1, node1)
	other := attachedENI(t, c, vsw1, node1)
	try(e.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultLatency, Action: "AssignPrivateIpAddresses",
		Latency: fakecloud.Duration(300 * time.Millisecond)})).must(t)
	delayed := func(eni string, n int) (chan error, func() bool) {
		done := make(chan error, 1)
		go func() { _, err := assignIPs(e.ecs(), eni, 1); done <- err }()
		return done, func() bool { return clk.Waiters() >= n }
	}
	first, inFlight := delayed(id, 1)
	testwait.Until(t, 5*time.Second, "first assign delayed", inFlight)
	_, err := assignIPs(e.ecs(), id, 1)
	if code(t, err) != "Operation.Conflict" || status(t, err) != 403 {
		t.Fatalf("assign overlapping another on the same ENI: %v", err)
	}
	// A different ENI is not busy: its call gets as far as the latency.
	second, inFlight := delayed(other, 2)
	testwait.Until(t, 5*time.Second, "assign on another ENI delayed", inFlight)
	clk.Step(300 * time.Millisecond)
	if err := <-first; err != nil {
		t.Fatalf("the first assign: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("assign on another ENI: %v", err)
	}
}
