package routectl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/terway-sim/terway/daemon/backoff"
)

// syncKey is the one work item: every node event asks for a comparison of
// the whole table, so bursts of events collapse into one sync.
const syncKey = "route-table"

// Controller keeps the VPC route table in line with the nodes' podCIDRs.
type Controller struct {
	o       Options
	log     *slog.Logger
	api     *vpcAPI
	backoff *backoff.Set

	syncMu  sync.Mutex
	tableID string // cached system route table; guarded by syncMu
}

// New checks o and builds the controller's VPC client.
func New(o Options) (*Controller, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	api, err := newVPCAPI(o.Endpoint, o.Region, o.AccessKeyID, o.AccessKeySecret)
	if err != nil {
		return nil, err
	}
	log := o.Logger.With("component", "routectl", "vpc", o.VpcID)
	return &Controller{o: o, log: log, api: api, backoff: o.Backoff}, nil
}

// Run is New followed by Controller.Run.
func Run(ctx context.Context, o Options) error {
	c, err := New(o)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// Run watches Nodes and syncs the route table on every change and every
// Resync, until ctx ends; a failed sync is repeated with growing delays
// (from PolicyAPI's first step up to Resync). It returns nil when ctx
// ends, an error when the node informer cannot start.
func (c *Controller) Run(ctx context.Context) error {
	if c.o.Kube == nil {
		return errors.New("routectl: a Kubernetes client is required")
	}
	first := c.backoff.Get(PolicyAPI).Duration
	if first <= 0 {
		first = time.Second // never requeue a failed sync in a hot loop
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](first, c.o.Resync),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "routectl"})
	defer queue.ShutDown()

	// Periodic resyncs come from the ticker below, which also covers a
	// cluster without nodes; the informer needs none of its own.
	factory := informers.NewSharedInformerFactory(c.o.Kube, 0)
	defer factory.Shutdown()
	nodes := factory.Core().V1().Nodes()
	enqueue := func(any) { queue.Add(syncKey) }
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, obj any) {
			if routingChanged(old, obj) {
				enqueue(obj)
			}
		},
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("routectl: watch nodes: %w", err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("routectl: %v informer did not sync", typ)
		}
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for c.work(ctx, queue, nodes.Lister().List) {
		}
	}()
	go func() {
		defer wg.Done()
		c.tick(ctx, queue)
	}()
	queue.Add(syncKey)
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	return nil
}

// tick asks for a sync every Resync until ctx ends.
func (c *Controller) tick(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) {
	t := time.NewTicker(c.o.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			queue.Add(syncKey)
		}
	}
}

// work handles one item; false means the queue is shut down.
func (c *Controller) work(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string],
	list func(labels.Selector) ([]*corev1.Node, error)) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	nodes, err := list(labels.Everything())
	if err == nil {
		err = c.Sync(ctx, nodes)
	}
	switch {
	case err == nil:
		queue.Forget(key)
	case ctx.Err() != nil:
		// Shutting down: the error is the cancellation.
	default:
		c.log.Error("route sync failed; will retry", "err", err, "retries", queue.NumRequeues(key))
		queue.AddRateLimited(key)
	}
	return true
}

// routingChanged reports whether a node update touches what the route
// table depends on; status heartbeats do not, and cause no sync.
func routingChanged(old, cur any) bool {
	a, ok1 := old.(*corev1.Node)
	b, ok2 := cur.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	return a.Spec.ProviderID != b.Spec.ProviderID || a.Spec.PodCIDR != b.Spec.PodCIDR ||
		!slices.Equal(a.Spec.PodCIDRs, b.Spec.PodCIDRs)
}
