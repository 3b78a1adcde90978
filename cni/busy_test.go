package cni

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/terway-sim/terway/rpc"
)

// TestBusyAnswerRecognised: the plugin knows the daemon's busy answer by
// its PodBusy detail, also when the text says something else, and by
// the "already processing" text alone from a daemon that sends no
// detail (Terway's, ours before the detail); ADD then answers CNI code
// 11 and DEL does not fail (isProcessing).
func TestBusyAnswerRecognised(t *testing.T) {
	pod := PodID{Namespace: "default", Name: "x"}
	tests := []struct {
		name string
		err  error
		busy bool
		code uint
	}{
		{"our daemon: detail and text", rpc.PodBusyError("default/x"), true, types.ErrTryAgainLater},
		{"detail alone, text changed", busyDetailErr(codesUnavailable, "pod default/x: busy"), true, types.ErrTryAgainLater},
		{"detail alone, other code", busyDetailErr(codesInternal, "pod default/x: busy"), true, types.ErrTryAgainLater},
		{"text alone, no detail", statusErr(codesUnavailable, "pod default/x: already processing"), true, types.ErrTryAgainLater},
		{"neither", statusErr(codesUnavailable, "daemon restarting"), false, types.ErrTryAgainLater},
		{"another error", statusErr(codesInternal, "disk on fire"), false, types.ErrInternal},
		{"not a status", errors.New("boom"), false, types.ErrInternal},
	}
	for _, tc := range tests {
		if got := isProcessing(tc.err); got != tc.busy {
			t.Errorf("%s: isProcessing = %v, want %v", tc.name, got, tc.busy)
		}
		e := rpcError("AllocIP", pod, tc.err)
		if e.Code != tc.code || strings.Contains(e.Msg, "earlier call") != tc.busy {
			t.Errorf("%s: rpcError = %d %q, want code %d, busy %v", tc.name, e.Code, e.Msg, tc.code, tc.busy)
		}
	}
	if isProcessing(nil) {
		t.Error("isProcessing(nil)")
	}
}
