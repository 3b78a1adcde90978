package cni

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/rpc"
)

const (
	codesResourceExhausted = codes.ResourceExhausted
	codesUnavailable       = codes.Unavailable
	codesInternal          = codes.Internal
	codesDeadlineExceeded  = codes.DeadlineExceeded
)

func statusErr(c codes.Code, msg string) error { return status.Error(c, msg) }

// busyDetailErr is a daemon answer carrying the rpc.PodBusy detail for
// default/x, with whatever code and text the case needs.
func busyDetailErr(c codes.Code, msg string) error {
	st, err := status.New(c, msg).WithDetails(&rpc.PodBusy{Pod: "default/x"})
	if err != nil {
		panic(err)
	}
	return st.Err()
}
