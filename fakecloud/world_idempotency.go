package fakecloud

import (
	"encoding/json"
	"time"
)

// ClientToken idempotency: a call repeated with the same ClientToken and
// the same parameters gets the first call's answer without changing the
// world again; the same token with different parameters is refused with
// IdempotentFailed. Records are kept for idempotencyTTL, in the state, so
// that they survive a restart.
const idempotencyTTL = 24 * time.Hour

// clientToken identifies a changing call made with a ClientToken: its
// action, the token ("" for a call without one) and a fingerprint of its
// parameters, which a repeat must match.
type clientToken struct {
	action, token, fingerprint string
}

func (t clientToken) key() string { return t.action + "|" + t.token }

// replay is the kept answer of a call made with a ClientToken, as JSON.
type replay json.RawMessage

// replayLocked answers a repeated call from its ClientToken record: the
// first answer, or IdempotentFailed when the parameters differ. ok is
// false when the call is new.
func (w *world) replayLocked(tok clientToken) (r replay, ok bool, err error) {
	if tok.token == "" {
		return nil, false, nil
	}
	rec := w.st.Tokens[tok.key()]
	if rec == nil || w.now().Sub(rec.At) > idempotencyTTL {
		return nil, false, nil
	}
	if rec.Fingerprint != tok.fingerprint {
		return nil, true, apiErr(400, CodeIdempotentFailed, "Request uses a client token in a previous request but is not identical to that request.")
	}
	return replay(rec.Response), true, nil
}

// rememberLocked keeps the answer of a call made with a ClientToken; it
// is journalled with the change the call made, in one write.
func (w *world) rememberLocked(tok clientToken, answer any) {
	if tok.token == "" {
		return
	}
	b, err := json.Marshal(answer)
	if err != nil {
		return
	}
	now := w.now()
	key := tok.key()
	w.st.Tokens[key] = &idempotency{Action: tok.action, Fingerprint: tok.fingerprint, Response: b, At: now}
	w.dirty.token(key)
	if len(w.st.Tokens)%1024 == 0 {
		for k, r := range w.st.Tokens {
			if now.Sub(r.At) > idempotencyTTL {
				delete(w.st.Tokens, k)
				w.dirty.token(k)
			}
		}
	}
}
