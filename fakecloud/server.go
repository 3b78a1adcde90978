package fakecloud

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// ServeHTTP serves the ECS and VPC APIs at "/", the instance metadata
// service (identifying the instance by source address) under "/latest/",
// and the admin API under "/fakecloud/".
func (c *Cloud) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer c.recoverHandler(w, r)
	switch {
	case strings.HasPrefix(r.URL.Path, "/fakecloud/"):
		c.serveAdmin(w, r)
	case strings.HasPrefix(r.URL.Path, "/latest/"):
		c.serveMetadata(w, r, "")
	default:
		c.serveAPI(w, r)
	}
}

// newRequestID returns an ID shaped like the gateway's (an upper-case
// UUID). Request IDs must be unique, not unpredictable, so the fast
// math/rand/v2 generator does.
func newRequestID() string {
	const hex = "0123456789ABCDEF"
	var b [36]byte
	hi, lo := rand.Uint64(), rand.Uint64()
	j := 0
	for i := 0; i < 32; i++ {
		if i == 8 || i == 12 || i == 16 || i == 20 {
			b[j] = '-'
			j++
		}
		var nib uint64
		if i < 16 {
			nib = hi >> (60 - 4*i) & 15
		} else {
			nib = lo >> (60 - 4*(i-16)) & 15
		}
		b[j] = hex[nib]
		j++
	}
	return string(b[:])
}

// recoverHandler, deferred by every entry point, turns a panic below it
// into a 500 answer logged at ERROR. net/http would recover the panic too,
// but only by dropping the connection, logged at a level nobody reads; and
// a Cloud used in process (tests call ServeHTTP directly) has no net/http
// underneath, so the panic would take the caller down. http.ErrAbortHandler
// is re-raised: it is how a handler asks net/http to drop the connection on
// purpose (lost-response faults).
func (c *Cloud) recoverHandler(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	c.w.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	http.Error(w, "internal error", http.StatusInternalServerError)
}

// errHandlerPanic is what a call whose handler panicked answers: the
// gateway's code for an unexpected server-side failure.
func errHandlerPanic() error {
	return apiErr(500, CodeInternalError, "The request processing has failed due to some unknown error.")
}

func writeError(w http.ResponseWriter, e *wire.Error, reqID, host, product string) {
	writeJSON(w, e.Status, reqID, wire.NewErrorBody(e, reqID, host, product))
}

func writeJSON(w http.ResponseWriter, status int, reqID string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"Code":"InternalError","Message":"response encoding failed","RequestId":"` + reqID + `"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json;charset=utf-8")
	h.Set("X-Acs-Request-Id", reqID)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func wireStatus(err error) int { return wire.AsError(err).Status }
