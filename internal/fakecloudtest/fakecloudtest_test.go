package fakecloudtest

import (
	"io"
	"strings"
	"testing"

	"github.com/terway-sim/terway/fakecloud"
)

// The metadata service answers for the instance Start was given.
func TestStartServesMetadata(t *testing.T) {
	const inst = "i-bp1lab0000000000001"
	s := Start(t, fakecloud.Options{}, inst)
	resp, err := s.Metadata.Client().Get(s.Metadata.URL + "/latest/meta-data/instance-id")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.TrimSpace(string(b)) != inst {
		t.Fatalf("instance-id %q (%s), want %s", b, resp.Status, inst)
	}
}
