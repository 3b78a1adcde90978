package fakecloud

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// exchange is one API request on its way to an answer: what is known of
// it so far (product, action, caller), which is how its call is counted
// and logged, and where the answer goes.
type exchange struct {
	c      *Cloud
	rw     http.ResponseWriter
	r      *http.Request
	reqID  string
	prod   *product
	start  time.Time
	action string
	who    caller
}

// serveAPI serves one ECS or VPC API request.
func (c *Cloud) serveAPI(w http.ResponseWriter, r *http.Request) {
	ex := &exchange{c: c, rw: w, r: r, reqID: newRequestID(), prod: productECS, start: time.Now()}
	// Panics outside run (parsing, authentication) still answer in the
	// API's error format and are counted; run recovers the handler's own
	// panics with the action and caller known.
	defer ex.recoverPanic()
	act, x, err := c.admit(ex)
	if err != nil {
		ex.fail(err)
		return
	}
	resp, lost, err := c.run(act, x)
	switch {
	case err != nil:
		ex.fail(err)
	case lost != nil:
		ex.lose(lost)
	default:
		ex.succeed(resp)
	}
}

// admit finds the action of a request and lets through only an
// authenticated call for this region within its throttling budget.
func (c *Cloud) admit(ex *exchange) (*action, *call, error) {
	r := ex.r
	if r.URL.Path != "/" || (r.Method != http.MethodPost && r.Method != http.MethodGet) {
		return nil, nil, errNoAPI()
	}
	req, err := wire.ParseRequest(r)
	if err != nil {
		return nil, nil, err
	}
	if req.Version == VPCVersion {
		ex.prod = productVPC
	}
	if req.Action == "" {
		return nil, nil, errMissing("Action")
	}
	act := actions[req.Version][req.Action]
	if act == nil {
		return nil, nil, errNoAPI()
	}
	ex.action = act.name
	now, settings := c.w.now(), c.w.settingsNow()
	if ex.who, err = c.authenticate(req, now, settings); err != nil {
		return nil, nil, err
	}
	if r := req.Params.String("RegionId"); r != "" && r != c.region {
		return nil, nil, apiErr(404, "InvalidRegionId.NotFound", "The specified RegionId %q does not exist here: fakecloud emulates region %s.", r, c.region)
	}
	if !c.throttle.allow(act.name, now, settings.ThrottleWindow.D(), budget(settings, act.name)) {
		return nil, nil, apiErr(400, throttleCode(settings, act.name), "Request was denied due to user flow control.")
	}
	return act, &call{ctx: r.Context(), req: req, p: req.Params, who: ex.who, requestID: ex.reqID}, nil
}

func errNoAPI() error {
	return apiErr(404, CodeInvalidAPI, "Specified api is not found, please check your url and method.")
}

// logCall logs the call at DEBUG. Parameters are never logged: they can
// carry a SecurityToken.
func (ex *exchange) logCall(outcome string, status int) {
	log := ex.c.w.log
	if log.Enabled(ex.r.Context(), slog.LevelDebug) {
		log.Debug("api call", "action", ex.action, "accessKeyId", ex.who.AccessKeyID, "instance", ex.who.InstanceID,
			"outcome", outcome, "status", status, "requestId", ex.reqID, "took", time.Since(ex.start))
	}
}

// fail answers err, counted as its code.
func (ex *exchange) fail(err error) {
	e := wire.AsError(err)
	ex.c.calls.add(ex.action, ex.who.AccessKeyID, ex.who.InstanceID, e.Code)
	ex.logCall(e.Code, e.Status)
	writeError(ex.rw, e, ex.reqID, ex.r.Host, ex.prod.name)
}

// succeed answers resp, counted as a success.
func (ex *exchange) succeed(resp response) {
	ex.c.calls.add(ex.action, ex.who.AccessKeyID, ex.who.InstanceID, OutcomeSuccess)
	ex.logCall(OutcomeSuccess, http.StatusOK)
	resp.setRequestID(ex.reqID)
	writeJSON(ex.rw, http.StatusOK, ex.reqID, resp)
}

// maxLostHold bounds how long a "timeout" lost response holds the
// connection when the client never gives up.
const maxLostHold = 10 * time.Minute

// lose answers a call whose change is made as a lost-response fault says:
// with the fault's error, or never (the connection is dropped when the
// client gives up).
func (ex *exchange) lose(f *Fault) {
	c := ex.c
	if f.Lost == "timeout" {
		c.calls.add(ex.action, ex.who.AccessKeyID, ex.who.InstanceID, "LostResponse.Timeout")
		t := c.w.clock.NewTimer(maxLostHold)
		defer t.Stop()
		select {
		case <-ex.r.Context().Done():
		case <-c.w.done:
		case <-t.C():
		}
		panic(http.ErrAbortHandler)
	}
	e := wire.AsError(faultError(f))
	c.calls.add(ex.action, ex.who.AccessKeyID, ex.who.InstanceID, e.Code)
	writeError(ex.rw, e, ex.reqID, ex.r.Host, ex.prod.name)
}

// recoverPanic, deferred by serveAPI, answers a panic outside a handler
// with InternalError, counted without action or caller.
func (ex *exchange) recoverPanic() {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	ex.c.w.log.Error("api panic", "requestId", ex.reqID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	e := wire.AsError(errHandlerPanic())
	ex.c.calls.add("", "", "", e.Code)
	writeError(ex.rw, e, ex.reqID, ex.r.Host, ex.prod.name)
}
