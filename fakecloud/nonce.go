package fakecloud

import (
	"sync"
	"time"
)

// nonceCache remembers signature nonces for as long as a request carrying
// them could pass the timestamp check, so that a captured request cannot
// be replayed. Two generations of one window each bound its memory.
type nonceCache struct {
	mu        sync.Mutex
	cur, prev map[string]struct{}
	rotated   time.Time
}

func newNonceCache() *nonceCache {
	return &nonceCache{cur: map[string]struct{}{}, prev: map[string]struct{}{}}
}

// use records nonce for key and reports false if it was seen within the
// last window (the request is a replay).
func (n *nonceCache) use(key string, now time.Time, window time.Duration) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	// A generation must outlive the whole acceptance range of a timestamp
	// (window on either side), so rotate every 2*window.
	if now.Sub(n.rotated) > 2*window {
		n.prev, n.cur, n.rotated = n.cur, map[string]struct{}{}, now
	}
	if _, ok := n.cur[key]; ok {
		return false
	}
	if _, ok := n.prev[key]; ok {
		return false
	}
	n.cur[key] = struct{}{}
	return true
}
