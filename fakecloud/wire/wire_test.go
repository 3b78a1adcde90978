package wire

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
)

// refSign is an independent implementation of signature v1 as
// aliyun-wire.md §2.4 states it, used to cross-check the server side.
func refSign(method string, p url.Values, secret string) (sts, sig string) {
	pct := func(s string) string {
		return strings.NewReplacer("+", "%20", "*", "%2A", "%7E", "~").Replace(url.QueryEscape(s))
	}
	var keys []string
	for k := range p {
		if k != "Signature" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		for _, v := range p[k] {
			parts = append(parts, pct(k)+"="+pct(v))
		}
	}
	sts = method + "&" + pct("/") + "&" + pct(strings.Join(parts, "&"))
	m := hmac.New(sha1.New, []byte(secret+"&"))
	m.Write([]byte(sts))
	return sts, base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func v1Request(t testing.TB, p url.Values) *Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/?"+p.Encode(), nil)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req, err := ParseRequest(r)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return req
}

// TestSignatureVector replays the test vector of aliyun-wire.md §2.4.
func TestSignatureVector(t *testing.T) {
	p := url.Values{}
	for k, v := range map[string]string{
		"AccessKeyId": "testid", "Action": "AssignPrivateIpAddresses", "Format": "JSON", "NetworkInterfaceId": "eni-1",
		"PrivateIpAddress.1": "10.0.0.2", "PrivateIpAddress.2": "10.0.0.3", "RegionId": "cn-hangzhou",
		"SignatureMethod": "HMAC-SHA1", "SignatureNonce": "0123456789abcdef0123456789abcdef", "SignatureType": "",
		"SignatureVersion": "1.0", "Timestamp": "2024-01-01T00:00:00Z", "Version": "2014-05-26",
	} {
		p.Set(k, v)
	}
	const wantSTS = "POST&%2F&AccessKeyId%3Dtestid%26Action%3DAssignPrivateIpAddresses%26Format%3DJSON%26NetworkInterfaceId%3Deni-1%26PrivateIpAddress.1%3D10.0.0.2%26PrivateIpAddress.2%3D10.0.0.3%26RegionId%3Dcn-hangzhou%26SignatureMethod%3DHMAC-SHA1%26SignatureNonce%3D0123456789abcdef0123456789abcdef%26SignatureType%3D%26SignatureVersion%3D1.0%26Timestamp%3D2024-01-01T00%253A00%253A00Z%26Version%3D2014-05-26"
	const wantSig = "Qu6BDnqK2f8zoKHN4rOsuZrIsiA="
	p.Set("Signature", wantSig)
	req := v1Request(t, p)
	if got := req.StringToSign(); got != wantSTS {
		t.Fatalf("string to sign:\n got %s\nwant %s", got, wantSTS)
	}
	if err := req.CheckComplete(); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := req.Verify("testsecret"); err != nil {
		t.Fatalf("verify: %v", err)
	}
	err := req.Verify("wrongsecret")
	if e := AsError(err); e.Code != "SignatureDoesNotMatch" || e.Status != 400 ||
		!strings.Contains(e.Message, "server string to sign is:"+wantSTS) {
		t.Fatalf("wrong secret: %v", err)
	}
	if req.Action != "AssignPrivateIpAddresses" || req.Version != "2014-05-26" || req.AccessKeyID != "testid" ||
		!req.Timestamp.Equal(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("parsed fields: %+v", req)
	}
	if got := req.Params.List("PrivateIpAddress"); len(got) != 2 || got[1] != "10.0.0.3" {
		t.Fatalf("list: %v", got)
	}
}

// TestCapturedRequestV1 replays the CreateNetworkInterface request of
// aliyun-wire.md §2.5 byte for byte; its secret is unknown, so the check
// is that our string to sign round-trips the reference algorithm and the
// parameter decoding sees every field.
func TestCapturedRequestV1(t *testing.T) {
	const raw = "/?AccessKeyId=LTAIemulatorKey01&Action=CreateNetworkInterface&ClientToken=token-123&DeleteOnRelease=true&Description=node+agent+eni%3A+a+b%2Ac~d&Format=JSON&PrivateIpAddress.1=10.0.1.11&PrivateIpAddress.2=10.0.1.12&RegionId=cn-hangzhou&SecondaryPrivateIpAddressCount=0&SecurityGroupIds.1=sg-emu0001&SecurityGroupIds.2=sg-emu0002&Signature=l6gIVs3qN7ATYw5259uRPnswNQg%3D&SignatureMethod=HMAC-SHA1&SignatureNonce=3550a45c6d0e90ae68a9c3f9756ee0de&SignatureType=&SignatureVersion=1.0&Tag.1.Key=owner&Tag.1.Value=node-1&Tag.2.Key=k8s.io%2Fcluster&Tag.2.Value=c1&Timestamp=2026-11-29T17%3A29%3A59Z&VSwitchId=vsw-emu0001&Version=2014-05-26"
	r := httptest.NewRequest(http.MethodPost, raw, nil)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req, err := ParseRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := req.CheckComplete(); err != nil {
		t.Fatalf("complete: %v", err)
	}
	p := req.Params
	if p.String("Description") != "node agent eni: a b*c~d" {
		t.Fatalf("description decoded as %q", p.String("Description"))
	}
	if got := p.List("SecurityGroupIds"); len(got) != 2 || got[0] != "sg-emu0001" {
		t.Fatalf("security groups: %v", got)
	}
	tags := p.Tags("Tag")
	if len(tags) != 2 || tags[1].Key != "k8s.io/cluster" || tags[1].Value != "c1" {
		t.Fatalf("tags: %+v", tags)
	}
	if n, _ := p.Int("SecondaryPrivateIpAddressCount", -1); n != 0 || !p.Has("SignatureType") {
		t.Fatalf("zero count and empty SignatureType must be kept: %d %v", n, p.Has("SignatureType"))
	}
	wantSTS, _ := refSign(http.MethodPost, req.Params.Values(), "")
	if got := req.StringToSign(); got != wantSTS {
		t.Fatalf("string to sign differs from the reference:\n got %s\nwant %s", got, wantSTS)
	}
	if err := req.Verify("not-the-secret"); AsError(err).Code != "SignatureDoesNotMatch" {
		t.Fatalf("a guessed secret verified: %v", err)
	}
}

// TestCapturedRequestV3 replays the shape of the Tea SDK's ACS3 request
// of aliyun-wire.md §5.3 signed with a known secret.
func TestCapturedRequestV3(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/?ConnectionTrackingConfiguration.TcpEstablishedTimeout=910&PrivateIpAddress.1=10.0.1.11&RegionId=cn-hangzhou&SecurityGroupIds.1=sg-emu0001&SecurityGroupIds.2=sg-emu0002&Tag.1.Key=owner&Tag.1.Value=node-1&VSwitchId=vsw-emu0001", nil)
	r.Host = "127.0.0.1:39125"
	for k, v := range map[string]string{
		"Accept": "application/json", "X-Acs-Action": "CreateNetworkInterface", "X-Acs-Version": "2014-05-26",
		"X-Acs-Content-Sha256":       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"X-Acs-Credentials-Provider": "static_ak", "X-Acs-Date": "2026-11-29T17:26:18Z",
		"X-Acs-Signature-Nonce": "ea3d98d60334a9c55aebc38c3cbdc5df",
	} {
		r.Header.Set(k, v)
	}
	signed := "host;x-acs-action;x-acs-content-sha256;x-acs-credentials-provider;x-acs-date;x-acs-signature-nonce;x-acs-version"
	r.Header.Set("Authorization", "ACS3-HMAC-SHA256 Credential=LTAIemulatorKey01,SignedHeaders="+signed+",Signature=00")
	req, err := ParseRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if req.Scheme != SchemeV3 || req.Action != "CreateNetworkInterface" || req.AccessKeyID != "LTAIemulatorKey01" {
		t.Fatalf("parsed: %+v", req)
	}
	if err := req.CheckComplete(); err != nil {
		t.Fatalf("complete: %v", err)
	}
	wantCanonical := "POST\n/\nConnectionTrackingConfiguration.TcpEstablishedTimeout=910&PrivateIpAddress.1=10.0.1.11&RegionId=cn-hangzhou&SecurityGroupIds.1=sg-emu0001&SecurityGroupIds.2=sg-emu0002&Tag.1.Key=owner&Tag.1.Value=node-1&VSwitchId=vsw-emu0001\n" +
		"host:127.0.0.1:39125\nx-acs-action:CreateNetworkInterface\nx-acs-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\nx-acs-credentials-provider:static_ak\nx-acs-date:2026-11-29T17:26:18Z\nx-acs-signature-nonce:ea3d98d60334a9c55aebc38c3cbdc5df\nx-acs-version:2014-05-26\n\n" +
		signed + "\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if got := req.canonicalRequestV3(); got != wantCanonical {
		t.Fatalf("canonical request:\n got %q\nwant %q", got, wantCanonical)
	}
	if AsError(req.Verify("secret")).Code != "SignatureDoesNotMatch" {
		t.Fatal("a bogus signature verified")
	}
	// An unsigned action header would let the action be swapped in flight.
	r.Header.Set("Authorization", "ACS3-HMAC-SHA256 Credential=LTAIemulatorKey01,SignedHeaders=host;x-acs-date,Signature=00")
	req, _ = ParseRequest(r)
	if AsError(req.CheckComplete()).Code != "IncompleteSignature" {
		t.Fatal("unsigned x-acs-action accepted")
	}
}

func TestMissingSigningParameters(t *testing.T) {
	base := url.Values{"AccessKeyId": {"a"}, "Action": {"X"}, "Signature": {"s"}, "SignatureNonce": {"n"},
		"Timestamp": {"2024-01-01T00:00:00Z"}, "SignatureMethod": {"HMAC-SHA1"}, "SignatureVersion": {"1.0"}}
	cases := map[string]string{
		"AccessKeyId": "MissingAccessKeyId", "Signature": "MissingSignature", "SignatureNonce": "MissingSignatureNonce",
		"Timestamp": "MissingTimestamp", "SignatureMethod": "InvalidSignatureMethod", "SignatureVersion": "InvalidSignatureVersion",
	}
	for drop, want := range cases {
		p := url.Values{}
		for k, v := range base {
			if k != drop {
				p[k] = v
			}
		}
		if got := AsError(v1Request(t, p).CheckComplete()).Code; got != want {
			t.Errorf("without %s: %s, want %s", drop, got, want)
		}
	}
	p := url.Values{}
	for k, v := range base {
		p[k] = v
	}
	p.Set("Timestamp", "yesterday")
	if got := AsError(v1Request(t, p).CheckComplete()).Code; got != "InvalidTimeStamp.Format" {
		t.Errorf("bad timestamp: %s", got)
	}
	p.Set("Timestamp", "2024-01-01T00:00:00Z")
	req := v1Request(t, p)
	now := time.Date(2024, 1, 1, 0, 16, 0, 0, time.UTC)
	if got := AsError(req.CheckTime(now, 15*time.Minute)).Code; got != "InvalidTimeStamp.Expired" {
		t.Errorf("16 minutes late: %s", got)
	}
	if err := req.CheckTime(now.Add(-2*time.Minute), 15*time.Minute); err != nil {
		t.Errorf("14 minutes late: %v", err)
	}
}

func TestFormBodyMerged(t *testing.T) {
	p := url.Values{"Action": {"A"}, "Extra": {"from body"}}
	r := httptest.NewRequest(http.MethodPost, "/?Action=A&Version=2016-04-28", strings.NewReader("Extra=from+body"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req, err := ParseRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if req.Params.String("Extra") != p.Get("Extra") {
		t.Fatalf("form body not merged: %v", req.Params.Values())
	}
	big := strings.NewReader(strings.Repeat("a", MaxBodyBytes+1))
	r = httptest.NewRequest(http.MethodPost, "/", big)
	if _, err := ParseRequest(r); AsError(err).Status != 400 {
		t.Fatalf("oversized body: %v", err)
	}
}

func TestPercentEncodeMatchesReference(t *testing.T) {
	ref := func(s string) string { return pctReplacer.Replace(url.QueryEscape(s)) }
	for _, s := range []string{"", "abc", "a b*c~d+e/f", "中文", "%zz", "\x00\xff", "k8s.io/cluster=x&y", "~-_."} {
		if got, want := percentEncode(s), ref(s); got != want {
			t.Errorf("percentEncode(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestDoubleEncodedMatchesTwoPasses(t *testing.T) {
	for _, s := range []string{"", "abc", "a b*c~d+e/f", "中文", "%zz", "\x00\xff", "2024-01-01T00:00:00Z"} {
		if got, want := string(appendDoubleEncoded(nil, s)), percentEncode(percentEncode(s)); got != want {
			t.Errorf("appendDoubleEncoded(%q) = %q, want %q", s, got, want)
		}
	}
}
