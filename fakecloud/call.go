package fakecloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/terway-sim/terway/fakecloud/wire"
)

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

// ack is the answer of a changing call that answers nothing but its
// RequestId.
func ack(err error) (response, error) {
	if err != nil {
		return nil, err
	}
	return &base{}, nil
}

// changeByID is the shape of the actions that change one resource, named
// by parameter idParam, and answer only their RequestId.
func changeByID(x *call, idParam string, change func(id string) error) (response, error) {
	id, err := required(x.p, idParam)
	if err != nil {
		return nil, err
	}
	return ack(change(id))
}

// rawResponse is a stored answer replayed with a new RequestId.
type rawResponse struct {
	body map[string]json.RawMessage
}

func (r *rawResponse) setRequestID(id string) {
	b, _ := json.Marshal(id)
	r.body["RequestId"] = b
}

func (r *rawResponse) MarshalJSON() ([]byte, error) { return json.Marshal(r.body) }

// answered turns what a changing call with a ClientToken got from the
// world into its response: the handler's own rendering, or the replay of
// the first call's answer.
func answered(v any, err error) (response, error) {
	if err != nil {
		return nil, err
	}
	raw, ok := v.(replay)
	if !ok {
		return v.(response), nil
	}
	body := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, err
	}
	return &rawResponse{body: body}, nil
}

// commonParams are not part of what makes two requests "the same": they
// change with every signing.
var commonParams = map[string]bool{
	"AccessKeyId": true, "Signature": true, "SignatureMethod": true, "SignatureNonce": true,
	"SignatureType": true, "SignatureVersion": true, "Timestamp": true, "Format": true,
	"SecurityToken": true, "ClientToken": true, "Version": true, "Action": true,
}

// token returns the ClientToken of the call as action; the fingerprint
// covers every parameter that is not about signing.
func (x *call) token(action string) clientToken {
	t := clientToken{action: action, token: x.p.String("ClientToken")}
	if t.token == "" {
		return t
	}
	v := x.p.Values()
	keys := make([]string, 0, len(v))
	for k := range v {
		if !commonParams[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	h.Write([]byte(action))
	for _, k := range keys {
		h.Write([]byte{0})
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(strings.Join(v[k], "\x01")))
	}
	t.fingerprint = hex.EncodeToString(h.Sum(nil))
	return t
}

// run applies faults and the resource lock around the handler. A panic
// in the handler becomes an InternalError answer, counted and logged at
// ERROR with the action, caller and stack (deferred unlocks have released
// the world's locks by the time it is recovered).
func (c *Cloud) run(act *action, x *call) (resp response, lost *Fault, err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
		c.w.log.Error("handler panic", "action", act.name, "accessKeyId", x.who.AccessKeyID, "instance", x.who.InstanceID,
			"requestId", x.requestID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		resp, lost, err = nil, nil, errHandlerPanic()
	}()
	d := c.faults.decide(subject{action: act.name, key: act.name, caller: x.who.key(), ids: []string{x.who.AccessKeyID, x.who.InstanceID}})
	x.hide = d.hide
	if d.err != nil {
		return nil, nil, faultError(d.err)
	}
	if id := x.p.String(act.target); act.target != "" && id != "" {
		if err := c.busy.lock(id, act.name); err != nil {
			return nil, nil, err
		}
		defer c.busy.unlock(id)
	}
	// A call that reached the cloud is processed even if its client gives
	// up meanwhile, as in ECS: holds and latency ignore the request
	// context, so a test can kill a client mid-operation and see the
	// operation complete.
	for _, p := range d.before {
		c.faults.hold(p, c.w.done)
	}
	if err := c.waitOrDone(context.Background(), c.w.scale(d.latency)); err != nil {
		return nil, nil, apiErr(503, CodeServiceUnavailable, "The request has failed due to a temporary failure of the server.")
	}
	if resp, err = act.handler(c, x); err != nil {
		return nil, nil, err
	}
	for _, p := range d.after {
		c.faults.hold(p, c.w.done)
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

// busySet marks the resources (ENIs, EIPs) a changing call is working on,
// so that an overlapping call on the same one gets Operation.Conflict.
type busySet struct {
	mu   sync.Mutex
	busy map[string]string // resource ID -> action
}

func newBusySet() *busySet { return &busySet{busy: map[string]string{}} }

// lock marks a resource busy for the duration of a changing call.
func (b *busySet) lock(id, action string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if other, ok := b.busy[id]; ok {
		return apiErr(403, CodeOperationConflict, "ecs task is conflicted: %s is busy with %s.", id, other)
	}
	b.busy[id] = action
	return nil
}

func (b *busySet) unlock(id string) {
	b.mu.Lock()
	delete(b.busy, id)
	b.mu.Unlock()
}
