package wire

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseRequest feeds arbitrary queries, bodies and Authorization
// headers through the whole server-side pipeline of this package. It must
// never panic, and never verify without the right secret.
func FuzzParseRequest(f *testing.F) {
	f.Add("Action=DescribeNetworkInterfaces&AccessKeyId=a&Signature=x", []byte(""), "")
	f.Add("PrivateIpAddress.1=10.0.0.1&Tag.1.Key=k", []byte("Extra=1"), "ACS3-HMAC-SHA256 Credential=a,SignedHeaders=host,Signature=ff")
	f.Add("%zz", []byte("%zz"), "ACS3-HMAC-SHA256 ,,,=")
	f.Fuzz(func(t *testing.T, query string, body []byte, auth string) {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
		r.URL.RawQuery = query
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		req, err := ParseRequest(r)
		if err != nil {
			if AsError(err).Status != 400 {
				t.Fatalf("parse error is not a 400: %v", err)
			}
			return
		}
		_ = req.CheckComplete()
		_ = req.Params.List("PrivateIpAddress")
		_ = req.Params.Tags("Tag")
		_, _ = req.Params.AddrList("PrivateIpAddress")
		if req.Verify("the-secret") == nil {
			// Only a request signed with the secret may verify; the
			// fuzzer cannot know it, so this is a forged signature.
			t.Fatalf("verified without the secret: query %q auth %q", query, auth)
		}
	})
}

// FuzzVerify signs arbitrary parameter sets with the reference signer and
// checks that the server verifies exactly those: the right secret passes,
// a wrong secret or any changed value fails.
func FuzzVerify(f *testing.F) {
	f.Add("NetworkInterfaceId", "eni-1", "Description", "a b*c~d+e/f", "secret")
	f.Add("Tag.1.Key", "k8s.io/cluster", "PrivateIpAddress.1", "10.0.0.2", "s")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, secret string) {
		if k1 == "" || k2 == "" || k1 == k2 || k1 == "Signature" || k2 == "Signature" {
			return
		}
		if got, want := percentEncode(v1), pctReplacer.Replace(url.QueryEscape(v1)); got != want {
			t.Fatalf("percentEncode(%q) = %q, want %q", v1, got, want)
		}
		if got, want := string(appendDoubleEncoded(nil, v1)), percentEncode(percentEncode(v1)); got != want {
			t.Fatalf("appendDoubleEncoded(%q) = %q, want %q", v1, got, want)
		}
		p := url.Values{"AccessKeyId": {"ak"}, "SignatureMethod": {"HMAC-SHA1"}, "SignatureVersion": {"1.0"},
			"SignatureNonce": {"n"}, "Timestamp": {"2024-01-01T00:00:00Z"}, "SignatureType": {""}}
		p.Set(k1, v1)
		p.Set(k2, v2)
		_, sig := refSign(http.MethodPost, p, secret)
		p.Set("Signature", sig)
		req := v1Request(t, p)
		if err := req.Verify(secret); err != nil {
			t.Fatalf("correctly signed request rejected: %v (params %v)", err, p)
		}
		if err := req.Verify(secret + "x"); err == nil {
			t.Fatalf("wrong secret accepted")
		}
		q := url.Values{}
		for k, v := range p {
			q[k] = append([]string(nil), v...)
		}
		q.Set(k1, v1+"x")
		if err := v1Request(t, q).Verify(secret); err == nil {
			t.Fatalf("tampered value accepted")
		}
	})
}
