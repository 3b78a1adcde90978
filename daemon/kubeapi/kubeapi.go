// Package kubeapi is the part of the Kubernetes API terwayd uses: pods,
// nodes, ConfigMaps and events of core/v1, and nothing else.
//
// client-go's clientset (and every typed client, through
// k8s.io/client-go/kubernetes/scheme) registers all of Kubernetes' 55
// group versions when the program starts: a daemon on every node of a
// fleet would carry their code and their scheme in memory for the four
// resources it reads. Here the same generated machinery (gentype, the rest
// client, the core/v1 types) runs over a scheme of core/v1 alone.
package kubeapi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
)

// Interface is the daemon's access to the API server. Its methods have
// client-go's signatures, so that a clientset's typed clients satisfy the
// resource interfaces (see package clientset).
type Interface interface {
	Pods(namespace string) Pods
	Nodes() Nodes
	ConfigMaps(namespace string) ConfigMaps
	Events(namespace string) Events
}

// Pods is what the daemon does with pods: its informer lists and
// watches them, it reads and annotates single pods, and it evicts a pod
// whose address was lost out of band (the Eviction API, so that
// disruption budgets hold).
type Pods interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
	EvictV1(ctx context.Context, eviction *policyv1.Eviction) error
}

// Nodes is what the daemon does with nodes: reads its own and its peers of
// the same instance type, annotates its own and sets its conditions.
type Nodes interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// ConfigMaps reads the dynamic config.
type ConfigMaps interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
}

// Events is what client-go's event recorder writes through, and the
// daemon's own last words before it exits.
type Events interface {
	Create(ctx context.Context, event *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
	Update(ctx context.Context, event *corev1.Event, opts metav1.UpdateOptions) (*corev1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error)
}

// Scheme knows core/v1, policy/v1 (an eviction is one) and the meta
// types of requests (list and watch options): all the daemon sends or
// receives.
var Scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("kubeapi: scheme: %v", err))
		}
	}
	return s
}

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

// client serves Interface from one core/v1 REST client.
type client struct{ rest rest.Interface }

// NewForConfig returns a client of the API server rc describes, with its
// limits (QPS, burst, timeout) and credentials.
func NewForConfig(rc *rest.Config) (Interface, error) {
	c := rest.CopyConfig(rc)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(Scheme, codecs).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc2, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("core/v1 client of %s: %w", rc.Host, err)
	}
	return client{rest: rc2}, nil
}

func (c client) Pods(namespace string) Pods {
	return pods{gentype.NewClientWithList("pods", c.rest, parameterCodec, namespace,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} },
		gentype.PrefersProtobuf[*corev1.Pod]())}
}

// pods adds the eviction subresource to the generic client.
type pods struct {
	*gentype.ClientWithList[*corev1.Pod, *corev1.PodList]
}

func (p pods) EvictV1(ctx context.Context, eviction *policyv1.Eviction) error {
	return p.GetClient().Post().Namespace(p.GetNamespace()).Resource("pods").Name(eviction.Name).
		SubResource("eviction").Body(eviction).Do(ctx).Error()
}

func (c client) Nodes() Nodes {
	return gentype.NewClientWithList("nodes", c.rest, parameterCodec, "",
		func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} },
		gentype.PrefersProtobuf[*corev1.Node]())
}

func (c client) ConfigMaps(namespace string) ConfigMaps {
	return gentype.NewClient("configmaps", c.rest, parameterCodec, namespace,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, gentype.PrefersProtobuf[*corev1.ConfigMap]())
}

func (c client) Events(namespace string) Events {
	return gentype.NewClient("events", c.rest, parameterCodec, namespace,
		func() *corev1.Event { return &corev1.Event{} }, gentype.PrefersProtobuf[*corev1.Event]())
}
