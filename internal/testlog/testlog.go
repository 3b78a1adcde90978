// Package testlog collects, in tests, the logs of components that run
// concurrently with the test — a daemon, the fabric, a fakecloud server —
// so that a failure can print what they said.
package testlog

import (
	"strings"
	"sync"
)

// Buffer is an io.Writer that goroutines may write to while the test
// reads it. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
