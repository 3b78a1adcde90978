package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/terway-sim/terway/lab/cluster"
)

func newStatusCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the lab: phase, endpoints, nodes and their pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := cluster.ReadState(g.dir())
			if err != nil {
				return err
			}
			return status(cmd.Context(), g, st)
		},
	}
}

func status(ctx context.Context, g *globals, st *cluster.State) error {
	alive := st.SupervisorRunning()
	printf(g.stdout, "lab %s: %s (mode %s, supervisor pid %d, running: %v)\n", st.Name, st.Phase, st.Mode, st.SupervisorPID, alive)
	if st.Error != "" {
		printf(g.stdout, "error: %s\n", st.Error)
	}
	printf(g.stdout, "api server %s, fakecloud %s, state %s\n", st.APIServer, st.FakecloudURL, st.Dir)
	if st.Phase != cluster.PhaseReady {
		printf(g.stdout, "last step: %s\n", st.Progress)
		return nil
	}
	kube, err := kubeClient(st)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	perNode := map[string]int{}
	for _, p := range pods.Items {
		if !p.Spec.HostNetwork {
			perNode[p.Spec.NodeName]++
		}
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINSTANCE\tTYPE\tZONE\tIP\tREADY\tPODS\tMAX PODS")
	for _, n := range st.Nodes {
		ready := "?"
		for _, kn := range nodes.Items {
			if kn.Name == n.Name {
				ready = string(readyCondition(&kn))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", n.Name, n.InstanceID, n.InstanceType, n.Zone,
			n.PrimaryIP, ready, perNode[n.Name], n.MaxPods)
	}
	return tw.Flush()
}

func readyCondition(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

func kubeClient(st *cluster.State) (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 50, 100
	return kubernetes.NewForConfig(rc)
}

func newEnvCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "env",
		Short: "Print shell exports for a second terminal: KUBECONFIG and fakecloud's endpoint",
		Long: `env prints export lines for the running lab, for eval $(terway-lab env):
KUBECONFIG (admin), FAKECLOUD_URL (ECS/VPC API and admin API on loopback),
FAKECLOUD_ADMIN_TOKEN (bearer token of the admin API), TERWAY_LAB_DIR (state).
The scenario suites read the same variables.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := cluster.ReadState(g.dir())
			if err != nil {
				return err
			}
			for _, kv := range labEnv(st) {
				printf(g.stdout, "export %s\n", kv)
			}
			return nil
		},
	}
}
