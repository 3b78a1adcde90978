package timeline

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// gateCalls is a CallCounter whose reads can be held: while gate is set,
// a read says so on held and waits for the gate to open.
type gateCalls struct {
	mu    sync.Mutex
	gate  chan struct{}
	held  chan struct{}
	count int64
}

func (g *gateCalls) Calls(ctx context.Context) ([]admin.CallStat, error) {
	g.mu.Lock()
	gate := g.gate
	g.count++
	n := g.count
	g.mu.Unlock()
	if gate != nil {
		g.held <- struct{}{}
		<-gate
	}
	return []admin.CallStat{{Action: "DescribeVSwitches", Outcome: admin.OutcomeSuccess, Count: n}}, nil
}

// A tick that comes while SampleNow reads slowly waits behind it; its
// sample must still come after SampleNow's, with a span that is not
// negative, so that the timeline reads back from JSON.
func TestSamplesStayInTimeOrder(t *testing.T) {
	g := &gateCalls{held: make(chan struct{})}
	var nows atomic.Int64
	now := func() time.Time { nows.Add(1); return time.Now() }
	s, err := Start(t.Context(), Config{Calls: g, Interval: 5 * time.Millisecond, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	g.mu.Lock()
	g.gate = gate
	g.mu.Unlock()
	done := make(chan struct{})
	go func() { defer close(done); s.SampleNow() }()
	<-g.held // one sample (SampleNow's or a tick's) is reading; others queue behind it
	g.mu.Lock()
	g.gate = nil
	g.mu.Unlock()
	// Give the ticker a few intervals to queue a tick behind the held read.
	before := nows.Load()
	deadline := time.After(2 * time.Second)
	for nows.Load() < before+3 {
		select {
		case <-deadline:
			// With the fix, a queued tick reads the clock only once it has
			// its turn: the clock is not read while the sample is held.
			goto release
		case <-time.After(time.Millisecond):
		}
	}
release:
	close(gate)
	<-done
	tl := s.Stop()
	for i := 1; i < len(tl.Samples); i++ {
		if tl.Samples[i].At < tl.Samples[i-1].At {
			t.Errorf("sample %d at %s before sample %d at %s", i, tl.Samples[i].At.D(), i-1, tl.Samples[i-1].At.D())
		}
		if tl.Samples[i].CallsOver < 0 {
			t.Errorf("sample %d spans %s", i, tl.Samples[i].CallsOver.D())
		}
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(tl); err != nil {
		t.Fatal(err)
	}
	var back Timeline
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("the timeline does not read back: %v", err)
	}
}

// A sample whose moment was read before the last sample's (a tick that
// read the clock, then waited behind SampleNow) is appended at the last
// sample's moment, not before it: the samples stay in order and no call
// span is negative.
func TestLateSampleKeepsOrder(t *testing.T) {
	g := &gateCalls{held: make(chan struct{})}
	t0 := time.Unix(1000, 0)
	s, err := Start(t.Context(), Config{Calls: g, Interval: time.Hour, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	s.sample(t0.Add(2 * time.Second)) // SampleNow, which got the turn first
	s.sample(t0.Add(time.Second))     // the tick that read the clock before it
	tl := s.Stop()
	if len(tl.Samples) != 4 {
		t.Fatalf("%d samples, want 4", len(tl.Samples))
	}
	for i := 1; i < len(tl.Samples); i++ {
		if tl.Samples[i].At < tl.Samples[i-1].At || tl.Samples[i].CallsOver < 0 {
			t.Errorf("sample %d at %s (span %s) after one at %s", i, tl.Samples[i].At.D(), tl.Samples[i].CallsOver.D(), tl.Samples[i-1].At.D())
		}
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(tl); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.Bytes(), new(Timeline)); err != nil {
		t.Fatalf("the timeline does not read back: %v", err)
	}
}
