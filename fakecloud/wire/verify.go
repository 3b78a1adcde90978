package wire

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"sort"
	"strings"
	"time"
)

var pctReplacer = strings.NewReplacer("+", "%20", "*", "%2A", "%7E", "~")

// percentEncode is the RFC 3986 encoding both signature schemes use:
// url.QueryEscape with "+" as "%20", "*" as "%2A" and "~" kept. It is
// written out as one pass because it runs for every parameter of every
// request.
func percentEncode(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~'
}

// CheckComplete reports the first signing parameter that is missing or
// malformed, with the code the gateway uses for it.
func (q *Request) CheckComplete() error {
	if q.Scheme == SchemeV1 {
		p := q.Params
		switch {
		case q.AccessKeyID == "":
			return Errorf(400, "MissingAccessKeyId", "AccessKeyId is mandatory for this action.")
		case q.signature == "":
			return Errorf(400, "MissingSignature", "Signature is mandatory for this action.")
		case q.Nonce == "":
			return Errorf(400, "MissingSignatureNonce", "SignatureNonce is mandatory for this action.")
		case p.String("Timestamp") == "":
			return Errorf(400, "MissingTimestamp", "Timestamp is mandatory for this action.")
		case q.Timestamp.IsZero():
			return Errorf(400, "InvalidTimeStamp.Format", "Specified time stamp or date value is not well formatted.")
		case p.String("SignatureMethod") != "HMAC-SHA1":
			return Errorf(400, "InvalidSignatureMethod", "Specified signature method is not valid.")
		case p.String("SignatureVersion") != "1.0":
			return Errorf(400, "InvalidSignatureVersion", "Specified signature version is not valid.")
		}
		return nil
	}
	switch {
	case q.AccessKeyID == "" || q.signature == "" || len(q.signedHeaders) == 0:
		return Errorf(400, "IncompleteSignature", "The Authorization header lacks Credential, SignedHeaders or Signature.")
	case q.Nonce == "":
		return Errorf(400, "MissingSignatureNonce", "x-acs-signature-nonce is mandatory for this action.")
	case q.header.Get("x-acs-date") == "":
		return Errorf(400, "MissingTimestamp", "x-acs-date is mandatory for this action.")
	case q.Timestamp.IsZero():
		return Errorf(400, "InvalidTimeStamp.Format", "Specified time stamp or date value is not well formatted.")
	}
	// Headers that select the action or make the request unique must be
	// signed; otherwise they could be changed in flight.
	for _, h := range []string{"host", "x-acs-action", "x-acs-version", "x-acs-date", "x-acs-signature-nonce", "x-acs-content-sha256"} {
		if !contains(q.signedHeaders, h) {
			return Errorf(400, "IncompleteSignature", "The header %q must be signed.", h)
		}
	}
	if q.SecurityToken != "" && !contains(q.signedHeaders, "x-acs-security-token") {
		return Errorf(400, "IncompleteSignature", "The header \"x-acs-security-token\" must be signed.")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// CheckTime refuses a request signed more than window away from now, which
// is what keeps a captured request from being replayed later.
func (q *Request) CheckTime(now time.Time, window time.Duration) error {
	d := now.Sub(q.Timestamp)
	if d > window || d < -window {
		return Errorf(400, "InvalidTimeStamp.Expired", "Specified time stamp or date value is expired.")
	}
	return nil
}

// StringToSign returns what the client must have signed.
func (q *Request) StringToSign() string {
	if q.Scheme == SchemeV3 {
		sum := sha256.Sum256([]byte(q.canonicalRequestV3()))
		return string(SchemeV3) + "\n" + hex.EncodeToString(sum[:])
	}
	return q.stringToSignV1()
}

func (q *Request) stringToSignV1() string {
	v := q.Params.Values()
	keys := make([]string, 0, len(v))
	for k := range v {
		if k != "Signature" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	// StringToSign = METHOD&%2F&pct(pct(k1)=pct(v1)&...): the canonical
	// query is encoded twice, which appendDoubleEncoded does in one pass.
	b := make([]byte, 0, 512)
	b = append(b, q.method...)
	b = append(b, "&%2F&"...)
	first := true
	for _, k := range keys {
		for _, val := range v[k] {
			if !first {
				b = append(b, "%26"...) // "&"
			}
			first = false
			b = appendDoubleEncoded(b, k)
			b = append(b, "%3D"...) // "="
			b = appendDoubleEncoded(b, val)
		}
	}
	return string(b)
}

// appendDoubleEncoded appends percentEncode(percentEncode(s)): unreserved
// bytes stay, every other byte c becomes "%25" followed by c's two
// upper-case hex digits (the first pass's "%XX", with "%" encoded again).
func appendDoubleEncoded(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', '2', '5', hex[c>>4], hex[c&15])
	}
	return b
}

func (q *Request) canonicalRequestV3() string {
	keys := make([]string, 0, len(q.rawQuery))
	for k := range q.rawQuery {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var qs strings.Builder
	for _, k := range keys {
		qs.WriteString("&" + k + "=")
		if v := q.rawQuery.Get(k); v != "" {
			qs.WriteString(url.QueryEscape(v))
		}
	}
	canonicalQuery := strings.TrimLeft(pctReplacer.Replace(qs.String()), "&")
	var hs strings.Builder
	for _, h := range q.signedHeaders {
		var val string
		if h == "host" {
			val = q.host
		} else {
			vals := append([]string(nil), q.header.Values(h)...)
			for i := range vals {
				vals[i] = strings.TrimSpace(vals[i])
			}
			sort.Strings(vals)
			val = strings.Join(vals, ",")
		}
		hs.WriteString(h + ":" + val + "\n")
	}
	return q.method + "\n/\n" + canonicalQuery + "\n" + hs.String() + "\n" +
		strings.Join(q.signedHeaders, ";") + "\n" + q.bodyHash
}

// Verify checks the signature against secret. A mismatch reports the
// server's string to sign, as the real gateway does, so that the SDK can
// tell a wrong secret from a canonicalisation bug.
func (q *Request) Verify(secret string) error {
	sts := q.StringToSign()
	var want string
	if q.Scheme == SchemeV3 {
		if q.header.Get("x-acs-content-sha256") != q.bodyHash {
			return Errorf(400, "SignatureDoesNotMatch", "The x-acs-content-sha256 header does not match the request body.")
		}
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(sts))
		want = hex.EncodeToString(m.Sum(nil))
	} else {
		m := hmac.New(sha1.New, []byte(secret+"&"))
		m.Write([]byte(sts))
		want = base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(q.signature)) != 1 {
		return Errorf(400, "SignatureDoesNotMatch", "Specified signature is not matched with our calculation. server string to sign is:%s", sts)
	}
	return nil
}
