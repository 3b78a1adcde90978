package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/terway-sim/terway/lab/manifests"
)

// Lab pool bounds: small enough that a demo shows both a cold and a warm
// pool, and that the audit can check the pool returns within them.
const (
	labMinPool = 0
	labMaxPool = 10
)

// CNILogPath is where the lab's CNI plugin logs on each node (a node
// path); the demo reads ADD latencies from it.
const CNILogPath = "/var/lib/cni/terway/terway-cni.log"

// labCNIConf is deploy/'s 10-terway.conf plus a log file, so that the
// plugin's own view of every ADD (its total time) can be read back.
const labCNIConf = `{
  "cniVersion": "1.1.0",
  "name": "terway",
  "type": "terway",
  "eniip_virtual_type": "Veth",
  "log_file": "` + CNILogPath + `"
}
`

// eniConf is the lab's eni_conf: the world's vSwitches per zone (but the
// default world's pod vSwitches, left for dynamic config) and its
// security group. It carries no AccessKey: terwayd takes STS credentials
// from the instance RAM role through the metadata service.
func (s *Supervisor) eniConf() ([]byte, error) {
	vsw := map[string][]string{}
	for _, v := range nodeVSwitches(s.cloud.World().VSwitches) {
		vsw[v.ZoneID] = append(vsw[v.ZoneID], v.ID)
	}
	conf := map[string]any{
		"version":                  "1",
		"vswitches":                vsw,
		"security_group":           s.securityGroup(),
		"service_cidr":             serviceCIDR,
		"min_pool_size":            labMinPool,
		"max_pool_size":            labMaxPool,
		"ip_stack":                 s.cfg.IPStack,
		"vswitch_selection_policy": "ordered",
	}
	return json.MarshalIndent(conf, "", "  ")
}

func (s *Supervisor) securityGroup() string {
	if len(s.spec.SecurityGroups) == 0 {
		return ""
	}
	return s.spec.SecurityGroups[0].ID
}

// deployTerway applies deploy/ with the lab overlay, as a user applies
// the same manifests to any cluster.
func (s *Supervisor) deployTerway(ctx context.Context) error {
	conf, err := s.eniConf()
	if err != nil {
		return err
	}
	objs, err := manifests.Render(manifests.Params{Image: s.cfg.TerwayImage, Mode: s.cfg.Mode, ENIConf: conf,
		CNIConf: []byte(labCNIConf)})
	if err != nil {
		return fmt.Errorf("render deploy/: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", s.st.Kubeconfig)
	if err != nil {
		return err
	}
	if err := manifests.Apply(ctx, rc, objs); err != nil {
		return fmt.Errorf("apply deploy/: %w", err)
	}
	return nil
}

// waitReady waits until every node is Ready and the terway DaemonSet has
// a ready pod on each.
func (s *Supervisor) waitReady(ctx context.Context) error {
	want := len(s.st.Nodes)
	return waitFor(ctx, nil, "nodes Ready and terway running", 5*time.Minute, func(ctx context.Context) error {
		if p := s.procs.firstExited(); p != nil {
			_, err := p.exited()
			return stopWaiting{fmt.Errorf("%s exited (%v); log tail:\n%s", p.name, err, p.logTail())}
		}
		nodes, err := s.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes.Items {
			if nodeReady(&n) {
				ready++
			}
		}
		if ready < want {
			return fmt.Errorf("%d of %d nodes Ready", ready, want)
		}
		var ds *appsv1.DaemonSet
		if ds, err = s.kube.AppsV1().DaemonSets("kube-system").Get(ctx, "terway", metav1.GetOptions{}); err != nil {
			return err
		}
		if int(ds.Status.NumberReady) < want {
			return fmt.Errorf("terway ready on %d of %d nodes", ds.Status.NumberReady, want)
		}
		return nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
