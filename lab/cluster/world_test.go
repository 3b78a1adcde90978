package cluster

import (
	"testing"

	"github.com/terway-sim/terway/fakecloud"
)

// TestLabWorldKeepsConsistencyWindow: fakecloud's default world has no
// consistency window (issue 10, finding 5); the lab's default world opts
// in to the one it always ran with, so the demo is unchanged.
func TestLabWorldKeepsConsistencyWindow(t *testing.T) {
	if fakecloud.DefaultSettings().ConsistencyWindow != 0 {
		t.Fatal("fakecloud's default world has a consistency window again: revisit LabConsistencyWindow")
	}
	spec, err := labSpec(Config{Name: "t", Nodes: 2, InstanceType: DefaultInstanceType})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Settings.ConsistencyWindow.D() != LabConsistencyWindow || LabConsistencyWindow <= 0 {
		t.Fatalf("lab world consistency window %v, want %v", spec.Settings.ConsistencyWindow, LabConsistencyWindow)
	}
	if len(spec.Instances) != 2 {
		t.Fatalf("%d instances", len(spec.Instances))
	}
}
