package fakecloud

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"time"
)

// ClientToken idempotency: a call repeated with the same ClientToken and
// the same parameters gets the first call's answer without changing the
// world again; the same token with different parameters is refused with
// IdempotentFailed. Records are kept for idempotencyTTL.
const idempotencyTTL = 24 * time.Hour

// commonParams are not part of what makes two requests "the same": they
// change with every signing.
var commonParams = map[string]bool{
	"AccessKeyId": true, "Signature": true, "SignatureMethod": true, "SignatureNonce": true,
	"SignatureType": true, "SignatureVersion": true, "Timestamp": true, "Format": true,
	"SecurityToken": true, "ClientToken": true, "Version": true, "Action": true,
}

func fingerprint(x *call, action string) string {
	v := x.p.Values()
	keys := make([]string, 0, len(v))
	for k := range v {
		if !commonParams[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	h.Write([]byte(action))
	for _, k := range keys {
		h.Write([]byte{0})
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(strings.Join(v[k], "\x01")))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func tokenKey(action, token string) string { return action + "|" + token }

// replayLocked answers a retried call from its idempotency record.
// ok is false when the call is new.
func (c *Cloud) replayLocked(x *call, action string) (resp response, ok bool, err error) {
	token := x.p.String("ClientToken")
	if token == "" {
		return nil, false, nil
	}
	rec := c.st.Tokens[tokenKey(action, token)]
	if rec == nil || c.now().Sub(rec.At) > idempotencyTTL {
		return nil, false, nil
	}
	if rec.Fingerprint != fingerprint(x, action) {
		return nil, true, apiErr(400, CodeIdempotentFailed, "Request uses a client token in a previous request but is not identical to that request.")
	}
	body := map[string]json.RawMessage{}
	if err := json.Unmarshal(rec.Response, &body); err != nil {
		return nil, true, err
	}
	return &rawResponse{body: body}, true, nil
}

// rememberLocked stores the answer of a call made with a ClientToken.
func (c *Cloud) rememberLocked(x *call, action string, resp response) {
	token := x.p.String("ClientToken")
	if token == "" {
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return
	}
	now := c.now()
	key := tokenKey(action, token)
	c.st.Tokens[key] = &idempotency{Action: action, Fingerprint: fingerprint(x, action), Response: b, At: now}
	c.dirty.token(key)
	if len(c.st.Tokens)%1024 == 0 {
		for k, r := range c.st.Tokens {
			if now.Sub(r.At) > idempotencyTTL {
				delete(c.st.Tokens, k)
				c.dirty.token(k)
			}
		}
	}
}

// rawResponse is a stored answer replayed with a new RequestId.
type rawResponse struct {
	body map[string]json.RawMessage
}

func (r *rawResponse) setRequestID(id string) {
	b, _ := json.Marshal(id)
	r.body["RequestId"] = b
}

func (r *rawResponse) MarshalJSON() ([]byte, error) { return json.Marshal(r.body) }
