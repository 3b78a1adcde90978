package cni

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	codesResourceExhausted = codes.ResourceExhausted
	codesUnavailable       = codes.Unavailable
	codesInternal          = codes.Internal
	codesDeadlineExceeded  = codes.DeadlineExceeded
)

func statusErr(c codes.Code, msg string) error { return status.Error(c, msg) }
