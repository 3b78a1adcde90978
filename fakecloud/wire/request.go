package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxBodyBytes bounds the form body the server reads. RPC calls of ECS and
// VPC carry everything in the query; the bound only protects the server.
const MaxBodyBytes = 1 << 20

// TimestampLayout is the layout of the Timestamp parameter and of the
// x-acs-date header.
const TimestampLayout = "2006-01-02T15:04:05Z"

// Scheme names how a request was signed.
type Scheme string

// The two signature schemes the Go SDKs send for RPC-style products.
const (
	// SchemeV1 is HMAC-SHA1 over the canonical query
	// (alibaba-cloud-sdk-go, and the Tea SDK with SignatureAlgorithm "v2").
	SchemeV1 Scheme = "HMAC-SHA1"
	// SchemeV3 is ACS3-HMAC-SHA256 in the Authorization header (the Tea
	// SDK's default).
	SchemeV3 Scheme = "ACS3-HMAC-SHA256"
)

// Request is one decoded RPC call, before authentication.
type Request struct {
	Action        string
	Version       string
	Params        Params
	Scheme        Scheme
	AccessKeyID   string
	SecurityToken string
	Nonce         string
	// Timestamp is the signing time the client claims (zero if absent).
	Timestamp time.Time

	method    string
	signature string
	// v3 only
	signedHeaders []string
	header        http.Header
	host          string
	rawQuery      url.Values
	bodyHash      string
}

// ParseRequest decodes r into a Request. It fails only on input the gateway
// could not even route (unreadable body, malformed query or Authorization
// header); authentication happens in Verify.
func ParseRequest(r *http.Request) (*Request, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, Errorf(400, "InvalidParameter", "The request body could not be read: %v.", err)
	}
	if len(body) > MaxBodyBytes {
		return nil, Errorf(400, "InvalidParameter", "The request body exceeds %d bytes.", MaxBodyBytes)
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, Errorf(400, "InvalidParameter", "The query string is malformed: %v.", err)
	}
	all := query
	if len(body) > 0 && isForm(r.Header.Get("Content-Type")) {
		all = url.Values{}
		for k, v := range query {
			all[k] = append([]string(nil), v...)
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, Errorf(400, "InvalidParameter", "The form body is malformed: %v.", err)
		}
		for k, v := range form {
			all[k] = append(all[k], v...)
		}
	}
	req := &Request{
		Params:   NewParams(all),
		method:   r.Method,
		header:   r.Header,
		host:     r.Host,
		rawQuery: query,
	}
	if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, string(SchemeV3)) {
		sum := sha256.Sum256(body)
		req.bodyHash = hex.EncodeToString(sum[:])
		return req, req.parseV3(auth)
	}
	req.parseV1()
	return req, nil
}

func isForm(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/x-www-form-urlencoded"
}

func (q *Request) parseV1() {
	p := q.Params
	q.Scheme = SchemeV1
	q.Action = p.String("Action")
	q.Version = p.String("Version")
	q.AccessKeyID = p.String("AccessKeyId")
	q.SecurityToken = p.String("SecurityToken")
	q.Nonce = p.String("SignatureNonce")
	q.signature = p.String("Signature")
	if t, err := time.Parse(TimestampLayout, p.String("Timestamp")); err == nil {
		q.Timestamp = t
	}
}

func (q *Request) parseV3(auth string) error {
	q.Scheme = SchemeV3
	fields := strings.Split(strings.TrimSpace(strings.TrimPrefix(auth, string(SchemeV3))), ",")
	for _, f := range fields {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return Errorf(400, "IncompleteSignature", "The Authorization header is malformed.")
		}
		switch k {
		case "Credential":
			q.AccessKeyID = v
		case "SignedHeaders":
			q.signedHeaders = strings.Split(v, ";")
		case "Signature":
			q.signature = v
		}
	}
	h := q.header
	q.Action = h.Get("x-acs-action")
	q.Version = h.Get("x-acs-version")
	if q.Action == "" {
		q.Action = q.Params.String("Action")
	}
	if q.Version == "" {
		q.Version = q.Params.String("Version")
	}
	q.SecurityToken = h.Get("x-acs-security-token")
	q.Nonce = h.Get("x-acs-signature-nonce")
	if t, err := time.Parse(TimestampLayout, h.Get("x-acs-date")); err == nil {
		q.Timestamp = t
	}
	return nil
}
