package fakecloud

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
)

// The admin API lives under /fakecloud/ on the API listener. Every route
// but /fakecloud/healthz needs "Authorization: Bearer <admin token>"; with
// no admin token configured the admin API is disabled. No route returns a
// secret (AccessKey secrets, STS credentials, metadata tokens).

func (c *Cloud) adminMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /fakecloud/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	routes := []struct {
		pattern string
		handle  adminHandler
	}{
		{"GET /fakecloud/world", func(*http.Request) (any, error) { return c.World(), nil }},
		{"GET /fakecloud/instance-types", func(*http.Request) (any, error) { return c.InstanceTypes(), nil }},
		{"GET /fakecloud/calls", c.getCalls},
		{"DELETE /fakecloud/calls", func(*http.Request) (any, error) { c.ResetCalls(); return nil, nil }},
		{"GET /fakecloud/settings", func(*http.Request) (any, error) { return c.Settings(), nil }},
		{"PUT /fakecloud/settings", c.putSettings},
		{"GET /fakecloud/faults", func(*http.Request) (any, error) { return c.Faults(), nil }},
		{"POST /fakecloud/faults", c.postFault},
		{"DELETE /fakecloud/faults", func(*http.Request) (any, error) { c.ClearFaults(); return nil, nil }},
		{"DELETE /fakecloud/faults/{name}", c.deleteFault},
		{"POST /fakecloud/instances", c.postInstance},
		{"POST /fakecloud/instances/{id}/{op}", c.instanceOp},
		{"POST /fakecloud/vswitches/{id}/drain", c.postDrain},
		{"POST /fakecloud/vswitches/{id}/refill", func(r *http.Request) (any, error) { return c.RefillVSwitch(r.PathValue("id")) }},
	}
	for _, r := range routes {
		m.HandleFunc(r.pattern, c.admin(r.handle))
	}
	return m
}

// adminHandler serves one admin route: what it returns is the JSON answer
// (nil: 204 No Content).
type adminHandler func(*http.Request) (any, error)

// putSettings applies a partial settings document: each key present
// replaces that setting whole (a map too, so that a client can put back
// exactly what it read before), keys absent keep their values. Merging
// into the maps instead would leave a key added by one change in place
// after the client restores the earlier map.
func (c *Cloud) putSettings(r *http.Request) (any, error) {
	var patch map[string]json.RawMessage
	if err := decodeStrict(r, &patch); err != nil {
		return nil, err
	}
	cur, err := json.Marshal(c.Settings())
	if err != nil {
		return nil, fmt.Errorf("encode settings: %w", err)
	}
	merged := map[string]json.RawMessage{}
	if err := json.Unmarshal(cur, &merged); err != nil {
		return nil, fmt.Errorf("decode settings: %w", err)
	}
	maps.Copy(merged, patch)
	b, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("encode settings: %w", err)
	}
	var s Settings
	if err := strictUnmarshal(bytes.NewReader(b), &s); err != nil {
		return nil, err
	}
	return s, c.UpdateSettings(s)
}

// getCalls answers the API's call counters, or with ?service=metadata
// the metadata reads'.
func (c *Cloud) getCalls(r *http.Request) (any, error) {
	switch s := r.URL.Query().Get("service"); s {
	case "", ServiceAPI:
		return c.Calls(), nil
	case ServiceMetadata:
		return c.MetadataCalls(), nil
	default:
		return nil, fmt.Errorf("service %q must be %q or %q", s, ServiceAPI, ServiceMetadata)
	}
}

func (c *Cloud) postFault(r *http.Request) (any, error) {
	var f Fault
	if err := decodeStrict(r, &f); err != nil {
		return nil, err
	}
	name, err := c.AddFault(f)
	return map[string]string{"name": name}, err
}

func (c *Cloud) deleteFault(r *http.Request) (any, error) {
	if !c.RemoveFault(r.PathValue("name")) {
		return nil, errNotFound("no fault named " + r.PathValue("name"))
	}
	return nil, nil
}

func (c *Cloud) postInstance(r *http.Request) (any, error) {
	var s InstanceSpec
	if err := decodeStrict(r, &s); err != nil {
		return nil, err
	}
	return c.AddInstance(s)
}

// instanceOp stops, starts or releases an instance.
func (c *Cloud) instanceOp(r *http.Request) (any, error) {
	id := r.PathValue("id")
	switch r.PathValue("op") {
	case "stop":
		return nil, c.StopInstance(id)
	case "start":
		return nil, c.StartInstance(id)
	case "release":
		return nil, c.ReleaseInstance(id)
	}
	return nil, errNotFound("unknown instance operation " + r.PathValue("op") + " (stop, start, release)")
}

// postDrain drains a vSwitch so that {"leave": N} addresses stay free; no
// body leaves none.
func (c *Cloud) postDrain(r *http.Request) (any, error) {
	var req struct {
		Leave int `json:"leave"`
	}
	if err := decodeStrict(r, &req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return c.DrainVSwitch(r.PathValue("id"), req.Leave)
}

type errNotFound string

func (e errNotFound) Error() string { return string(e) }

// admin wraps a JSON admin handler with authentication and encoding.
func (c *Cloud) admin(h adminHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.adminToken == "" {
			adminError(w, http.StatusForbidden, "the admin API is disabled: start fakecloud with --admin-token")
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(c.adminToken)) != 1 {
			adminError(w, http.StatusUnauthorized, "missing or wrong admin token (Authorization: Bearer <token>)")
			return
		}
		v, err := h(r)
		if err != nil {
			status := http.StatusBadRequest
			var nf errNotFound
			if errors.As(err, &nf) {
				status = http.StatusNotFound
			} else if code := ErrorCode(err); code != CodeInternalError {
				status = wireStatus(err)
			}
			adminError(w, status, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if v == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}
}

func adminError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// decodeStrict decodes a request's JSON body, refusing unknown keys.
func decodeStrict(r *http.Request, v any) error {
	return strictUnmarshal(io.LimitReader(r.Body, 1<<20), v)
}

// strictUnmarshal decodes the JSON value rd starts with, refusing
// unknown keys.
func strictUnmarshal(rd io.Reader, v any) error {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request body: %w", err)
	}
	return nil
}

func (c *Cloud) serveAdmin(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }
