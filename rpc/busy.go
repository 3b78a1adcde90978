package rpc

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PodBusyCode is the gRPC code of the daemon's busy answer. Terway's
// plugin and every plugin of ours answer Unavailable with CNI code 11
// (try again later), and a DEL never fails on it.
const PodBusyCode = codes.Unavailable

// PodBusyText is in the message of every busy answer. Plugins that
// predate the PodBusy detail (Terway's, ours before it) recognise the
// answer only by this text, so it stays even though the detail says the
// same.
const PodBusyText = "already processing"

// PodBusyError is the daemon's answer to a call for a pod that already
// has one in flight: PodBusyCode, a message containing PodBusyText and
// a PodBusy detail naming the pod (namespace/name), so that a plugin
// need not parse the text.
func PodBusyError(pod string) error {
	st := status.New(PodBusyCode, fmt.Sprintf("pod %s: %s", pod, PodBusyText))
	if withDetail, err := st.WithDetails(&PodBusy{Pod: pod}); err == nil {
		st = withDetail
	}
	return st.Err()
}

// PodBusyDetail returns the PodBusy detail of a gRPC error, whatever
// its code and text; false when err carries none (a daemon that sends
// only the text, or another answer).
func PodBusyDetail(err error) (*PodBusy, bool) {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return nil, false
	}
	for _, d := range st.Details() {
		if b, ok := d.(*PodBusy); ok {
			return b, true
		}
	}
	return nil, false
}
