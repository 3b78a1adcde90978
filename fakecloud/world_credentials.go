package fakecloud

import (
	"crypto/rand"
	"fmt"
	"time"
)

// credential is what authenticating a call needs to know of its
// AccessKeyId: a static key of the account or an STS credential issued
// through instance metadata.
type credential struct {
	secret string
	// token is the SecurityToken calls must carry ("" for a plain key).
	token string
	// instanceID is who the calls are attributed to, if anyone.
	instanceID string
	// expires is when an STS credential stops working; zero for keys.
	expires time.Time
}

// credential looks up an AccessKeyId.
func (w *world) credential(accessKeyID string) (credential, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if k, ok := w.st.keys[accessKeyID]; ok {
		return credential{secret: k.Secret, token: k.SecurityToken, instanceID: k.InstanceID}, true
	}
	if c, ok := w.st.STS[accessKeyID]; ok {
		return credential{secret: c.Secret, token: c.Token, instanceID: c.InstanceID, expires: c.Expires}, true
	}
	return credential{}, false
}

// ramRole returns the RAM role of an instance, false when it has none.
func (w *world) ramRole(inst string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.st.Instances[inst]
	if in == nil || in.RAMRole == "" {
		return "", false
	}
	return in.RAMRole, true
}

// roleCredential returns the STS credential of an instance's RAM role,
// false when the instance has no such role. A credential is reused until
// half its lifetime has passed, then a new one is issued; old ones stay
// valid until they expire.
func (w *world) roleCredential(inst, role string) (stsCred, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.st.Instances[inst]
	if in == nil || in.RAMRole == "" || role != in.RAMRole {
		return stsCred{}, false
	}
	now := w.now()
	life := w.st.Spec.Settings.STSLifetime.D()
	cur := w.currentCredentialLocked(inst, role, now)
	if cur == nil || now.Sub(cur.Issued) > life/2 {
		cur = &stsCred{AccessKeyID: "STS." + randomString(28), Secret: randomString(40), Token: "CAIS" + randomString(120),
			InstanceID: inst, Role: role, Issued: now, Expires: now.Add(life)}
		w.st.STS[cur.AccessKeyID] = cur
		w.dirty.cred(cur.AccessKeyID)
	}
	if err := w.commitLocked(); err != nil {
		return stsCred{}, false
	}
	return *cur, true
}

// currentCredentialLocked drops expired STS credentials and returns the
// newest of role for inst, if any.
func (w *world) currentCredentialLocked(inst, role string, now time.Time) *stsCred {
	var cur *stsCred
	for k, cred := range w.st.STS {
		if !now.Before(cred.Expires) {
			delete(w.st.STS, k)
			w.dirty.cred(k)
			continue
		}
		if cred.InstanceID == inst && cred.Role == role && (cur == nil || cred.Issued.After(cur.Issued)) {
			cur = cred
		}
	}
	return cur
}

const randomAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomString returns n characters from crypto/rand: credentials and
// tokens must not be predictable, even from the seed.
func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	for i := range b {
		b[i] = randomAlphabet[int(b[i])%len(randomAlphabet)]
	}
	return string(b)
}
