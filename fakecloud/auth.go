package fakecloud

import (
	"time"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// caller is who made an authenticated call.
type caller struct {
	AccessKeyID string
	// InstanceID is set for RAM-role (STS) credentials: fakecloud
	// attributes those calls to the instance that received them.
	InstanceID string
}

// key identifies the caller for fault decisions and call indexes.
func (c caller) key() string {
	if c.InstanceID != "" {
		return c.InstanceID
	}
	return c.AccessKeyID
}

// authenticate checks credentials, signature, timestamp and nonce, in the
// order the gateway reports them.
func (c *Cloud) authenticate(req *wire.Request, now time.Time, s *Settings) (caller, error) {
	if err := req.CheckComplete(); err != nil {
		return caller{}, err
	}
	secret, who, err := c.lookupKey(req, now)
	if err != nil {
		return caller{}, err
	}
	if err := req.Verify(secret); err != nil {
		return caller{}, err
	}
	window := s.TimestampWindow.D()
	if err := req.CheckTime(now, window); err != nil {
		return caller{}, err
	}
	if !c.nonces.use(req.AccessKeyID+"|"+req.Nonce, now, window) {
		return caller{}, apiErr(400, CodeNonceUsed, "Specified signature nonce was used already.")
	}
	return who, nil
}

// lookupKey finds the secret for the request's AccessKeyId: a static key
// of the account, or an STS credential issued through instance metadata.
// A credential with a SecurityToken (STS, or a key issued elsewhere) needs
// the request to carry it; an STS one works until it expires.
func (c *Cloud) lookupKey(req *wire.Request, now time.Time) (string, caller, error) {
	cred, ok := c.w.credential(req.AccessKeyID)
	switch {
	case !ok:
		return "", caller{}, apiErr(404, CodeAccessKeyNotFound, "Specified access key is not found.")
	case cred.token == "":
	case req.SecurityToken == "":
		return "", caller{}, apiErr(400, CodeTokenMalformed, "Specified SecurityToken is malformed.")
	case req.SecurityToken != cred.token:
		return "", caller{}, apiErr(400, CodeTokenMismatch, "Specified SecurityToken mismatch with the AccessKey.")
	case !cred.expires.IsZero() && !now.Before(cred.expires):
		return "", caller{}, apiErr(400, CodeTokenExpired, "Specified SecurityToken is expired.")
	}
	return cred.secret, caller{AccessKeyID: req.AccessKeyID, InstanceID: cred.instanceID}, nil
}
