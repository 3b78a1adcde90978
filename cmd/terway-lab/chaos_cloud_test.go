package main

import (
	"context"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/internal/fakecloudtest"
	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/runner"
	"github.com/terway-sim/terway/lab/cluster"
)

func TestMain(m *testing.M) { noproxy.Main(m) }

const testAK, testSecret = "LTAIchaosTest", "chaos-test-secret"

// cloudLab is a fakecloud served over HTTP with the admin client the lab
// engine uses, and the SDK clients that play a busy daemon.
type cloudLab struct {
	t     *testing.T
	srv   *fakecloudtest.Server
	admin *admin.Client
	ecs   *ecs.Client
	vpc   *vpc.Client
	inst  string
	vsw   []string
}

func newCloudLab(t *testing.T) *cloudLab {
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSecret}}
	c, err := fakecloud.New(fakecloud.Options{Spec: &spec})
	if err != nil {
		t.Fatal(err)
	}
	w := c.World()
	c.Close()
	inst := w.Instances[0].ID
	srv := fakecloudtest.Start(t, fakecloud.Options{Spec: &spec, AdminToken: "tok"}, inst)
	l := &cloudLab{t: t, srv: srv, admin: &admin.Client{URL: srv.API.URL, Token: "tok"}, inst: inst,
		ecs: fakecloudtest.ECSClient(t, srv.API.URL, testAK, testSecret), vpc: fakecloudtest.VPCClient(t, srv.API.URL, testAK, testSecret)}
	for _, v := range w.VSwitches {
		l.vsw = append(l.vsw, v.ID)
	}
	return l
}

// busy makes the calls that step's fault hits, as a daemon would.
func (l *cloudLab) busy(k chaos.Kind) {
	switch k {
	case chaos.CloudErrors, chaos.LostAnswers, chaos.ThrottleStorm:
		for range 3 {
			_, _ = l.vpc.DescribeVSwitches(vpc.CreateDescribeVSwitchesRequest())
		}
	case chaos.Consistency, chaos.VSwitchExhaustion:
		_ = l.createENI()
	case chaos.SlowAsync:
		id := l.createENI()
		r := ecs.CreateAttachNetworkInterfaceRequest()
		r.NetworkInterfaceId, r.InstanceId = id, l.inst
		if _, err := l.ecs.AttachNetworkInterface(r); err != nil {
			l.t.Errorf("attach %s: %v", id, err)
		}
	case chaos.MetadataOutage, chaos.MetadataStale:
		// A hanging read gives up at once: the fault counts it held.
		hc := &http.Client{Timeout: 200 * time.Millisecond}
		if resp, err := hc.Get(l.srv.Metadata.URL + "/latest/meta-data/network/interfaces/macs/"); err == nil {
			resp.Body.Close()
		}
	}
}

// createENI creates an ENI in the first vSwitch and returns its ID ("" if
// a fault refused it).
func (l *cloudLab) createENI() string {
	r := ecs.CreateCreateNetworkInterfaceRequest()
	r.VSwitchId, r.SecurityGroupId = l.vsw[0], fakecloud.DefaultSecurityGroup
	resp, err := l.ecs.CreateNetworkInterface(r)
	if err != nil {
		return ""
	}
	return resp.NetworkInterfaceId
}

// busyWriter plays the daemon's calls right after each step is applied:
// the engine writes its progress line there before it waits.
type busyWriter struct {
	l    *cloudLab
	kind chaos.Kind
}

func (b busyWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), " apply ") && !strings.Contains(string(p), "error:") {
		b.l.busy(b.kind)
	}
	return len(p), nil
}

// Each cloud kind runs through the lab engine's admin client against a
// served fakecloud: applied, fired (fakecloud's own counters prove it),
// undone, with no fault, drain or setting left behind.
func TestLabEngineCloudKinds(t *testing.T) {
	steps := []chaos.Step{
		{Kind: chaos.CloudErrors, Params: chaos.Params{Actions: []string{"DescribeVSwitches"}, Percent: 100}},
		{Kind: chaos.LostAnswers, Params: chaos.Params{Actions: []string{"DescribeVSwitches"}, Percent: 100}},
		{Kind: chaos.ThrottleStorm, Params: chaos.Params{Actions: []string{"DescribeVSwitches"}}},
		{Kind: chaos.SlowAsync},
		{Kind: chaos.Consistency},
		{Kind: chaos.VSwitchExhaustion},
		{Kind: chaos.MetadataOutage},
		{Kind: chaos.MetadataOutage, Params: chaos.Params{Mode: "hang"}},
		{Kind: chaos.MetadataStale},
	}
	for _, step := range steps {
		t.Run(strings.TrimSuffix(string(step.Kind)+"-"+step.Params.Mode, "-"), func(t *testing.T) {
			l := newCloudLab(t)
			ctx := context.Background()
			before, err := l.admin.Settings(ctx)
			if err != nil {
				t.Fatal(err)
			}
			step.Target, step.Duration = chaos.TargetAll, admin.Duration(300*time.Millisecond)
			p := chaos.Plan{Name: "wire", Workload: chaos.Workload{Pods: 1}, Steps: []chaos.Step{step},
				Invariants: chaos.Invariants{AuditClean: admin.Duration(time.Minute), PodsReady: admin.Duration(time.Minute)}}
			s, err := chaos.Resolve(p, 7)
			if err != nil {
				t.Fatal(err)
			}
			st := &cluster.State{FakecloudURL: l.srv.API.URL, AdminToken: "tok", Region: fakecloud.DefaultRegion,
				OperatorAccessKeyID: testAK, OperatorAccessKeySecret: testSecret, Dir: controlSocketDir(t)}
			eng, err := runner.LabEngine(st, busyWriter{l, step.Kind})
			if err != nil {
				t.Fatal(err)
			}
			res, err := eng.Run(ctx, s)
			if err != nil {
				t.Fatalf("run: %v\n%+v", err, res)
			}
			t.Logf("%s", res.Steps[0].Evidence)
			if got := res.Steps[0]; got.Fired == 0 || got.Evidence == "" {
				t.Errorf("step %+v did not prove it fired", got)
			}
			l.checkRestored(ctx, before)
		})
	}
}

// checkRestored fails unless fakecloud has no fault, no drained vSwitch
// and exactly the settings it had before.
func (l *cloudLab) checkRestored(ctx context.Context, before admin.Settings) {
	t := l.t
	if fs, err := l.admin.Faults(ctx); err != nil || len(fs) != 0 {
		t.Errorf("faults left: %+v, %v", fs, err)
	}
	if after, err := l.admin.Settings(ctx); err != nil || !reflect.DeepEqual(after, before) {
		t.Errorf("settings after the run %+v (%v), want exactly %+v", after, err, before)
	}
	w, err := l.admin.World(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range w.VSwitches {
		if v.Drained != 0 {
			t.Errorf("vSwitch %s still has %d drained", v.ID, v.Drained)
		}
	}
}

// controlSocketDir is a lab directory with a control socket that
// answers nothing: runner.LabEngine dials it, cloud kinds never use it.
func controlSocketDir(t *testing.T) string {
	dir := t.TempDir()
	l, err := net.Listen("unix", cluster.ControlSocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return dir
}
