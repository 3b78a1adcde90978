// Package k8s is the daemon's view of Kubernetes: the pods of its node
// (through an informer), what their annotations and owners ask for,
// events on pods and the node, and the node's capacity annotation and
// conditions.
package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/terway-sim/terway/daemon/kubeapi"
)

// Annotations and resources the daemon reads or writes.
const (
	AnnotationENI            = "k8s.aliyun.com/ENI"
	AnnotationIngress        = "k8s.aliyun.com/ingress-bandwidth"
	AnnotationEgress         = "k8s.aliyun.com/egress-bandwidth"
	AnnotationIPReservation  = "k8s.aliyun.com/pod-ip-reservation"
	AnnotationNetworkPrio    = "k8s.aliyun.com/network-priority"
	AnnotationMaxAvailableIP = "k8s.aliyun.com/max-available-ip"
	// AnnotationInstanceTypeInfo on the node is the cloud's description of
	// its instance type (JSON, DescribeInstanceTypes' InstanceType), as
	// Terway publishes it: a daemon that lost its store need not ask the
	// cloud again.
	AnnotationInstanceTypeInfo = "alibabacloud.com/instance-type-info"
	// AnnotationPodIPs is the pod's addresses as the daemon allocated
	// them, comma-separated ("192.168.0.7" or "192.168.0.7,fd00::7"),
	// written after AllocIP (enable_patch_pod_ips) and read back when the
	// daemon restores what every pod holds.
	AnnotationPodIPs = "k8s.aliyun.com/pod-ips"
	ResourceENI      = "aliyun/eni"
	// LabelDynamicConfig names the ConfigMap of a node's dynamic config.
	LabelDynamicConfig = "terway-config"
	// ConditionSufficientIP is the node condition for address supply.
	ConditionSufficientIP corev1.NodeConditionType = "SufficientIP"
)

// Pod is what the daemon needs to know about a pod.
type Pod struct {
	Namespace string
	Name      string
	UID       string
	NodeName  string
	Phase     corev1.PodPhase
	// ExclusiveENI: the pod asks for a whole ENI (annotation or aliyun/eni).
	ExclusiveENI bool
	// Sticky: the pod keeps its address across re-creation (StatefulSet
	// owners, custom kinds, or the reservation annotation).
	Sticky bool
	// Ingress and Egress are bandwidth limits in bytes per second (0: none).
	Ingress, Egress uint64
	NetworkPriority string
	OwnerKinds      []string
	Annotations     map[string]string
	// IPs are the pod's addresses as the kubelet reported them
	// (status.podIPs); AnnotatedIPs as the daemon wrote them into the
	// pod-ips annotation. Empty for a pod whose network is not set up yet.
	IPs          []netip.Addr
	AnnotatedIPs []netip.Addr
}

// Key is "namespace/name".
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// Alive reports whether the pod still needs its network.
func (p Pod) Alive() bool { return p.Phase != corev1.PodSucceeded && p.Phase != corev1.PodFailed }

// Client is the daemon's Kubernetes access for one node.
type Client struct {
	cs          kubeapi.Interface
	node        string
	statefulish map[string]bool
	log         *slog.Logger
	informer    cache.SharedIndexInformer
	pods        listerscorev1.PodLister
	synced      cache.InformerSynced
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	// stop ends the informers: they live until Stop, not as long as the
	// context that started them.
	stop     chan struct{}
	stopOnce sync.Once
	// ran is closed when the informer started by Start has returned.
	ran chan struct{}
}

// New returns a client watching the pods of node. statefulKinds are owner
// kinds (besides StatefulSet) whose pods keep their address.
func New(cs kubeapi.Interface, node string, statefulKinds []string, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kinds := map[string]bool{"statefulset": true}
	for _, k := range statefulKinds {
		kinds[strings.ToLower(k)] = true
	}
	inf := cache.NewSharedIndexInformer(podsOfNode(cs, node), &corev1.Pod{}, 30*time.Minute,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	b := record.NewBroadcaster()
	b.StartRecordingToSink(eventSink{cs})
	rec := b.NewRecorder(kubeapi.Scheme, corev1.EventSource{Component: "terway-daemon", Host: node})
	return &Client{cs: cs, node: node, statefulish: kinds, log: log, informer: inf, pods: listerscorev1.NewPodLister(inf.GetIndexer()),
		synced: inf.HasSynced, broadcaster: b, recorder: rec, stop: make(chan struct{})}
}

// podsOfNode lists and watches the pods scheduled to node, with what the
// API server (or a fake clientset) says of watch-list support.
func podsOfNode(cs kubeapi.Interface, node string) cache.ListerWatcher {
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	pods := cs.Pods(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return pods.Watch(ctx, o)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, cs)
}

// Start runs the informer until Stop and waits (at most as long as ctx)
// for its cache to fill.
func (c *Client) Start(ctx context.Context) error {
	c.ran = make(chan struct{})
	go func() {
		defer close(c.ran)
		c.informer.RunWithContext(wait.ContextForChannel(c.stop))
	}()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("pod informer of node %s did not sync: %w", c.node, ctx.Err())
	}
	return nil
}

// Synced reports whether the pod informer has listed the node's pods:
// until it has, Pods is no account of them.
func (c *Client) Synced() bool { return c.synced() }

// Stop ends event recording and the informer, and waits for the
// informer to return.
func (c *Client) Stop() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.broadcaster.Shutdown()
		if c.ran != nil {
			<-c.ran
		}
	})
}

// NodeName is the node this client serves.
func (c *Client) NodeName() string { return c.node }

// Pod returns a pod of this node, from the informer cache or, for a pod
// the cache has not seen yet, from the API server. A pod that does not
// exist gives an error for which IsNotFound is true.
func (c *Client) Pod(ctx context.Context, namespace, name string) (Pod, error) {
	p, err := c.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		p, err = c.cs.Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return Pod{}, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	return c.convert(p), nil
}

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return apierrors.IsNotFound(err) }

// Pods lists the pods of this node from the informer cache.
func (c *Client) Pods() ([]Pod, error) {
	list, err := c.pods.List(labelsEverything())
	if err != nil {
		return nil, err
	}
	out := make([]Pod, 0, len(list))
	for _, p := range list {
		if p.Spec.NodeName == c.node {
			out = append(out, c.convert(p))
		}
	}
	return out, nil
}

// PodExists asks the API server directly (GC double-checks before
// releasing).
func (c *Client) PodExists(ctx context.Context, namespace, name string) (Pod, bool, error) {
	p, err := c.cs.Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Pod{}, false, nil
	}
	if err != nil {
		return Pod{}, false, err
	}
	return c.convert(p), true, nil
}

func (c *Client) convert(p *corev1.Pod) Pod {
	out := Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), NodeName: p.Spec.NodeName, Phase: p.Status.Phase,
		Annotations: map[string]string{}}
	for k, v := range p.Annotations {
		out.Annotations[k] = v
	}
	for _, o := range p.OwnerReferences {
		out.OwnerKinds = append(out.OwnerKinds, o.Kind)
		if c.statefulish[strings.ToLower(o.Kind)] {
			out.Sticky = true
		}
	}
	if v, err := strconv.ParseBool(p.Annotations[AnnotationIPReservation]); err == nil && v {
		out.Sticky = true
	}
	switch v := strings.ToLower(p.Annotations[AnnotationENI]); v {
	case "", "false", "0":
	default:
		out.ExclusiveENI = true
	}
	for _, ct := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if _, ok := ct.Resources.Requests[ResourceENI]; ok {
			out.ExclusiveENI = true
		}
		if _, ok := ct.Resources.Limits[ResourceENI]; ok {
			out.ExclusiveENI = true
		}
	}
	var err error
	if out.Ingress, err = ParseBandwidth(p.Annotations[AnnotationIngress]); err != nil {
		c.log.Warn("ignoring a bad bandwidth annotation", "pod", out.Key(), "annotation", AnnotationIngress, "err", err)
	}
	if out.Egress, err = ParseBandwidth(p.Annotations[AnnotationEgress]); err != nil {
		c.log.Warn("ignoring a bad bandwidth annotation", "pod", out.Key(), "annotation", AnnotationEgress, "err", err)
	}
	out.NetworkPriority = p.Annotations[AnnotationNetworkPrio]
	if !p.Spec.HostNetwork { // a host-network pod's address is the node's
		out.IPs = parseIPs(append([]string{p.Status.PodIP}, podIPStrings(p.Status.PodIPs)...))
		out.AnnotatedIPs = parseIPs(strings.Split(p.Annotations[AnnotationPodIPs], ","))
	}
	return out
}

func podIPStrings(ips []corev1.PodIP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.IP
	}
	return out
}

// parseIPs reads addresses, skipping empty and malformed ones and repeats.
func parseIPs(ss []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// ParseBandwidth reads a bandwidth annotation such as "10M", "512K",
// "1G", "100Mi", "10MB": a number of bits per second with an optional
// binary multiple (K, M, G, T; an optional trailing "B", "i" or "iB" is
// accepted as Terway does). It returns bytes per second; "" is 0.
func ParseBandwidth(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	t := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s, "B"), "b"), "i")
	mult := uint64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1<<10, t[:n-1]
		case 'm', 'M':
			mult, t = 1<<20, t[:n-1]
		case 'g', 'G':
			mult, t = 1<<30, t[:n-1]
		case 't', 'T':
			mult, t = 1<<40, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bandwidth %q: want a positive number with an optional K/M/G/T", s)
	}
	return uint64(v * float64(mult) / 8), nil
}

// EventType is Normal or Warning.
type EventType string

// Event types.
const (
	Normal  EventType = EventType(corev1.EventTypeNormal)
	Warning EventType = EventType(corev1.EventTypeWarning)
)

// PodEvent records an event on a pod.
func (c *Client) PodEvent(namespace, name, uid string, t EventType, reason, message string) {
	ref := &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: name, UID: types.UID(uid), APIVersion: "v1"}
	c.recorder.Event(ref, string(t), reason, message)
}

// NodeEvent records an event on the node.
func (c *Client) NodeEvent(t EventType, reason, message string) {
	ref := &corev1.ObjectReference{Kind: "Node", Name: c.node, UID: types.UID(c.node), APIVersion: "v1"}
	c.recorder.Event(ref, string(t), reason, message)
}

// Node returns the node object.
func (c *Client) Node(ctx context.Context) (*corev1.Node, error) {
	n, err := c.cs.Nodes().Get(ctx, c.node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", c.node, err)
	}
	return n, nil
}

// NodesOfType lists up to limit nodes labelled with instanceType
// (node.kubernetes.io/instance-type), this one included.
func (c *Client) NodesOfType(ctx context.Context, instanceType string, limit int64) ([]corev1.Node, error) {
	sel := labels.SelectorFromSet(labels.Set{corev1.LabelInstanceTypeStable: instanceType}).String()
	l, err := c.cs.Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list nodes of type %s: %w", instanceType, err)
	}
	return l.Items, nil
}

// AnnotateNode merges annotations into the node.
func (c *Client) AnnotateNode(ctx context.Context, ann map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	_, err = c.cs.Nodes().Patch(ctx, c.node, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("annotate node %s: %w", c.node, err)
	}
	return nil
}

// SetCondition sets a node condition (status subresource), keeping the
// transition time when the status does not change.
func (c *Client) SetCondition(ctx context.Context, t corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) error {
	n, err := c.Node(ctx)
	if err != nil {
		return err
	}
	now := metav1.Now()
	cond := corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
	for _, old := range n.Status.Conditions {
		if old.Type == t && old.Status == status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = c.cs.Nodes().Patch(ctx, c.node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("set condition %s on node %s: %w", t, c.node, err)
	}
	return nil
}

// ConfigMapData reads a ConfigMap's data.
func (c *Client) ConfigMapData(ctx context.Context, namespace, name string) (map[string]string, error) {
	cm, err := c.cs.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get ConfigMap %s/%s: %w", namespace, name, err)
	}
	return cm.Data, nil
}

func labelsEverything() labels.Selector { return labels.Everything() }
