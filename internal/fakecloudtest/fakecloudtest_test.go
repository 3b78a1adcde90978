package fakecloudtest

import (
	"io"
	"strings"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/noproxy"
)

func TestMain(m *testing.M) { noproxy.Main(m) }

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

// VPCClient calls the API with the AccessKey it was given, through the
// real SDK.
func TestVPCClient(t *testing.T) {
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: "LTAIfakecloudtest", Secret: "secret"}}
	s := Start(t, fakecloud.Options{Spec: &spec}, "")
	resp, err := VPCClient(t, s.API.URL, "LTAIfakecloudtest", "secret").DescribeVSwitches(vpc.CreateDescribeVSwitchesRequest())
	if err != nil {
		t.Fatalf("DescribeVSwitches: %v", err)
	}
	if resp.TotalCount == 0 {
		t.Error("no vSwitch described")
	}
	if _, err := VPCClient(t, s.API.URL, "LTAIfakecloudtest", "wrong").DescribeVSwitches(vpc.CreateDescribeVSwitchesRequest()); err == nil {
		t.Fatal("a wrong secret was accepted")
	}
}
