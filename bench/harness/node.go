package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/daemon"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/rpc"
)

// NodeSpec describes a node to add.
type NodeSpec struct {
	// InstanceType is the ECS type (DefaultInstanceType when empty).
	InstanceType string
	// Daemon are eni_conf keys over BaseDaemonConfig, in simulated time.
	Daemon map[string]any
}

// Node is one instance with its terwayd: a fake Kubernetes clientset, a
// store and a socket in the harness's directory, a metadata listener on
// loopback bound to the instance, the real SDK talking to fakecloud.
type Node struct {
	Name       string
	InstanceID string
	// Kube is the node's own fake API server; pods must exist in it
	// before AllocIP.
	Kube *fake.Clientset
	// Daemon is the daemon; Backend and Tracing are gRPC clients on its
	// socket, as the CNI plugin and terway-cli use it.
	Daemon  *daemon.Daemon
	Backend rpc.TerwayBackendClient
	Tracing rpc.TerwayTracingClient
	// Config is the eni_conf the node runs with, in simulated time
	// (without paths and endpoints).
	Config map[string]any
	// MetadataURL is the node's metadata listener.
	MetadataURL string

	conn      *grpc.ClientConn
	md        *http.Server
	mdDone    chan struct{}
	served    chan error
	closeOnce sync.Once
	closeErr  error
}

// AddNode creates an instance in the node vSwitch (with a RAM role, so
// that its calls are attributed to it), starts its metadata listener and
// its daemon, and returns when the daemon serves.
func (h *Harness) AddNode(ctx context.Context, spec NodeSpec) (*Node, error) {
	if spec.InstanceType == "" {
		spec.InstanceType = DefaultInstanceType
	}
	h.mu.Lock()
	h.seq++
	idx := h.seq
	h.mu.Unlock()
	n := &Node{Name: fmt.Sprintf("node-%d", idx), InstanceID: fmt.Sprintf("i-bp1bench%012d", idx)}
	if _, err := h.Cloud.AddInstance(fakecloud.InstanceSpec{ID: n.InstanceID, Name: n.Name, InstanceType: spec.InstanceType,
		VSwitchID: NodeVSwitch, SecurityGroupIDs: []string{fakecloud.DefaultSecurityGroup}, RAMRole: fakecloud.DefaultRAMRole}); err != nil {
		return nil, fmt.Errorf("add instance for %s: %w", n.Name, err)
	}
	dir := filepath.Join(h.dir, "n"+strconv.Itoa(idx))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("node directory: %w", err)
	}
	n.Config = MergeConfig(BaseDaemonConfig(h.podVSwitchIDs()), spec.Daemon)
	if err := n.start(ctx, h, dir); err != nil {
		_ = n.Close()
		return nil, fmt.Errorf("start %s: %w", n.Name, err)
	}
	h.mu.Lock()
	h.nodes = append(h.nodes, n)
	h.mu.Unlock()
	return n, nil
}

func (h *Harness) podVSwitchIDs() []string {
	var out []string
	for _, v := range h.Cloud.VSwitches() {
		if v.ID != NodeVSwitch {
			out = append(out, v.ID)
		}
	}
	return out
}

func (n *Node) start(ctx context.Context, h *Harness, dir string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("metadata listener: %w", err)
	}
	n.MetadataURL = "http://" + ln.Addr().String()
	n.md = fakecloud.NewHTTPServer(h.Cloud.MetadataHandler(n.InstanceID), fakecloud.ServerTimeouts{ReadHeader: time.Minute}, nil)
	n.mdDone = make(chan struct{})
	go func() { defer close(n.mdDone); _ = n.md.Serve(ln) }()
	eff, err := scaledConfig(n.Config, h.scale)
	if err != nil {
		return err
	}
	socket := filepath.Join(dir, "eni.socket")
	for k, v := range map[string]any{"endpoint": h.APIURL, "metadata_endpoint": n.MetadataURL,
		"store_path": filepath.Join(dir, "store.db"), "socket_path": socket, "cni_conf_dir": filepath.Join(dir, "net.d"),
		"cni_bin_dir": filepath.Join(dir, "bin"), "cni_cache_dir": filepath.Join(dir, "cache")} {
		eff[k] = v
	}
	n.Kube = fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}})
	cfg, err := NodeConfig(ctx, n.Kube, n.Name, eff)
	if err != nil {
		return err
	}
	d, err := daemon.New(ctx, daemon.Options{Mode: mode.ENIMultiIP, Config: cfg, NodeName: n.Name, Kube: clientset.Wrap(n.Kube),
		Logger: h.opts.Logger.With("node", n.Name), StoreNoSync: h.opts.StoreNoSync})
	if err != nil {
		return err
	}
	n.Daemon = d
	n.served = make(chan error, 1)
	go func() { n.served <- d.Serve(context.Background()) }()
	select {
	case <-d.Ready():
	case err := <-n.served:
		n.served <- err
		return fmt.Errorf("daemon stopped before serving: %w", err)
	}
	if n.conn, err = grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return fmt.Errorf("dial the daemon: %w", err)
	}
	n.Backend, n.Tracing = rpc.NewTerwayBackendClient(n.conn), rpc.NewTerwayTracingClient(n.conn)
	return nil
}

// Close stops the daemon and the node's listeners (the instance stays).
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		var errs []error
		if n.conn != nil {
			_ = n.conn.Close()
		}
		if n.Daemon != nil {
			errs = append(errs, n.Daemon.Close())
			if err := <-n.served; err != nil {
				errs = append(errs, fmt.Errorf("daemon serve: %w", err))
			}
		}
		if n.md != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := n.md.Shutdown(ctx); err != nil {
				_ = n.md.Close()
			}
			cancel()
			<-n.mdDone
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// AddPod creates a running pod of this node in its fake API server.
func (n *Node) AddPod(ctx context.Context, namespace, name string) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "-" + name)},
		Spec: corev1.PodSpec{NodeName: n.Name}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if _, err := n.Kube.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// DeletePod removes a pod from the node's fake API server.
func (n *Node) DeletePod(ctx context.Context, namespace, name string) error {
	if err := n.Kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// Alloc is the CNI plugin's ADD: AllocIP over the socket. It returns the
// pod's IPv4 address.
func (n *Node) Alloc(ctx context.Context, namespace, name string) (string, error) {
	r, err := n.Backend.AllocIP(ctx, &rpc.AllocIPRequest{K8SPodNamespace: namespace, K8SPodName: name,
		K8SPodInfraContainerId: "c-" + name, Netns: "/var/run/netns/c-" + name, IfName: "eth0"})
	if err != nil {
		return "", err
	}
	if !r.Success || len(r.NetConfs) == 0 || r.NetConfs[0].BasicInfo == nil || r.NetConfs[0].BasicInfo.PodIP == nil {
		return "", fmt.Errorf("AllocIP %s/%s: unsuccessful reply", namespace, name)
	}
	return r.NetConfs[0].BasicInfo.PodIP.IPv4, nil
}

// Release is the CNI plugin's DEL: ReleaseIP over the socket.
func (n *Node) Release(ctx context.Context, namespace, name string) error {
	_, err := n.Backend.ReleaseIP(ctx, &rpc.ReleaseIPRequest{K8SPodNamespace: namespace, K8SPodName: name,
		K8SPodInfraContainerId: "c-" + name})
	return err
}

// PoolStats are the pool's counts as terway-cli reads them.
type PoolStats struct {
	ENIs, Total, Idle, InUse, Reserved, Inflight, Waiting int
	// Releasing counts addresses being given back (unassign, ENI release).
	Releasing int
	// Pending: a demand or release waits in the pool's batch window.
	Pending bool
}

// Quiet reports whether no cloud operation of the pool is in flight or
// about to start.
func (s PoolStats) Quiet() bool {
	return s.Inflight == 0 && s.Waiting == 0 && s.Releasing == 0 && !s.Pending
}

// PoolStats reads the pool's counts through the tracing service.
func (n *Node) PoolStats(ctx context.Context) (PoolStats, error) {
	r, err := n.Tracing.GetResourceTrace(ctx, &rpc.ResourceTypeNameRequest{Type: "resource_pool", Name: "default"})
	if err != nil {
		return PoolStats{}, fmt.Errorf("pool trace of %s: %w", n.Name, err)
	}
	var s PoolStats
	fields := map[string]*int{"enis": &s.ENIs, "total": &s.Total, "idle": &s.Idle, "inuse": &s.InUse,
		"reserved": &s.Reserved, "inflight": &s.Inflight, "waiting": &s.Waiting}
	for _, e := range r.Trace {
		if p, ok := fields[e.Key]; ok {
			if *p, err = strconv.Atoi(e.Value); err != nil {
				return PoolStats{}, fmt.Errorf("pool trace of %s: %s=%q: %w", n.Name, e.Key, e.Value, err)
			}
			continue
		}
		if e.Key == "pending" {
			s.Pending = e.Value == "true"
			continue
		}
		if strings.HasPrefix(e.Key, "ip/") && strings.Contains(e.Value, " releasing") {
			s.Releasing++
		}
	}
	return s, nil
}
