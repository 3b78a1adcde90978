package fakecloud_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/terway-sim/terway/fakecloud"
)

// FuzzServeAPI sends arbitrary requests to a whole Cloud. Invariants: no
// panic, and no 2xx answer without valid credentials, on any path but the
// health check.
func FuzzServeAPI(f *testing.F) {
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSecret}}
	c, err := fakecloud.New(fakecloud.Options{Spec: &spec, AdminToken: adminToken})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	f.Add("POST", "/", "Action=DescribeNetworkInterfaces&Version=2014-05-26&AccessKeyId="+testAK+"&Signature=x&SignatureNonce=1&Timestamp=2026-01-01T00:00:00Z&SignatureMethod=HMAC-SHA1&SignatureVersion=1.0", "", "", "")
	f.Add("POST", "/", "NetworkInterfaceId=eni-1", "", "ACS3-HMAC-SHA256 Credential="+testAK+",SignedHeaders=host;x-acs-action;x-acs-version;x-acs-date;x-acs-signature-nonce;x-acs-content-sha256,Signature=00", "DeleteNetworkInterface")
	f.Add("GET", "/latest/meta-data/instance-id", "", "", "", "")
	f.Add("PUT", "/latest/api/token", "", "", "", "")
	f.Add("GET", "/fakecloud/world", "", "", "Bearer nope", "")
	f.Add("POST", "/fakecloud/faults", "", `{"kind":"error"}`, "", "")
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
	})
}
