package rpc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// overTheWire sends err's status the way gRPC does (a serialized
// google.rpc.Status in grpc-status-details-bin) and rebuilds it.
func overTheWire(t *testing.T, err error) error {
	t.Helper()
	p := status.Convert(err).Proto()
	b, merr := proto.Marshal(p)
	if merr != nil {
		t.Fatal(merr)
	}
	proto.Reset(p)
	if uerr := proto.Unmarshal(b, p); uerr != nil {
		t.Fatal(uerr)
	}
	return status.FromProto(p).Err()
}

// TestPodBusyErrorCarriesDetailAndText: the busy answer keeps what
// plugins without the detail match (code Unavailable, "already
// processing" in the message) and adds the detail, which survives
// serialization.
func TestPodBusyErrorCarriesDetailAndText(t *testing.T) {
	err := overTheWire(t, PodBusyError("default/web"))
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		t.Errorf("code %v, want Unavailable", st.Code())
	}
	// The literal, not PodBusyText: it is what Terway's plugin and our
	// earlier ones look for.
	if !strings.Contains(st.Message(), "already processing") || !strings.Contains(st.Message(), "default/web") {
		t.Errorf("message %q, want it to name the pod and contain %q", st.Message(), "already processing")
	}
	b, ok := PodBusyDetail(err)
	if !ok || b.GetPod() != "default/web" {
		t.Errorf("PodBusyDetail = %v, %v; want pod default/web", b, ok)
	}
}

// TestPodBusyDetail: found only where the detail is, whatever the code
// and text; wrapping keeps it.
func TestPodBusyDetail(t *testing.T) {
	withDetail := func(c codes.Code, msg string) error {
		st, err := status.New(c, msg).WithDetails(&PodBusy{Pod: "ns/p"})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"not a status", errors.New("pod ns/p: already processing"), false},
		{"text alone", overTheWire(t, status.Error(codes.Unavailable, "pod ns/p: already processing")), false},
		{"detail, other text", overTheWire(t, withDetail(codes.Unavailable, "pod ns/p: busy")), true},
		{"detail, other code", overTheWire(t, withDetail(codes.Internal, "something")), true},
		{"wrapped", fmt.Errorf("alloc: %w", PodBusyError("ns/p")), true},
	}
	for _, tc := range tests {
		b, ok := PodBusyDetail(tc.err)
		if ok != tc.want || ok && b.GetPod() != "ns/p" {
			t.Errorf("%s: PodBusyDetail = %v, %v; want %v", tc.name, b, ok, tc.want)
		}
	}
}

// TestPodBusyWireName: the detail travels as an Any whose type URL names
// rpc.PodBusy; renaming the message or its package would make our
// plugin of one version before or after see no detail (and fall back to
// the text).
func TestPodBusyWireName(t *testing.T) {
	a, err := anypb.New(&PodBusy{Pod: "ns/p"})
	if err != nil {
		t.Fatal(err)
	}
	if a.TypeUrl != "type.googleapis.com/rpc.PodBusy" {
		t.Errorf("type URL %q", a.TypeUrl)
	}
	f := File_details_proto.Messages().ByName("PodBusy").Fields().ByNumber(1)
	if f == nil || f.Name() != "pod" || f.Kind().String() != "string" {
		t.Errorf("PodBusy field 1 = %v, want string pod", f)
	}
}
