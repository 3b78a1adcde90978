package chaos

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/internal/fakecloudtest"
)

const (
	opKey, opSecret = "LTAIoperator0000", "operator-secret"
	opInstance      = "i-bp1lab0000000000001"
)

// operatorCloud serves a fakecloud with an operator's AccessKey and two
// secondary ENIs in use on an instance, with addresses.
func operatorCloud(t *testing.T) (*fakecloud.Cloud, *SDKOperator) {
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: opKey, Secret: opSecret}}
	for i, id := range []string{"eni-bp1chaosop00000001", "eni-bp1chaosop00000002"} {
		spec.ENIs = append(spec.ENIs, fakecloud.ENISpec{ID: id, VSwitchID: spec.Instances[0].VSwitchID,
			SecurityGroupIDs: []string{fakecloud.DefaultSecurityGroup}, InstanceID: opInstance,
			SecondaryIPs: []string{fmt.Sprintf("192.168.0.%d1", 4+i), fmt.Sprintf("192.168.0.%d2", 4+i)}})
	}
	s := fakecloudtest.Start(t, fakecloud.Options{Spec: &spec, Seed: 1, TimeScale: 0.01}, opInstance)
	op, err := NewSDKOperator(OperatorOptions{Endpoint: s.API.URL, Region: fakecloud.DefaultRegion,
		AccessKeyID: opKey, AccessKeySecret: opSecret, PollEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s.Cloud, op
}

func TestSDKOperator(t *testing.T) {
	c, op := operatorCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const one, two = "eni-bp1chaosop00000001", "eni-bp1chaosop00000002"
	if err := op.UnassignIPs(ctx, one, []netip.Addr{netip.MustParseAddr("192.168.0.41")}); err != nil {
		t.Fatal(err)
	}
	if e, _ := c.ENI(one); !slices.Equal(e.IPv4, []netip.Addr{netip.MustParseAddr("192.168.0.42")}) {
		t.Errorf("%s after unassign: %v", one, e.IPv4)
	}
	if err := op.DetachENI(ctx, one, opInstance); err != nil {
		t.Fatal(err)
	}
	if e, _ := c.ENI(one); e.Status != admin.ENIDetaching && e.Status != admin.ENIAvailable {
		t.Errorf("%s after detach: %s", one, e.Status)
	}
	if err := op.DeleteENI(ctx, two); err != nil {
		t.Fatal(err)
	}
	if e, ok := c.ENI(two); ok && e.Status != admin.ENIDeleting {
		t.Errorf("%s after delete: %s", two, e.Status)
	}
	// The calls went through the ordinary API, with the operator's key.
	for _, action := range []string{"UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface"} {
		if n := c.CallCount(fakecloud.CallFilter{Action: action, AccessKeyID: opKey, Outcome: admin.OutcomeSuccess}); n == 0 {
			t.Errorf("no successful %s by the operator's key", action)
		}
	}
	if err := op.DetachENI(ctx, "eni-bp1nosuch000000000", opInstance); err == nil || !strings.Contains(err.Error(), "operator: detach eni-bp1nosuch") {
		t.Errorf("detach of a missing ENI: %v", err)
	}
}

func TestSDKOperatorEndpoint(t *testing.T) {
	for _, bad := range []string{"ftp://x", "http://"} {
		if _, err := NewSDKOperator(OperatorOptions{Endpoint: bad, Region: "cn-hangzhou"}); err == nil {
			t.Errorf("endpoint %q accepted", bad)
		}
	}
}
