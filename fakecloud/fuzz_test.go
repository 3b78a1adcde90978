package fakecloud_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terway-sim/terway/fakecloud"
)

// FuzzServeAPI sends arbitrary requests to a whole Cloud, twice: as given
// (invariants: no panic, and no 2xx answer without valid credentials on
// any path but the health check), and signed with the test world's
// AccessKey (signature v1 over the fuzzed parameters) so that the input
// reaches the action handlers (invariant: no 5xx answer; no fault is
// installed, so a 500 is a handler panic the server recovered).
func FuzzServeAPI(f *testing.F) {
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSecret}}
	fastSettings(&spec.Settings)
	// No budgets: a long run would otherwise spend its signed calls on
	// Throttling.User instead of the handlers.
	for k := range spec.Settings.Throttle {
		spec.Settings.Throttle[k] = 0
	}
	spec.Settings.Throttle["*"] = 0
	c, err := fakecloud.New(fakecloud.Options{Spec: &spec, AdminToken: adminToken})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	// The signed half is worthless if the signer is wrong: check once that
	// a signed call reaches its handler.
	w := httptest.NewRecorder()
	c.ServeHTTP(w, signedFuzzRequest("POST", "PageSize=1", "", "DescribeInstances"))
	if w.Code != http.StatusOK {
		f.Fatalf("signed DescribeInstances answered %d: %s", w.Code, w.Body.String())
	}
	f.Add("POST", "/", "Action=DescribeNetworkInterfaces&Version=2014-05-26&AccessKeyId="+testAK+"&Signature=x&SignatureNonce=1&Timestamp=2026-01-01T00:00:00Z&SignatureMethod=HMAC-SHA1&SignatureVersion=1.0", "", "", "")
	f.Add("POST", "/", "NetworkInterfaceId=eni-1", "", "ACS3-HMAC-SHA256 Credential="+testAK+",SignedHeaders=host;x-acs-action;x-acs-version;x-acs-date;x-acs-signature-nonce;x-acs-content-sha256,Signature=00", "DeleteNetworkInterface")
	f.Add("GET", "/latest/meta-data/instance-id", "", "", "", "")
	f.Add("PUT", "/latest/api/token", "", "", "", "")
	f.Add("GET", "/fakecloud/world", "", "", "Bearer nope", "")
	f.Add("POST", "/fakecloud/faults", "", `{"kind":"error"}`, "", "")
	// Issue 10: page arithmetic that overflowed in the six actions paging
	// by number (also in testdata/fuzz/FuzzServeAPI).
	for _, a := range []string{"DescribeNetworkInterfaces", "DescribeInstances"} {
		f.Add("POST", "/", "Version=2014-05-26&PageNumber=9223372036854775807", "", "", a)
	}
	for _, a := range []string{"DescribeVSwitches", "DescribeVpcs", "DescribeEipAddresses", "DescribeRouteTableList"} {
		f.Add("POST", "/", "Version=2016-04-28&PageNumber=4611686018427387904&PageSize=4", "", "", a)
	}
	f.Add("POST", "/", "VSwitchId="+vsw1+"&SecurityGroupId="+fakecloud.DefaultSecurityGroup+"&QueueNumber=-1&NetworkInterfaceName=x", "Description=y", "", "CreateNetworkInterface")
	f.Add("POST", "/", `InstanceIds=[null]&PrivateIpAddresses=["not-an-ip"]`, "", "", "DescribeInstances")
	f.Fuzz(func(t *testing.T, method, path, query, body, auth, action string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " ?#\r\n\x00") || strings.ContainsAny(method, " \r\n\x00/") || method == "" {
			return
		}
		r := httptest.NewRequest("GET", "/", strings.NewReader(body))
		r.Method = method
		r.URL.Path = path
		r.URL.RawQuery = query
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		if action != "" {
			r.Header.Set("X-Acs-Action", action)
			r.Header.Set("X-Acs-Version", "2014-05-26")
		}
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		if w.Code >= 200 && w.Code < 300 && path != "/fakecloud/healthz" {
			t.Fatalf("%s %s?%s answered %d without credentials: %s", method, path, query, w.Code, w.Body.String())
		}

		sr := signedFuzzRequest(method, query, body, action)
		if sr == nil {
			return
		}
		w = httptest.NewRecorder()
		c.ServeHTTP(w, sr)
		if w.Code >= 500 {
			t.Fatalf("signed %s ?%s body %q answered %d: %s", sr.Method, sr.URL.RawQuery, body, w.Code, w.Body.String())
		}
		if strings.Contains(w.Body.String(), "SignatureDoesNotMatch") {
			t.Fatalf("the fuzz signer disagrees with the server: %s", w.Body.String())
		}
	})
}

var fuzzNonce atomic.Int64

// signedFuzzRequest turns fuzzed parts into an API request signed with the
// test AccessKey (signature v1, aliyun-wire.md §2.4): the query with the
// common parameters set (Action from action when the input has none), the
// body as a form. The signature covers every parameter as the server
// merges them, query values before the form's. nil when the query or body
// does not parse (the unsigned run covers those).
func signedFuzzRequest(method, query, body, action string) *http.Request {
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil
	}
	form, err := url.ParseQuery(body)
	if err != nil {
		return nil
	}
	if method != http.MethodGet {
		method = http.MethodPost
	}
	if action != "" && q.Get("Action") == "" && form.Get("Action") == "" {
		q.Set("Action", action)
	}
	if q.Get("Version") == "" && form.Get("Version") == "" {
		q.Set("Version", fakecloud.ECSVersion)
	}
	for _, k := range []string{"Signature", "SecurityToken"} {
		q.Del(k)
		form.Del(k)
	}
	q.Set("AccessKeyId", testAK)
	q.Set("SignatureMethod", "HMAC-SHA1")
	q.Set("SignatureVersion", "1.0")
	q.Set("SignatureNonce", fmt.Sprintf("fuzz-%d-%d", time.Now().UnixNano(), fuzzNonce.Add(1)))
	q.Set("Timestamp", time.Now().UTC().Format("2006-01-02T15:04:05Z"))
	merged := url.Values{}
	for k, v := range q {
		merged[k] = append(merged[k], v...)
	}
	for k, v := range form {
		merged[k] = append(merged[k], v...)
	}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pct := func(s string) string { return pctReplacer.Replace(url.QueryEscape(s)) }
	var parts []string
	for _, k := range keys {
		for _, v := range merged[k] {
			parts = append(parts, pct(k)+"="+pct(v))
		}
	}
	m := hmac.New(sha1.New, []byte(testSecret+"&"))
	m.Write([]byte(method + "&%2F&" + pct(strings.Join(parts, "&"))))
	q.Set("Signature", base64.StdEncoding.EncodeToString(m.Sum(nil)))
	r := httptest.NewRequest(method, "/", strings.NewReader(body))
	r.URL.RawQuery = q.Encode()
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}
