package fakecloud

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// scheduler runs the asynchronous halves of ECS operations (attach,
// detach and delete completing, route entries and EIPs settling) when
// they fall due. Items name an object, not a closure: when an item fires,
// the object's own status and due time decide what happens, so a stale or
// duplicate item is harmless and a restored world only needs its pending
// objects rescheduled.
type scheduler struct {
	clock clock.Clock
	mu    sync.Mutex
	items itemHeap
	seq   uint64
	wake  chan struct{}
}

type schedItem struct {
	due time.Time
	seq uint64
	key string
}

type itemHeap []schedItem

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(schedItem)) }
func (h *itemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newScheduler(c clock.Clock) *scheduler {
	return &scheduler{clock: c, wake: make(chan struct{}, 1)}
}

// at schedules key to fire at due.
func (s *scheduler) at(due time.Time, key string) {
	s.mu.Lock()
	s.seq++
	heap.Push(&s.items, schedItem{due: due, seq: s.seq, key: key})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run fires due items in due order until done closes.
func (s *scheduler) run(done <-chan struct{}, fire func(key string)) {
	for {
		s.mu.Lock()
		now := s.clock.Now()
		var due []string
		for len(s.items) > 0 && !s.items[0].due.After(now) {
			due = append(due, heap.Pop(&s.items).(schedItem).key)
		}
		wait := time.Duration(-1)
		if len(s.items) > 0 {
			wait = s.items[0].due.Sub(now)
		}
		s.mu.Unlock()
		for _, k := range due {
			fire(k)
		}
		if len(due) > 0 {
			continue
		}
		var timerC <-chan time.Time
		var t clock.Timer
		if wait >= 0 {
			t = s.clock.NewTimer(wait)
			timerC = t.C()
		}
		select {
		case <-timerC:
		case <-s.wake:
		case <-done:
			if t != nil {
				t.Stop()
			}
			return
		}
		if t != nil {
			t.Stop()
		}
	}
}
