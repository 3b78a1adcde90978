package fakecloud

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// API versions of the two products fakecloud serves.
const (
	ECSVersion = "2014-05-26"
	VPCVersion = "2016-04-28"
)

// product is an OpenAPI product as the gateway names it.
type product struct {
	name    string // "Ecs", "Vpc": as in the Recommend link
	version string
}

var (
	productECS = &product{name: "Ecs", version: ECSVersion}
	productVPC = &product{name: "Vpc", version: VPCVersion}
)

// action is one API action.
type action struct {
	product *product
	name    string
	handler func(c *Cloud, x *call) (response, error)
	// target names the parameter identifying the resource the action
	// changes; overlapping calls on one resource get Operation.Conflict.
	target string
}

// call is one authenticated request on its way through a handler.
type call struct {
	ctx       context.Context
	req       *wire.Request
	p         wire.Params
	who       caller
	requestID string
	// hide is how long an ENI this call creates stays out of Describe
	// answers (a consistency fault).
	hide time.Duration
}

// response is what handlers return: a JSON body with RequestId.
type response interface{ setRequestID(string) }

// base carries the RequestId every response has.
type base struct {
	RequestID string `json:"RequestId"`
}

func (b *base) setRequestID(id string) { b.RequestID = id }

// actions is the static table of actions by version and name.
var actions = func() map[string]map[string]*action {
	m := map[string]map[string]*action{ECSVersion: {}, VPCVersion: {}}
	for _, a := range append(ecsActions(), vpcActions()...) {
		m[a.product.version][a.name] = a
	}
	return m
}()

// Actions lists the supported actions as "Product:Action".
func Actions() []string {
	var out []string
	for _, byName := range actions {
		for _, a := range byName {
			out = append(out, a.product.name+":"+a.name)
		}
	}
	sort.Strings(out)
	return out
}

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
	c.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	http.Error(w, "internal error", http.StatusInternalServerError)
}

// errHandlerPanic is what a call whose handler panicked answers: the
// gateway's code for an unexpected server-side failure.
func errHandlerPanic() error {
	return apiErr(500, CodeInternalError, "The request processing has failed due to some unknown error.")
}

func (c *Cloud) serveAPI(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	prod := productECS
	start := time.Now()
	// Panics outside run (parsing, authentication) still answer in the
	// API's error format and are counted; run recovers the handler's own
	// panics with the action and caller known.
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
		c.log.Error("api panic", "requestId", reqID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		e := wire.AsError(errHandlerPanic())
		c.calls.add("", "", "", e.Code)
		writeError(w, e, reqID, r.Host, prod.name)
	}()
	// Parameters are never logged: they can carry a SecurityToken.
	logCall := func(action, ak, instance, outcome string, status int) {
		if c.log.Enabled(r.Context(), slog.LevelDebug) {
			c.log.Debug("api call", "action", action, "accessKeyId", ak, "instance", instance, "outcome", outcome,
				"status", status, "requestId", reqID, "took", time.Since(start))
		}
	}
	fail := func(err error, action, ak, instance string) {
		e := wire.AsError(err)
		c.calls.add(action, ak, instance, e.Code)
		logCall(action, ak, instance, e.Code, e.Status)
		writeError(w, e, reqID, r.Host, prod.name)
	}
	if r.URL.Path != "/" || (r.Method != http.MethodPost && r.Method != http.MethodGet) {
		fail(apiErr(404, CodeInvalidAPI, "Specified api is not found, please check your url and method."), "", "", "")
		return
	}
	req, err := wire.ParseRequest(r)
	if err != nil {
		fail(err, "", "", "")
		return
	}
	if req.Version == VPCVersion {
		prod = productVPC
	}
	if req.Action == "" {
		fail(errMissing("Action"), "", "", "")
		return
	}
	act := actions[req.Version][req.Action]
	if act == nil {
		fail(apiErr(404, CodeInvalidAPI, "Specified api is not found, please check your url and method."), "", "", "")
		return
	}
	now := c.now()
	settings := c.settingsSnapshot()
	who, err := c.authenticate(req, now, settings)
	if err != nil {
		fail(err, act.name, "", "")
		return
	}
	if r := req.Params.String("RegionId"); r != "" && r != c.region {
		fail(apiErr(404, "InvalidRegionId.NotFound", "The specified RegionId %q does not exist here: fakecloud emulates region %s.", r, c.region), act.name, who.AccessKeyID, who.InstanceID)
		return
	}
	if !c.throttle.allow(act.name, now, settings.ThrottleWindow.D(), settings.budget(act.name)) {
		fail(apiErr(400, settings.throttleCode(act.name), "Request was denied due to user flow control."), act.name, who.AccessKeyID, who.InstanceID)
		return
	}
	x := &call{ctx: r.Context(), req: req, p: req.Params, who: who, requestID: reqID}
	resp, lost, err := c.run(act, x)
	if err != nil {
		fail(err, act.name, who.AccessKeyID, who.InstanceID)
		return
	}
	if lost != nil {
		c.loseResponse(w, r, lost, reqID, prod, act.name, who)
		return
	}
	c.calls.add(act.name, who.AccessKeyID, who.InstanceID, OutcomeSuccess)
	logCall(act.name, who.AccessKeyID, who.InstanceID, OutcomeSuccess, http.StatusOK)
	resp.setRequestID(reqID)
	writeJSON(w, http.StatusOK, reqID, resp)
}

// run applies faults and the resource lock around the handler. A panic
// in the handler becomes an InternalError answer, counted and logged at
// ERROR with the action, caller and stack (deferred unlocks have released
// the cloud's locks by the time it is recovered).
func (c *Cloud) run(act *action, x *call) (resp response, lost *Fault, err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
		c.log.Error("handler panic", "action", act.name, "accessKeyId", x.who.AccessKeyID, "instance", x.who.InstanceID,
			"requestId", x.requestID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		resp, lost, err = nil, nil, errHandlerPanic()
	}()
	d := c.faults.decide(act.name, x.who.key(), x.who.AccessKeyID, x.who.InstanceID)
	x.hide = d.hide
	if d.err != nil {
		return nil, nil, faultError(d.err)
	}
	if act.target != "" {
		id := x.p.String(act.target)
		if id != "" {
			if err := c.lockResource(id, act.name); err != nil {
				return nil, nil, err
			}
			defer c.unlockResource(id)
		}
	}
	// A call that reached the cloud is processed even if its client gives
	// up meanwhile, as in ECS: holds and latency ignore the request
	// context, so a test can kill a client mid-operation and see the
	// operation complete.
	for _, p := range d.before {
		c.faults.hold(p, c.done)
	}
	if err := c.waitOrDone(context.Background(), c.scale(d.latency)); err != nil {
		return nil, nil, apiErr(503, CodeServiceUnavailable, "The request has failed due to a temporary failure of the server.")
	}
	resp, err = act.handler(c, x)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range d.after {
		c.faults.hold(p, c.done)
	}
	return resp, d.lost, nil
}

func faultError(f *Fault) error {
	status, code, msg := f.Status, f.Code, f.Message
	if code == "" {
		code = CodeInternalError
	}
	if status == 0 {
		status = 500
		if strings.HasPrefix(code, "Throttling") {
			status = 400
		}
	}
	if msg == "" {
		msg = "The request processing has failed due to some unknown error. (injected fault " + f.Name + ")"
	}
	return apiErr(status, code, "%s", msg)
}

// lockResource marks a resource busy for the duration of a changing call.
func (c *Cloud) lockResource(id, action string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if other, ok := c.busy[id]; ok {
		return apiErr(403, CodeOperationConflict, "ecs task is conflicted: %s is busy with %s.", id, other)
	}
	c.busy[id] = action
	return nil
}

func (c *Cloud) unlockResource(id string) {
	c.mu.Lock()
	delete(c.busy, id)
	c.mu.Unlock()
}

// maxLostHold bounds how long a "timeout" lost response holds the
// connection when the client never gives up.
const maxLostHold = 10 * time.Minute

func (c *Cloud) loseResponse(w http.ResponseWriter, r *http.Request, f *Fault, reqID string, prod *product, act string, who caller) {
	if f.Lost == "timeout" {
		c.calls.add(act, who.AccessKeyID, who.InstanceID, "LostResponse.Timeout")
		t := c.clock.NewTimer(maxLostHold)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-c.done:
		case <-t.C():
		}
		panic(http.ErrAbortHandler)
	}
	e := wire.AsError(faultError(f))
	c.calls.add(act, who.AccessKeyID, who.InstanceID, e.Code)
	writeError(w, e, reqID, r.Host, prod.name)
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
