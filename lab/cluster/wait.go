package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// waitFor polls check until it succeeds, the process p exits (then the
// tail of its log is the error), or timeout passes.
func waitFor(ctx context.Context, p *proc, what string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		var stop stopWaiting
		if errors.As(last, &stop) {
			return fmt.Errorf("waiting for %s: %w", what, stop.err)
		}
		if p != nil {
			if done, err := p.exited(); done {
				return fmt.Errorf("waiting for %s: %s exited (%v); log tail:\n%s", what, p.name, err, p.logTail())
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopWaiting is a check's error that waiting longer cannot fix.
type stopWaiting struct{ err error }

func (b stopWaiting) Error() string { return b.err.Error() }

// logTail is the end of the process's log, for error messages.
func (p *proc) logTail() string {
	if p.logPath == "" {
		return ""
	}
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// httpGet succeeds on a 2xx answer.
func httpGet(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
