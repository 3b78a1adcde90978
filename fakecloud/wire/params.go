package wire

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxListLength bounds how many entries of a Name.N list are read. The
// real API accepts at most 100 entries for any list ECS or VPC defines; the
// bound also keeps a malicious request from making the server probe forever.
const MaxListLength = 100

// Params holds the business parameters of one call: the query string merged
// with a form body, as the gateway sees them.
type Params struct {
	values url.Values
}

// NewParams wraps decoded values.
func NewParams(v url.Values) Params {
	if v == nil {
		v = url.Values{}
	}
	return Params{values: v}
}

// Values returns the underlying values (not a copy).
func (p Params) Values() url.Values { return p.values }

// Has reports whether name was sent, even with an empty value.
func (p Params) Has(name string) bool {
	_, ok := p.values[name]
	return ok
}

// String returns the first value of name, or "".
func (p Params) String(name string) string { return p.values.Get(name) }

// Required returns the value of name or a MissingParameter error.
func (p Params) Required(name string) (string, error) {
	v := p.values.Get(name)
	if v == "" {
		return "", Errorf(400, "Missing"+name, "%s is mandatory for this action.", name)
	}
	return v, nil
}

// Int returns name as an integer; absent gives def. A value that is not an
// integer gives InvalidParameter, as the gateway does for typed parameters.
func (p Params) Int(name string, def int) (int, error) {
	v := p.values.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, Errorf(400, "InvalidParameter", "The specified parameter %q is not valid: %q is not an integer.", name, v)
	}
	return n, nil
}

// Bool returns name as a boolean ("true"/"false", any case); absent gives
// def.
func (p Params) Bool(name string, def bool) (bool, error) {
	v := p.values.Get(name)
	if v == "" {
		return def, nil
	}
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, Errorf(400, "InvalidParameter", "The specified parameter %q is not valid: %q is not a boolean.", name, v)
}

// List returns the repeated parameter Name.1, Name.2, … in order, stopping
// at the first gap, as the SDKs number lists from 1 without holes.
func (p Params) List(name string) []string {
	var out []string
	for i := 1; i <= MaxListLength; i++ {
		v, ok := p.values[name+"."+strconv.Itoa(i)]
		if !ok {
			break
		}
		if len(v) > 0 {
			out = append(out, v[0])
		}
	}
	return out
}

// Tag is one Key/Value pair of a Tag.N list.
type Tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// Tags returns the list-of-struct parameter Name.N.Key / Name.N.Value.
func (p Params) Tags(name string) []Tag {
	var out []Tag
	for i := 1; i <= MaxListLength; i++ {
		prefix := name + "." + strconv.Itoa(i) + "."
		k, okK := p.values[prefix+"Key"]
		v, okV := p.values[prefix+"Value"]
		if !okK && !okV {
			break
		}
		t := Tag{}
		if okK && len(k) > 0 {
			t.Key = k[0]
		}
		if okV && len(v) > 0 {
			t.Value = v[0]
		}
		out = append(out, t)
	}
	return out
}

// Addr parses name as an IP address; absent gives the zero Addr.
func (p Params) Addr(name string) (netip.Addr, error) {
	v := p.values.Get(name)
	if v == "" {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Addr{}, Errorf(400, "InvalidParameter", "The specified parameter %q is not a valid IP address: %q.", name, v)
	}
	return a, nil
}

// AddrList parses the repeated parameter Name.N as IP addresses.
func (p Params) AddrList(name string) ([]netip.Addr, error) {
	raw := p.List(name)
	out := make([]netip.Addr, 0, len(raw))
	for i, v := range raw {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, Errorf(400, "InvalidParameter", "The specified parameter \"%s.%d\" is not a valid IP address: %q.", name, i+1, v)
		}
		out = append(out, a)
	}
	return out, nil
}
