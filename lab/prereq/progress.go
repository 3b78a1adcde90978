package prereq

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress prints "prereq: ..." lines. A long step also prints a line per
// heartbeat, so a 12-minute build does not look like a hang.
type progress struct {
	mu        sync.Mutex
	w         io.Writer
	heartbeat time.Duration
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, heartbeat: time.Minute}
}

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "prereq: "+format+"\n", args...)
}

// step runs f between a start line ("<verb> <what> (<hint>)…") and an end
// line with the elapsed time.
func (p *progress) step(verb, what, hint string, f func() error) error {
	start := time.Now()
	if hint != "" {
		p.printf("%s %s (%s)…", verb, what, hint)
	} else {
		p.printf("%s %s…", verb, what)
	}
	stop := p.beat(what, start)
	err := f()
	stop()
	if err != nil {
		p.printf("%s failed after %s", what, elapsed(start))
		return err
	}
	p.printf("%s done in %s", what, elapsed(start))
	return nil
}

// beat prints a line every heartbeat until the returned stop is called.
func (p *progress) beat(what string, start time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(p.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.printf("  … %s still running (%s)", what, elapsed(start))
			}
		}
	}()
	return func() { close(done); <-finished }
}

// elapsed formats the time since start: "0.4s", "9.2s", "612s".
func elapsed(start time.Time) string {
	d := time.Since(start).Seconds()
	if d < 10 {
		return fmt.Sprintf("%.1fs", d)
	}
	return fmt.Sprintf("%.0fs", d)
}
