package fakecloud

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// fill sets every field of v (a pointer to a struct) to a non-zero value,
// so that a field the hand encoder forgets shows up as a difference.
func fill(t *testing.T, v reflect.Value, n int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s<\"é\">" + string(rune('a'+n%26)))
	case reflect.Int:
		v.SetInt(int64(n + 1))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(t, s.Index(i), n+i)
		}
		v.Set(s)
	case reflect.Struct:
		switch v.Type() {
		case reflect.TypeOf(time.Time{}):
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, n+1, time.UTC)))
		case reflect.TypeOf(netip.Addr{}):
			v.Set(reflect.ValueOf(netip.AddrFrom4([4]byte{10, 0, 0, byte(n + 1)})))
		default:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					fill(t, v.Field(i), n+i)
				}
			}
		}
	default:
		t.Fatalf("fill: unhandled kind %s", v.Kind())
	}
}

func TestAppendENIRoundTrip(t *testing.T) {
	var want eni
	fill(t, reflect.ValueOf(&want).Elem(), 0)
	want.IPv6[0].Addr = netip.MustParseAddr("fd00::1")
	var got eni
	b := appendENI(nil, &want)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("hand-encoded ENI is not JSON: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, want)
	}
	// A zero ENI round-trips as well.
	var zero, back eni
	if err := json.Unmarshal(appendENI(nil, &zero), &back); err != nil || !reflect.DeepEqual(back, zero) {
		t.Fatalf("zero ENI: %v %+v", err, back)
	}
}
