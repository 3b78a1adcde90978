package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/terway-sim/terway/daemon/backoff"
)

// Duration is a time.Duration written in eni_conf as a Go duration string
// ("90s", "10m", "1h30m"). It marshals back to the same form.
type Duration struct {
	time.Duration
}

// UnmarshalJSON accepts a JSON string holding a Go duration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '"' {
		return fmt.Errorf("want a duration string such as \"90s\" or \"10m\", got %s", short(b))
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decode duration string: %w", err)
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a Go duration such as \"90s\" or \"10m\"", s)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// StringFloat is a number that Terway writes as a JSON string ("0.1"), as in
// idle_ip_reclaim_jitter_factor. A bare JSON number is accepted too. It
// marshals back to a string, the form Terway reads.
type StringFloat float64

// UnmarshalJSON accepts "0.1" or 0.1.
func (f *StringFloat) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("decode number string: %w", err)
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("want a number such as \"0.1\", got %s", short(b))
	}
	*f = StringFloat(v)
	return nil
}

// MarshalJSON writes the number as a JSON string.
func (f StringFloat) MarshalJSON() ([]byte, error) {
	return json.Marshal(strconv.FormatFloat(float64(f), 'g', -1, 64))
}

// StringBool is a boolean written as Terway writes its feature switches,
// "true" or "false", or as a JSON boolean.
type StringBool bool

// UnmarshalJSON accepts true, false, "true" or "false" (any case); ""
// is false, as Terway reads an empty switch.
func (b *StringBool) UnmarshalJSON(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	s := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("decode boolean string: %w", err)
		}
		if strings.TrimSpace(s) == "" {
			*b = false
			return nil
		}
	}
	v, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want true or false, got %s", short(raw))
	}
	*b = StringBool(v)
	return nil
}

// MarshalJSON writes the boolean as Terway does, a string.
func (b StringBool) MarshalJSON() ([]byte, error) { return json.Marshal(strconv.FormatBool(bool(b))) }

// Route is one entry of extra_routes: a destination routed through the pod's
// gateway, as Terway's {"dst": "<cidr>"}.
type Route struct {
	// Dst is the destination CIDR as written in eni_conf.
	Dst string `json:"dst"`
	// Prefix is Dst parsed (and masked) by Parse.
	Prefix netip.Prefix `json:"-"`
}

// backoffFields are the field names of a backoff object, as Terway's Go
// structs spell them.
var backoffFields = []string{"InitialDelay", "Duration", "Factor", "Jitter", "Steps", "Cap"}

// decodeBackoff decodes a backoff object of backoff_override over base
// (its key's built-in policy). Field names match case-insensitively, as
// encoding/json does in Terway; durations are integer nanoseconds (Terway's
// own JSON) or Go duration strings ("2s"). It returns the result, the
// names of unknown fields, and an error naming the field at fault.
func decodeBackoff(data []byte, base backoff.Policy) (backoff.Policy, []string, error) {
	members, err := objectMembers(data)
	if err != nil {
		return base, nil, err
	}
	out := base
	var unknown []string
	for _, m := range members {
		name := ""
		for _, f := range backoffFields {
			if strings.EqualFold(m.key, f) {
				name = f
				break
			}
		}
		if name == "" {
			unknown = append(unknown, m.key)
			continue
		}
		if isNull(m.value) {
			continue
		}
		var ferr error
		switch name {
		case "InitialDelay":
			out.InitialDelay, ferr = decodeNanos(m.value)
		case "Duration":
			out.Duration, ferr = decodeNanos(m.value)
		case "Cap":
			out.Cap, ferr = decodeNanos(m.value)
		case "Factor":
			out.Factor, ferr = decodeNumber(m.value)
		case "Jitter":
			out.Jitter, ferr = decodeNumber(m.value)
		case "Steps":
			ferr = json.Unmarshal(m.value, &out.Steps)
			if ferr != nil {
				ferr = fmt.Errorf("want an integer, got %s", short(m.value))
			}
		}
		if ferr != nil {
			return base, nil, &KeyError{Key: name, Err: ferr}
		}
	}
	return out, unknown, nil
}

// validateBackoff checks one backoff_override entry; errors name the field.
func validateBackoff(b backoff.Policy) error {
	var errs []error
	neg := func(field string, d time.Duration) {
		if d < 0 {
			errs = append(errs, &KeyError{Key: field, Err: fmt.Errorf("must be >= 0, got %s", d)})
		}
	}
	neg("InitialDelay", b.InitialDelay)
	neg("Duration", b.Duration)
	neg("Cap", b.Cap)
	if b.Factor < 0 {
		errs = append(errs, &KeyError{Key: "Factor", Err: fmt.Errorf("must be >= 0, got %g", b.Factor)})
	}
	if b.Jitter < 0 {
		errs = append(errs, &KeyError{Key: "Jitter", Err: fmt.Errorf("must be >= 0, got %g", b.Jitter)})
	}
	if b.Steps < 1 {
		errs = append(errs, &KeyError{Key: "Steps", Err: fmt.Errorf("must be >= 1, got %d", b.Steps)})
	}
	return errors.Join(errs...)
}

// decodeNanos reads a duration given as integer nanoseconds (an exponent
// form such as 2e9 is fine if it is whole) or as a Go duration string.
func decodeNanos(raw json.RawMessage) (time.Duration, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var d Duration
		if err := d.UnmarshalJSON(raw); err != nil {
			return 0, err
		}
		return d.Duration, nil
	}
	s := string(raw)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f > math.MaxInt64 || f < math.MinInt64 {
		return 0, fmt.Errorf("want integer nanoseconds or a duration string such as \"2s\", got %s", short(raw))
	}
	return time.Duration(f), nil
}

// decodeNumber reads a JSON number.
func decodeNumber(raw json.RawMessage) (float64, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("want a number, got %s", short(raw))
	}
	return f, nil
}

// short returns raw JSON for an error message, cut to a readable length.
func short(b []byte) string {
	const limit = 40
	s := string(bytes.TrimSpace(b))
	if s == "" {
		return "nothing"
	}
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}
