package cloud

import (
	"errors"
	"strings"
	"testing"
	"time"

	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/fakecloud"
)

// slowAttach makes attaching take 100 s of world time (1 s at the
// world's time scale 0.01) and gives WaitENIStatus a poll that outlasts
// it, as the real policy outlasts a real slow attach.
func slowAttach(s *fakecloud.Spec, _ *fakecloud.Options, o *Options) {
	s.Settings.AttachDelay = fakecloud.Duration(100 * time.Second)
	over := map[string]backoff.Policy{}
	for k, b := range backoff.Defaults() {
		over[k] = backoff.Policy{Duration: 5 * time.Millisecond, Factor: 1.2, Jitter: 0.1, Steps: max(b.Steps, 3)}
	}
	over[backoff.WaitENIStatus] = backoff.Policy{Duration: 50 * time.Millisecond, Factor: 1.5, Cap: 400 * time.Millisecond, Steps: 10}
	o.Backoff = backoff.NewSet(nil, over)
}

// TestDetachWhileAttachingAnswersInvalidEniState checks what the cloud
// answers a detach of an ENI still Attaching — 400
// InvalidOperation.InvalidEniState, as ECS does — and that ReleaseENI
// waits the attach out and then releases the ENI instead of failing.
func TestDetachWhileAttachingAnswersInvalidEniState(t *testing.T) {
	w := newWorld(t, slowAttach)
	e, err := w.api.CreateENI(ctx(t), CreateENIRequest{IntentKey: "att", VSwitchID: vsw1, SecurityGroups: []string{sg}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.api.AttachENI(ctx(t), e.ID, node1); err != nil {
		t.Fatal(err)
	}
	err = w.api.DetachENI(ctx(t), e.ID, node1)
	var se *sdkerrors.ServerError
	if !errors.As(err, &se) || se.ErrorCode() != CodeInvalidENIState || se.HttpStatus() != 400 ||
		!strings.Contains(se.Message(), "Attaching") {
		t.Fatalf("detach while Attaching answered %v, want 400 %s naming the Attaching state", err, CodeInvalidENIState)
	}
	if err := w.node.ReleaseENI(ctx(t), e.ID); err != nil {
		t.Fatalf("release of an ENI still attaching: %v", err)
	}
	if left := secondaries(w.cloud); len(left) != 0 {
		t.Fatalf("left after release: %+v", left)
	}
}

// TestRollbackAfterLostAttachAnswer loses the answer to the attach and
// fails the Describe that would confirm it: AllocateENI cannot know
// whether the attach happened. Its rollback waits until the slow attach
// ends and then detaches and deletes the ENI; nothing is left behind.
func TestRollbackAfterLostAttachAnswer(t *testing.T) {
	w := newWorld(t, slowAttach)
	for _, f := range []fakecloud.Fault{
		{Name: "lost-attach", Kind: fakecloud.FaultLostResponse, Action: "AttachNetworkInterface", Count: 1},
		{Name: "describe-fails", Kind: fakecloud.FaultError, Action: "DescribeNetworkInterfaceAttribute", Count: 1,
			Code: "InvalidParameter", Status: 400},
	} {
		if _, err := w.cloud.AddFault(f); err != nil {
			t.Fatal(err)
		}
	}
	var created string
	_, err := w.node.AllocateENI(ctx(t), CreateENIRequest{IntentKey: "lost", VSwitchID: vsw1, SecurityGroups: []string{sg},
		OnCreated: func(id string) { created = id }})
	if err == nil {
		t.Fatal("allocation succeeded although the attach could not be confirmed")
	}
	if !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("rollback failed: %v", err)
	}
	if created == "" {
		t.Fatal("OnCreated was not called")
	}
	if left := secondaries(w.cloud); len(left) != 0 {
		t.Fatalf("left after rollback: %+v", left)
	}
}
