package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/terway-sim/terway/daemon/backoff"
)

// KeyError reports a problem with one key of eni_conf. Key is the key as
// Terway spells it, with a path below it where the problem is nested
// ("backoff_override.eni_ops.Steps", "extra_routes[1].dst").
type KeyError struct {
	Key string
	Err error
}

// Error formats as "eni_conf: <key>: <problem>".
func (e *KeyError) Error() string {
	return "eni_conf: " + e.Key + ": " + e.Err.Error()
}

// Unwrap returns the underlying problem.
func (e *KeyError) Unwrap() error { return e.Err }

// under puts err below key: a KeyError's key becomes key.<its key> (or
// key<its key> when that starts with "["), anything else becomes a KeyError
// for key. Joined errors are treated one by one.
func under(key string, err error) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, under(key, e))
		}
		return errors.Join(out...)
	}
	var ke *KeyError
	if errors.As(err, &ke) && ke == err {
		sep := "."
		if strings.HasPrefix(ke.Key, "[") {
			sep = ""
		}
		return &KeyError{Key: key + sep + ke.Key, Err: ke.Err}
	}
	return &KeyError{Key: key, Err: err}
}

// unimplementedKeys are keys Terway defines that this daemon does not act
// on. Parse accepts them and lists them in Config.Ignored when they are set
// to something other than null, false, 0, "", "false", [] or {}.
var unimplementedKeys = []string{
	"prefix",
	"enable_eip_migrate",
	"enable_eni_trunking",
	"enable_erdma",
	"ipam_type",
	"eni_cap_policy",
	"enable_ip_prefix",
	"ipv4_prefix_count",
	"ipv6_prefix_count",
	"ip_warm_up_size",
	"eni_tag_block_list",
	"wait_trunk_eni",
	"disable_security_group_check",
	"in_cluster_loadbalance",
}

// UnimplementedKeys returns the Terway keys this daemon accepts but ignores.
func UnimplementedKeys() []string {
	return slices.Clone(unimplementedKeys)
}

// keyFields maps each key (json tag) of Config to its field index.
var keyFields = sync.OnceValue(func() map[string]int {
	t := reflect.TypeFor[Config]()
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = i
	}
	return out
})

// Keys returns every key Parse acts on, sorted: Terway's keys that this
// daemon implements and its own extensions.
func Keys() []string {
	var out []string
	for k := range keyFields() {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// lookupKey finds the canonical key that name matches. Like encoding/json
// (and so Terway), it falls back to a case-insensitive match.
func lookupKey(name string, known []string) (string, bool) {
	for _, k := range known {
		if k == name {
			return k, true
		}
	}
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return k, true
		}
	}
	return "", false
}

// ParseFile reads and parses an eni_conf file (DefaultPath or
// DefaultLegacyPath in production).
func ParseFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eni_conf: read %s: %w", path, err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes eni_conf, applies the defaults and validates the result.
//
// null and "" for a key mean the same as leaving it out. Unknown keys and set
// keys of UnimplementedKeys are no error: they are listed in Config.Ignored.
// Every problem found is reported, as KeyErrors joined with errors.Join; each
// line reads "eni_conf: <key>: <problem>". Malformed JSON is reported with the
// byte offset of the fault (encoding/json's: the bytes read when it was seen),
// wrapping the *json.SyntaxError.
func Parse(data []byte) (*Config, error) {
	members, err := objectMembers(data)
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("eni_conf: malformed JSON at byte offset %d: %w", se.Offset, err)
		}
		return nil, fmt.Errorf("eni_conf: %w", err)
	}

	cfg := Defaults()
	ignored := map[string]bool{}
	var errs []error
	fields := keyFields()
	known := Keys()
	rv := reflect.ValueOf(cfg).Elem()

	for _, m := range members {
		if k, ok := lookupKey(m.key, unimplementedKeys); ok {
			if !isZeroValue(m.value) {
				ignored[k] = true
			}
			continue
		}
		key, ok := lookupKey(m.key, known)
		if !ok {
			ignored[m.key] = true
			continue
		}
		if isUnset(m.value) {
			continue
		}
		switch key {
		case "backoff_override":
			unknown, err := decodeBackoffOverride(cfg, m.value)
			for _, u := range unknown {
				ignored[u] = true
			}
			if err != nil {
				errs = append(errs, under(key, err))
			}
		default:
			if err := decodeValue(m.value, rv.Field(fields[key])); err != nil {
				errs = append(errs, under(key, err))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	cfg.applyZeroDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	for k := range ignored {
		cfg.Ignored = append(cfg.Ignored, k)
	}
	slices.Sort(cfg.Ignored)
	return cfg, nil
}

// decodeBackoffOverride decodes backoff_override. Each entry starts from the
// built-in schedule of its key, so an entry may set only some fields (Terway
// main does the same for InitialDelay). It returns the unknown fields as
// "backoff_override.<key>.<field>".
func decodeBackoffOverride(cfg *Config, raw json.RawMessage) ([]string, error) {
	members, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	var unknown []string
	var errs []error
	for _, m := range members {
		if isNull(m.value) {
			continue
		}
		b, u, err := decodeBackoff(m.value, backoff.DefaultFor(m.key))
		if err != nil {
			errs = append(errs, under(m.key, err))
			continue
		}
		for _, f := range u {
			unknown = append(unknown, "backoff_override."+m.key+"."+f)
		}
		if cfg.BackoffOverride == nil {
			cfg.BackoffOverride = map[string]backoff.Policy{}
		}
		cfg.BackoffOverride[m.key] = b
	}
	return unknown, errors.Join(errs...)
}

// decodeValue decodes raw into dst. Objects into maps and arrays into slices
// are decoded entry by entry, so that an error names the entry
// ("rate_limit.DescribeVSwitches", "extra_routes[2].dst"). Entries of an
// object decoded into a map are added to what the map already holds (so
// rate_limit overrides the defaults one API at a time); null entries are
// skipped. An empty object or array leaves a nil map or slice.
func decodeValue(raw json.RawMessage, dst reflect.Value) error {
	trimmed := bytes.TrimSpace(raw)
	t := dst.Type()
	switch {
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && len(trimmed) > 0 && trimmed[0] == '{':
		members, err := objectMembers(raw)
		if err != nil {
			return err
		}
		var errs []error
		for _, m := range members {
			if isNull(m.value) {
				continue
			}
			elem := reflect.New(t.Elem())
			if err := json.Unmarshal(m.value, elem.Interface()); err != nil {
				errs = append(errs, under(m.key, describeDecodeError(err)))
				continue
			}
			if dst.IsNil() {
				dst.Set(reflect.MakeMap(t))
			}
			dst.SetMapIndex(reflect.ValueOf(m.key).Convert(t.Key()), elem.Elem())
		}
		return errors.Join(errs...)
	case t.Kind() == reflect.Slice && len(trimmed) > 0 && trimmed[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return describeDecodeError(err)
		}
		out := reflect.MakeSlice(t, len(items), len(items))
		var errs []error
		for i, item := range items {
			if err := json.Unmarshal(item, out.Index(i).Addr().Interface()); err != nil {
				errs = append(errs, under(fmt.Sprintf("[%d]", i), describeDecodeError(err)))
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		if len(items) == 0 {
			out = reflect.Zero(t) // [] is the same as leaving the key out
		}
		dst.Set(out)
		return nil
	}
	return describeDecodeError(json.Unmarshal(raw, dst.Addr().Interface()))
}

// applyZeroDefaults gives the keys for which Terway treats the zero value as
// "not set" their default.
func (c *Config) applyZeroDefaults() {
	d := Defaults()
	if c.ENICapRatio == 0 {
		c.ENICapRatio = d.ENICapRatio
	}
	if c.IdleIPReclaimInterval.Duration == 0 {
		c.IdleIPReclaimInterval = d.IdleIPReclaimInterval
	}
	if c.IdleIPReclaimBatchSize == 0 {
		c.IdleIPReclaimBatchSize = d.IdleIPReclaimBatchSize
	}
	if c.IPPoolSyncPeriod.Duration == 0 {
		c.IPPoolSyncPeriod = d.IPPoolSyncPeriod
	}
}

// member is one key of a JSON object, in document order.
type member struct {
	key   string
	value json.RawMessage
}

// objectMembers splits a JSON object into its members in document order
// (duplicates kept: later ones win when applied in order, as with
// encoding/json).
func objectMembers(data []byte) ([]member, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("want a JSON object, got %s", short(data))
		}
		return nil, err
	}
	if probe == nil {
		return nil, errors.New("want a JSON object, got null")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, fmt.Errorf("read object start: %w", err)
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read key: %w", err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("read value of %q: %w", key, err)
		}
		out = append(out, member{key: key, value: raw})
	}
	return out, nil
}

// isNull reports whether raw is JSON null.
func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// isUnset reports whether raw is null or "", which mean "not set".
func isUnset(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "null" || s == `""`
}

// isZeroValue reports whether raw is null, false, 0, "", "false", [] or {}.
func isZeroValue(raw json.RawMessage) bool {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false
	}
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case float64:
		return x == 0
	case string:
		return x == "" || x == "false"
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// describeDecodeError turns encoding/json's type errors into a message about
// the JSON the user wrote.
func describeDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	msg := fmt.Sprintf("want %s, got a JSON %s", describeType(te.Type), te.Value)
	if te.Field != "" {
		return &KeyError{Key: te.Field, Err: errors.New(msg)}
	}
	return errors.New(msg)
}

// describeType names a Go type the way a JSON author thinks of it.
func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return t.String()
}
