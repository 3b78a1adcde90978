package fakecloud

import (
	"sync"
	"time"
)

// throttler enforces ECS-style flow control: a budget of calls per action
// in fixed windows (by default the clock minute). A call over budget fails
// at once; if an action is throttled in window T it can be called again
// in T+1, as the ECS documentation describes.
type throttler struct {
	mu     sync.Mutex
	counts map[string]*throttleWindow
}

type throttleWindow struct {
	idx int64
	n   int
}

func newThrottler() *throttler { return &throttler{counts: map[string]*throttleWindow{}} }

// allow counts one call of action at now and reports whether it is within
// budget. budget <= 0 means unlimited.
func (t *throttler) allow(action string, now time.Time, window time.Duration, budget int) bool {
	if budget <= 0 {
		return true
	}
	idx := now.UnixNano() / int64(window)
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.counts[action]
	if w == nil {
		w = &throttleWindow{}
		t.counts[action] = w
	}
	if w.idx != idx {
		w.idx, w.n = idx, 0
	}
	if w.n >= budget {
		return false
	}
	w.n++
	return true
}

// budget returns the per-window budget of action under s.
func budget(s *Settings, action string) int {
	if v, ok := s.Throttle[action]; ok {
		return v
	}
	return s.Throttle["*"]
}

// throttleCode returns the code a call of action over budget answers
// under s.
func throttleCode(s *Settings, action string) string {
	if v, ok := s.ThrottleCodes[action]; ok && v != "" {
		return v
	}
	if v := s.ThrottleCodes["*"]; v != "" {
		return v
	}
	return CodeThrottling
}
