package cloud

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// Intent is a mutating call about to be made: its ClientToken is recorded
// before the call so that a retry — also by a restarted daemon — repeats
// the same request and the cloud answers it once.
type Intent struct {
	Key         string    `json:"key"`
	Kind        string    `json:"kind"`
	ClientToken string    `json:"clientToken"`
	ENIID       string    `json:"eniId,omitempty"`
	VSwitchID   string    `json:"vswitchId,omitempty"`
	Count       int       `json:"count,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
}

// Intent kinds.
const (
	IntentCreateENI  = "CreateENI"
	IntentAssignIPv4 = "AssignIPv4"
	IntentAssignIPv6 = "AssignIPv6"
)

// Journal persists intents (the daemon backs it with its store).
type Journal interface {
	// Intent returns the recorded intent for key, if any.
	Intent(key string) (Intent, bool, error)
	// Record stores an intent before its call is made.
	Record(Intent) error
	// Forget drops an intent once its call has a final answer.
	Forget(key string) error
}

// memoryJournal keeps intents for the process's life only.
type memoryJournal struct {
	mu sync.Mutex
	m  map[string]Intent
}

func (j *memoryJournal) Intent(key string) (Intent, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	in, ok := j.m[key]
	return in, ok, nil
}

func (j *memoryJournal) Record(in Intent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m == nil {
		j.m = map[string]Intent{}
	}
	j.m[in.Key] = in
	return nil
}

func (j *memoryJournal) Forget(key string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.m, key)
	return nil
}

// newClientToken returns a fresh token (64 bits is plenty: tokens are
// scoped to the account and action).
func newClientToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// begin returns the intent for key: the recorded one (same token) when a
// call with this key is being repeated, else a new one, recorded now.
func (c *Client) begin(key, kind, eni, vsw string, count int) (Intent, error) {
	in, ok, err := c.journal.Intent(key)
	if err != nil {
		return Intent{}, fmt.Errorf("read intent %s: %w", key, err)
	}
	if ok && in.Kind == kind {
		return in, nil
	}
	in = Intent{Key: key, Kind: kind, ClientToken: newClientToken(), ENIID: eni, VSwitchID: vsw, Count: count,
		CreatedAt: c.clock.Now()}
	if err := c.journal.Record(in); err != nil {
		return Intent{}, fmt.Errorf("record intent %s: %w", key, err)
	}
	return in, nil
}
