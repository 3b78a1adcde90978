package fakecloud

import (
	"log"
	"net/http"
	"time"
)

// Default connection timeouts of the listeners a fakecloud process opens
// (API, metadata and admin share them; see fakecloud/README.md).
const (
	// DefaultReadHeaderTimeout bounds reading a request's line and headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included: a
	// client trickling its body a byte at a time is cut off after it. API
	// bodies are at most wire.MaxBodyBytes, so an honest client on
	// loopback or in a lab namespace needs milliseconds.
	DefaultReadTimeout = 30 * time.Second
	// DefaultIdleTimeout bounds how long a keep-alive connection may wait
	// for its next request.
	DefaultIdleTimeout = 2 * time.Minute
)

// ServerTimeouts are the connection timeouts of a fakecloud listener. A
// zero field takes its default.
//
// There is deliberately no write timeout: a call held by a pause fault or
// a "lost: timeout" fault keeps its connection open on purpose (for up to
// 10 minutes), and net/http would cut it. Once a request is read, holding
// it is the handler's business, not the connection's.
type ServerTimeouts struct {
	ReadHeader time.Duration
	Read       time.Duration
	Idle       time.Duration
}

func (t ServerTimeouts) withDefaults() ServerTimeouts {
	if t.ReadHeader <= 0 {
		t.ReadHeader = DefaultReadHeaderTimeout
	}
	if t.Read <= 0 {
		t.Read = DefaultReadTimeout
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdleTimeout
	}
	return t
}

// NewHTTPServer returns an http.Server for h with the timeouts t (zero
// fields take the defaults) and errorLog for net/http's own messages (nil:
// the standard logger). Every listener of cmd/fakecloud is built here, so
// that none is left with only a header timeout.
func NewHTTPServer(h http.Handler, t ServerTimeouts, errorLog *log.Logger) *http.Server {
	t = t.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		IdleTimeout:       t.Idle,
		ErrorLog:          errorLog,
	}
}
