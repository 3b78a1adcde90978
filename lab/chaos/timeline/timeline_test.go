package timeline

import (
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// sampleTimeline is four samples a second apart with a fault from 1 s to
// 2.5 s and a restart at 2 s; the pods could not be read at 3 s.
func sampleTimeline() *Timeline {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	sec := admin.Duration(time.Second)
	return &Timeline{
		Start: start, End: start.Add(3 * time.Second), Interval: sec,
		Samples: []Sample{
			{At: 0, PodsReady: 0, Pods: 3},
			{At: sec, Calls: map[string]int64{"Success": 4, "Throttling.User": 2}, CallsOver: sec, Throttled: 2, PodsReady: 1, Pods: 3},
			{At: 2 * sec, Calls: map[string]int64{"Success": 1}, CallsOver: sec, PodsReady: 2, Pods: 3, Restarts: 1},
			{At: 3 * sec, Calls: map[string]int64{"Success": 6}, CallsOver: 2 * sec, Restarts: 1, Errors: map[string]string{SourcePods: "connection refused"}},
		},
		Bands:    []Band{{Name: "storm", Kind: "cloud", Target: "DescribeVSwitches", Start: start.Add(time.Second), End: start.Add(2500 * time.Millisecond)}},
		Restarts: []Restart{{At: 2 * sec, Node: "node-1", Pod: "terway-a", Container: "terwayd", Count: 1, Cause: "Error, exit code 137"}},
	}
}

func TestWriteText(t *testing.T) {
	tl := sampleTimeline()
	var b strings.Builder
	if err := tl.WriteText(&b, 3*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		"timeline from 2025-01-02T03:04:05Z, a sample every 1s, up to 3.0s:",
		"fault storm (DescribeVSwitches), cloud: 1.0s → 2.5s",
		"restart at 2.0s: terway-a/terwayd on node-1: Error, exit code 137",
		"4.0 Success, 2.0 Throttling.User; storm (DescribeVSwitches)",
		"3.0 Success; pods unread: connection refused",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("%q not in\n%s", want, text)
		}
	}
	if rows := strings.Count(text, "\n"); rows != 8 {
		t.Errorf("%d lines, want a heading, a fault, a restart, a header and 4 samples\n%s", rows, text)
	}
	b.Reset()
	if err := tl.WriteText(&b, 1500*time.Millisecond, 1); err != nil {
		t.Fatal(err)
	}
	text = b.String()
	if !strings.Contains(text, "(1 earlier samples left out)") || strings.Contains(text, "restart at") || strings.Contains(text, "2.0s ") {
		t.Errorf("timeline up to 1.5 s, last row only:\n%s", text)
	}
}

func TestBandsAtAndLabels(t *testing.T) {
	tl := sampleTimeline()
	if got := tl.BandsAt(2 * time.Second); len(got) != 1 || got[0].Label() != "storm (DescribeVSwitches)" {
		t.Errorf("bands at 2 s: %+v", got)
	}
	if got := tl.BandsAt(3 * time.Second); len(got) != 0 {
		t.Errorf("bands at 3 s: %+v", got)
	}
	if r := tl.Restarts[0]; !r.When(tl.Start).Equal(tl.Start.Add(2*time.Second)) || r.String() != "2.0s terway-a/terwayd on node-1: Error, exit code 137" {
		t.Errorf("restart %v at %v", r, r.When(tl.Start))
	}
	if !IsThrottling("Throttling.Api") || IsThrottling("InvalidParameter") {
		t.Error("IsThrottling")
	}
}
