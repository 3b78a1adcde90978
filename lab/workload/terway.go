package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/mode"
)

// Where terway is deployed (deploy/).
const (
	TerwayNamespace = "kube-system"
	TerwayDaemonSet = "terway"
	TerwayContainer = "terwayd"
	TerwayConfigMap = "eni-config"
	// ENIConfKey is the daemon's config in TerwayConfigMap.
	ENIConfKey = "eni_conf"
)

// Terway is how terway is deployed on a cluster: what a run is sized and
// judged by.
type Terway struct {
	// Mode is terwayd's --daemon-mode: ENIMultiIP, ENIOnly or VPC.
	Mode mode.Mode
	// MinPoolSize and MaxPoolSize bound each node's idle pool, as
	// eni_conf sets them (min lowered to max if above it, as the daemon
	// does). The instance type may clamp both further (to its capacity).
	MinPoolSize, MaxPoolSize int
	// MinENI is eni_conf's min_eni: when > 0 it replaces min_pool_size
	// by min_eni ENIs' worth of addresses, which depends on the instance
	// type; MinPoolSize is then 0 here.
	MinENI int
	// PoolSyncPeriod is how often the daemon trims and refills its pool
	// (ip_pool_sync_period).
	PoolSyncPeriod time.Duration
	// IPStack is eni_conf's ip_stack: "ipv4" or "dual".
	IPStack string
}

// TerwayConfig reads the mode from the terway DaemonSet and the pool
// bounds from the eni-config ConfigMap.
func TerwayConfig(ctx context.Context, kube kubernetes.Interface) (Terway, error) {
	ds, err := kube.AppsV1().DaemonSets(TerwayNamespace).Get(ctx, TerwayDaemonSet, metav1.GetOptions{})
	if err != nil {
		return Terway{}, fmt.Errorf("get daemonset %s/%s: %w", TerwayNamespace, TerwayDaemonSet, err)
	}
	m, err := DaemonMode(ds)
	if err != nil {
		return Terway{}, err
	}
	cm, err := kube.CoreV1().ConfigMaps(TerwayNamespace).Get(ctx, TerwayConfigMap, metav1.GetOptions{})
	if err != nil {
		return Terway{}, fmt.Errorf("get configmap %s/%s: %w", TerwayNamespace, TerwayConfigMap, err)
	}
	t, err := ParseENIConf([]byte(cm.Data[ENIConfKey]))
	if err != nil {
		return Terway{}, fmt.Errorf("configmap %s/%s: %w", TerwayNamespace, TerwayConfigMap, err)
	}
	t.Mode = m
	return t, nil
}

// DaemonMode is the --daemon-mode of the DaemonSet's terwayd container
// ("--daemon-mode=X" or "--daemon-mode X", in command or args), or
// mode.Default when it has none. The value is taken as written, not
// checked: the DaemonSet's terwayd refuses a bad one.
func DaemonMode(ds *appsv1.DaemonSet) (mode.Mode, error) {
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != TerwayContainer {
			continue
		}
		return modeFromArgs(append(append([]string{}, c.Command...), c.Args...))
	}
	return "", fmt.Errorf("daemonset %s/%s has no container %s", ds.Namespace, ds.Name, TerwayContainer)
}

func modeFromArgs(args []string) (mode.Mode, error) {
	for i, a := range args {
		for _, flag := range []string{"--daemon-mode", "-daemon-mode"} {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return mode.Mode(v), nil
			}
			if a == flag {
				if i+1 < len(args) {
					return mode.Mode(args[i+1]), nil
				}
				return "", errors.New("--daemon-mode without a value")
			}
		}
	}
	return mode.Default, nil
}

// ParseENIConf reads the pool settings of an eni_conf document with the
// daemon's own parser (Mode is left empty).
func ParseENIConf(data []byte) (Terway, error) {
	cfg, err := config.Parse(data)
	if err != nil {
		return Terway{}, fmt.Errorf("parse %s: %w", ENIConfKey, err)
	}
	t := Terway{MaxPoolSize: max(cfg.MaxPoolSize, 0), MinENI: cfg.MinENI, PoolSyncPeriod: cfg.IPPoolSyncPeriod.Duration,
		IPStack: cfg.IPStack}
	if cfg.MinENI <= 0 {
		t.MinPoolSize = min(max(cfg.MinPoolSize, 0), t.MaxPoolSize)
	}
	return t, nil
}
