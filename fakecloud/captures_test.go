package fakecloud_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/fakecloud"
)

// captureWorld matches the IDs of the exchanges captured in
// shared/reference/aliyun-wire.md §2.5, §4.3 and §5.3, with the keys they
// were signed with (the research program's emulator key, and its STS key).
const captureWorld = `
regionId: cn-hangzhou
zones: [cn-hangzhou-i]
accessKeys:
- {id: LTAIemulatorKey01, secret: emulatorSecret01}
- {id: STS.emuKey, secret: stsSecret, securityToken: CAIS-security-token, instanceId: i-emu0001}
vpcs: [{id: vpc-emu0001, cidr: 10.0.0.0/16}]
vswitches: [{id: vsw-emu0001, vpcId: vpc-emu0001, zoneId: cn-hangzhou-i, cidr: 10.0.1.0/24}]
securityGroups:
- {id: sg-emu0001, vpcId: vpc-emu0001}
- {id: sg-emu0002, vpcId: vpc-emu0001}
instances:
- {id: i-emu0001, instanceType: ecs.g7.xlarge, vswitchId: vsw-emu0001, securityGroupIds: [sg-emu0001], primaryIp: 10.0.1.5}
enis:
- {id: eni-emu0001, vswitchId: vsw-emu0001, securityGroupIds: [sg-emu0001], primaryIp: 10.0.1.10, tags: {owner: node-1}}
`

type capture struct {
	name    string
	uri     string
	headers map[string]string
	host    string
	at      string
	status  int
	code    string
	check   func(t *testing.T, body map[string]any)
}

var sdkHeaders = map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept-Encoding": "identity"}

// TestCapturedExchanges replays, byte for byte, the requests the real
// SDKs sent in the captures, each against a fresh world at the time it
// was signed. The captured responses held made-up values, so what is
// checked is that each request authenticates and is answered with the
// right shape or error.
func TestCapturedExchanges(t *testing.T) {
	lists := func(paths ...string) func(*testing.T, map[string]any) {
		return func(t *testing.T, body map[string]any) {
			t.Helper()
			for _, p := range paths {
				var v any = body
				for _, k := range strings.Split(p, ".") {
					m, ok := v.(map[string]any)
					if !ok {
						t.Fatalf("%s: %s is not an object in %v", p, k, body)
					}
					v = m[k]
				}
				if _, ok := v.([]any); !ok {
					t.Fatalf("%s is not a JSON array: %v", p, v)
				}
			}
		}
	}
	v3 := map[string]string{
		"Accept": "application/json", "X-Acs-Action": "CreateNetworkInterface", "X-Acs-Version": "2014-05-26",
		"X-Acs-Content-Sha256":       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"X-Acs-Credentials-Provider": "static_ak", "X-Acs-Date": "2026-11-29T17:26:18Z",
		"X-Acs-Signature-Nonce": "ea3d98d60334a9c55aebc38c3cbdc5df",
		"Authorization":         "ACS3-HMAC-SHA256 Credential=LTAIemulatorKey01,SignedHeaders=host;x-acs-action;x-acs-content-sha256;x-acs-credentials-provider;x-acs-date;x-acs-signature-nonce;x-acs-version,Signature=ea3ca6c86899ca0ff3674170baa702442eb1015894f7a86eb0e01c800a4197be",
	}
	v3err := map[string]string{
		"Accept": "application/json", "X-Acs-Action": "DeleteNetworkInterface", "X-Acs-Version": "2014-05-26",
		"X-Acs-Content-Sha256":       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"X-Acs-Credentials-Provider": "static_ak", "X-Acs-Date": "2026-11-29T17:26:18Z",
		"X-Acs-Signature-Nonce": "b5b80649ce469fc7b939bab28e145ead",
		"Authorization":         "ACS3-HMAC-SHA256 Credential=LTAIemulatorKey01,SignedHeaders=host;x-acs-action;x-acs-content-sha256;x-acs-credentials-provider;x-acs-date;x-acs-signature-nonce;x-acs-version,Signature=226a2a186242bd8c1b3536a19559439aa1110499ffae00ef46859d9d74b44c50",
	}
	caps := []capture{
		{name: "CreateNetworkInterface", at: "2026-11-29T17:29:59Z", status: 200, host: "127.0.0.1:46529", headers: sdkHeaders,
			uri: "/?AccessKeyId=LTAIemulatorKey01&Action=CreateNetworkInterface&ClientToken=token-123&DeleteOnRelease=true&Description=node+agent+eni%3A+a+b%2Ac~d&Format=JSON&PrivateIpAddress.1=10.0.1.11&PrivateIpAddress.2=10.0.1.12&RegionId=cn-hangzhou&SecondaryPrivateIpAddressCount=0&SecurityGroupIds.1=sg-emu0001&SecurityGroupIds.2=sg-emu0002&Signature=l6gIVs3qN7ATYw5259uRPnswNQg%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=3550a45c6d0e90ae68a9c3f9756ee0de&SignatureType=&SignatureVersion=1.0&Tag.1.Key=owner&Tag.1.Value=node-1&Tag.2.Key=k8s.io%2Fcluster&Tag.2.Value=c1&Timestamp=2026-11-29T17%3A29%3A59Z&VSwitchId=vsw-emu0001&Version=2014-05-26",
			check: func(t *testing.T, b map[string]any) {
				lists("PrivateIpSets.PrivateIpSet", "SecurityGroupIds.SecurityGroupId", "Tags.Tag", "Ipv6Sets.Ipv6Set")(t, b)
				ips := b["PrivateIpSets"].(map[string]any)["PrivateIpSet"].([]any)
				if len(ips) != 3 || ips[1].(map[string]any)["PrivateIpAddress"] != "10.0.1.11" || b["Description"] != "node agent eni: a b*c~d" {
					t.Fatalf("created: %v", b)
				}
			}},
		{name: "AssignPrivateIpAddresses list", at: "2026-11-29T17:29:59Z", status: 200, host: "127.0.0.1:46529", headers: sdkHeaders,
			uri: "/?AccessKeyId=LTAIemulatorKey01&Action=AssignPrivateIpAddresses&Format=JSON&NetworkInterfaceId=eni-emu0001&PrivateIpAddress.1=10.0.1.20&PrivateIpAddress.2=10.0.1.21&RegionId=cn-hangzhou&Signature=fT7RdABSaMztOL69G3Lvz5nzPLo%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=5c7e75d9d02def340869f113d122dff2&SignatureType=&SignatureVersion=1.0&Timestamp=2026-11-29T17%3A29%3A59Z&Version=2014-05-26",
			check: func(t *testing.T, b map[string]any) {
				lists("AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress")(t, b)
				got := b["AssignedPrivateIpAddressesSet"].(map[string]any)["PrivateIpSet"].(map[string]any)["PrivateIpAddress"].([]any)
				if len(got) != 2 || got[0] != "10.0.1.20" || got[1] != "10.0.1.21" {
					t.Fatalf("assigned %v", got)
				}
			}},
		{name: "AssignPrivateIpAddresses other region", at: "2026-11-29T17:29:59Z", status: 404, code: "InvalidRegionId.NotFound", host: "127.0.0.1:46529", headers: sdkHeaders,
			uri: "/?AccessKeyId=LTAIemulatorKey01&Action=AssignPrivateIpAddresses&Format=JSON&NetworkInterfaceId=eni-emu0001&RegionId=cn-beijing&SecondaryPrivateIpAddressCount=3&Signature=%2BL4k32TUTruWfd6c4gmSoy%2BE8cE%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=4c310241107620e4a317ac2d8fc5e9ec&SignatureType=&SignatureVersion=1.0&Timestamp=2026-11-29T17%3A29%3A59Z&Version=2014-05-26"},
		{name: "DescribeNetworkInterfaces", at: "2026-11-29T17:29:59Z", status: 200, host: "127.0.0.1:46529", headers: sdkHeaders,
			uri:   "/?AccessKeyId=LTAIemulatorKey01&Action=DescribeNetworkInterfaces&Format=JSON&InstanceId=i-emu0001&NetworkInterfaceId.1=eni-emu0001&NetworkInterfaceId.2=eni-emu0002&PageSize=100&RegionId=cn-hangzhou&Signature=gxewmcx7FpgHz%2BYKmcwgJZ2No%2Bk%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=98dc534f5dde319b0a665557718bce94&SignatureType=&SignatureVersion=1.0&Tag.1.Key=owner&Tag.1.Value=node-1&Timestamp=2026-11-29T17%3A29%3A59Z&Version=2014-05-26",
			check: lists("NetworkInterfaceSets.NetworkInterfaceSet")},
		{name: "DescribeInstanceTypes", at: "2026-11-29T17:29:59Z", status: 200, host: "127.0.0.1:46529", headers: sdkHeaders,
			uri: "/?AccessKeyId=LTAIemulatorKey01&Action=DescribeInstanceTypes&Format=JSON&InstanceTypes.1=ecs.g7.xlarge&InstanceTypes.2=ecs.g7.2xlarge&RegionId=cn-hangzhou&Signature=u%2F0%2FEQqOWccOsRnFNY1U81YjE0A%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=4adc2b590470d20af6a5336d2e29d17d&SignatureType=&SignatureVersion=1.0&Timestamp=2026-11-29T17%3A29%3A59Z&Version=2014-05-26",
			check: func(t *testing.T, b map[string]any) {
				lists("InstanceTypes.InstanceType")(t, b)
				if n := len(b["InstanceTypes"].(map[string]any)["InstanceType"].([]any)); n != 2 {
					t.Fatalf("%d types", n)
				}
			}},
		{name: "vpc DescribeVSwitches", at: "2026-11-29T17:29:59Z", status: 200, host: "127.0.0.1:46529", headers: sdkHeaders,
			uri: "/?AccessKeyId=LTAIemulatorKey01&Action=DescribeVSwitches&Format=JSON&RegionId=cn-hangzhou&Signature=86u%2Fn2wVfIIltPqBclUcKkOoG5A%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=a99eaea6fbcee55c37527657a0fb94fd&SignatureType=&SignatureVersion=1.0&Timestamp=2026-11-29T17%3A29%3A59Z&VSwitchId=vsw-emu0001&Version=2016-04-28&VpcId=vpc-emu0001",
			check: func(t *testing.T, b map[string]any) {
				lists("VSwitches.VSwitch")(t, b)
				v := b["VSwitches"].(map[string]any)["VSwitch"].([]any)[0].(map[string]any)
				if v["AvailableIpAddressCount"] != float64(252-2) || v["CidrBlock"] != "10.0.1.0/24" {
					t.Fatalf("vswitch %v", v)
				}
			}},
		{name: "STS DescribeNetworkInterfaces", at: "2026-11-29T17:29:59Z", status: 200, host: "127.0.0.1:46529", headers: sdkHeaders,
			uri:   "/?AccessKeyId=STS.emuKey&Action=DescribeNetworkInterfaces&Format=JSON&RegionId=cn-hangzhou&SecurityToken=CAIS-security-token&Signature=J9I8gM2Wh%2F%2FQaVnOyPAOp%2Bk%2BAa8%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=4c225180baaa728e99023e7f93e5f75e&SignatureType=&SignatureVersion=1.0&Timestamp=2026-11-29T17%3A29%3A59Z&Version=2014-05-26",
			check: lists("NetworkInterfaceSets.NetworkInterfaceSet")},
		{name: "wrong secret", at: "2026-11-29T17:29:59Z", status: 400, code: "SignatureDoesNotMatch", host: "127.0.0.1:46529", headers: sdkHeaders,
			uri: "/?AccessKeyId=LTAIemulatorKey01&Action=DescribeNetworkInterfaces&Format=JSON&RegionId=cn-hangzhou&Signature=kFUE8u8fmhObCjyj2eNaZ11KmjA%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=16fae0b5b4f96057d7d688d05dafab69&SignatureType=&SignatureVersion=1.0&Timestamp=2026-11-29T17%3A29%3A59Z&Version=2014-05-26",
			check: func(t *testing.T, b map[string]any) {
				const sts = "server string to sign is:POST&%2F&AccessKeyId%3DLTAIemulatorKey01%26Action%3DDescribeNetworkInterfaces%26Format%3DJSON%26RegionId%3Dcn-hangzhou%26SignatureMethod%3DHMAC-SHA1%26SignatureNonce%3D16fae0b5b4f96057d7d688d05dafab69%26SignatureType%3D%26SignatureVersion%3D1.0%26Timestamp%3D2026-11-29T17%253A29%253A59Z%26Version%3D2014-05-26"
				if !strings.HasSuffix(b["Message"].(string), sts) {
					t.Fatalf("message %v", b["Message"])
				}
			}},
		{name: "unknown access key", at: "2026-11-29T17:29:59Z", status: 404, code: "InvalidAccessKeyId.NotFound", host: "127.0.0.1:46529", headers: sdkHeaders,
			uri: "/?AccessKeyId=LTAIunknown&Action=DescribeNetworkInterfaces&Format=JSON&RegionId=cn-hangzhou&Signature=0wE8RcLds6owxVo1cY6%2BIPebQR8%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=1b3af7bc3e1b6a9d4d3c0c111eff5711&SignatureType=&SignatureVersion=1.0&Timestamp=2026-11-29T17%3A29%3A59Z&Version=2014-05-26"},
		{name: "Tea ACS3 CreateNetworkInterface", at: "2026-11-29T17:26:18Z", status: 200, host: "127.0.0.1:39125", headers: v3,
			uri:   "/?ConnectionTrackingConfiguration.TcpEstablishedTimeout=910&PrivateIpAddress.1=10.0.1.11&RegionId=cn-hangzhou&SecurityGroupIds.1=sg-emu0001&SecurityGroupIds.2=sg-emu0002&Tag.1.Key=owner&Tag.1.Value=node-1&VSwitchId=vsw-emu0001",
			check: lists("PrivateIpSets.PrivateIpSet", "SecurityGroupIds.SecurityGroupId", "Tags.Tag")},
		{name: "Tea v2 CreateNetworkInterface", at: "2026-11-29T17:26:18Z", status: 200, host: "127.0.0.1:39125", headers: map[string]string{"Accept-Encoding": "gzip", "X-Acs-Action": "CreateNetworkInterface", "X-Acs-Version": "2014-05-26"},
			uri:   "/?AccessKeyId=LTAIemulatorKey01&Action=CreateNetworkInterface&ConnectionTrackingConfiguration.TcpEstablishedTimeout=910&Format=json&PrivateIpAddress.1=10.0.1.11&RegionId=cn-hangzhou&SecurityGroupIds.1=sg-emu0001&SecurityGroupIds.2=sg-emu0002&Signature=YHjoQFGWVyde%2BY5c%2FjbDuaEpo7Q%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=a23aa5dc6917b0f0a5e9144849b0a312&SignatureVersion=1.0&Tag.1.Key=owner&Tag.1.Value=node-1&Timestamp=2026-11-29T17%3A26%3A18Z&VSwitchId=vsw-emu0001&Version=2014-05-26",
			check: lists("PrivateIpSets.PrivateIpSet")},
		{name: "Tea ACS3 error", at: "2026-11-29T17:26:18Z", status: 404, code: "InvalidEniId.NotFound", host: "127.0.0.1:39125", headers: v3err,
			uri: "/?NetworkInterfaceId=eni-x&RegionId=cn-hangzhou"},
		{name: "ECS RAM role call", at: "2026-11-29T17:25:42Z", status: 200, host: "127.0.0.1:46529", headers: sdkHeaders,
			uri:   "/?AccessKeyId=STS.emuKey&Action=DescribeNetworkInterfaces&Format=JSON&RegionId=cn-hangzhou&SecurityToken=CAIS-security-token&Signature=dh4b8dEy%2BjaypWGoe9TTYPKZQp8%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=fe7cb48576289cef7ada1085cf85bccb&SignatureType=&SignatureVersion=1.0&Timestamp=2026-11-29T17%3A25%3A42Z&Version=2014-05-26",
			check: lists("NetworkInterfaceSets.NetworkInterfaceSet")},
	}
	spec, err := fakecloud.ParseSpec([]byte(captureWorld))
	if err != nil {
		t.Fatal(err)
	}
	spec.Settings.ConsistencyWindow = 0
	for _, cp := range caps {
		t.Run(cp.name, func(t *testing.T) {
			at, _ := time.Parse(time.RFC3339, cp.at)
			s := spec
			c, err := fakecloud.New(fakecloud.Options{Spec: &s, Clock: clocktesting.NewFakeClock(at.Add(30 * time.Second))})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := httptest.NewRequest(http.MethodPost, cp.uri, nil)
			r.Host = cp.host
			for k, v := range cp.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			c.ServeHTTP(w, r)
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("answer is not JSON: %s", w.Body)
			}
			if w.Code != cp.status || (cp.code != "" && body["Code"] != cp.code) {
				t.Fatalf("got %d %v, want %d %s: %s", w.Code, body["Code"], cp.status, cp.code, w.Body)
			}
			if w.Header().Get("Content-Type") != "application/json;charset=utf-8" || w.Header().Get("X-Acs-Request-Id") == "" {
				t.Fatalf("headers: %v", w.Header())
			}
			if cp.check != nil {
				cp.check(t, body)
			}
		})
	}
}
