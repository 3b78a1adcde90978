package runner

import (
	"context"
	"io"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/workload"
)

// Namespace holds the chaos workload.
const Namespace = "terway-chaos"

// ProbeTimeout bounds one connectivity probe: probes go through the API
// server's exec, which a lab under load answers slowly.
const ProbeTimeout = 15 * time.Second

// LabEngine is an engine for the lab of st: fakecloud's admin client is
// its Cloud, the supervisor's control socket its Lab (node lifecycle and
// component kills), an ECS client with the lab's operator AccessKey —
// not the daemons' — its Operator, and the lab's nodes its Nodes.
func LabEngine(st *cluster.State, progress io.Writer) (*chaos.Engine, error) {
	op, err := chaos.NewSDKOperator(chaos.OperatorOptions{Endpoint: st.FakecloudURL, Region: st.Region,
		AccessKeyID: st.OperatorAccessKeyID, AccessKeySecret: st.OperatorAccessKeySecret})
	if err != nil {
		return nil, err
	}
	lab, err := cluster.DialControl(st.Dir)
	if err != nil {
		return nil, err
	}
	e := &chaos.Engine{Cloud: &admin.Client{URL: st.FakecloudURL, Token: st.AdminToken}, Lab: lab, Operator: op,
		Progress: progress}
	for _, n := range st.Nodes {
		e.Nodes = append(e.Nodes, chaos.Node{Name: n.Name, InstanceID: n.InstanceID})
	}
	return e, nil
}

var _ chaos.Lab = (*cluster.Control)(nil)

// LabConfig wires a run of s to the lab of st: the workload of the plan's
// size in Namespace (an ENI each in ENIOnly mode), spread over the nodes;
// probes through exec (the API server) with ProbeTimeout; the lab's
// audit. eng is the caller's, with its clients as wired.
func LabConfig(st *cluster.State, kube kubernetes.Interface, exec workload.Runner, eng *chaos.Engine, s *chaos.Schedule, progress io.Writer) (Config, error) {
	spec := workload.Spec{Namespace: Namespace, Replicas: int32(s.Plan.Workload.Pods),
		ExclusiveENI: st.Mode == mode.ENIOnly, Spread: true}
	if s.Plan.Workload.EIP {
		spec.Annotations = map[string]string{k8s.AnnotationPodWithEIP: "true"}
	}
	w, err := workload.New(kube, spec)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Engine: eng, Kube: kube, Namespace: Namespace, Workload: w, VPC: st.Mode == mode.VPC, Progress: progress,
		Audit: func(ctx context.Context, within time.Duration) (*audit.Report, error) {
			// The lab's nodes as they are at each round: a plan may
			// release one.
			return audit.RunUntilCleanOf(ctx, cluster.LiveAuditInput(st.Dir, kube), within)
		}}
	if exec != nil {
		cfg.Prober = workload.Prober{Runner: exec, Timeout: ProbeTimeout}
	}
	return cfg, nil
}
