package manifests

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager owns, for server-side apply, the fields the lab sets.
const FieldManager = "terway-lab"

// step is one object with where it goes in the API.
type step struct {
	obj       *unstructured.Unstructured
	gvr       schema.GroupVersionResource
	namespace string // "" for a cluster-scoped object
}

func (s step) String() string {
	if s.namespace == "" {
		return fmt.Sprintf("%s %s", s.obj.GetKind(), s.obj.GetName())
	}
	return fmt.Sprintf("%s %s/%s", s.obj.GetKind(), s.namespace, s.obj.GetName())
}

// Apply creates or updates objs by server-side apply as FieldManager,
// taking over fields other managers own (the lab's manifests are the
// truth), in the order of plan: a namespaced object never goes before
// the cluster-scoped ones, Namespaces first of all.
func Apply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	dyn, steps, err := connect(cfg, objs)
	if err != nil {
		return err
	}
	for _, s := range steps {
		_, err := dyn.Resource(s.gvr).Namespace(s.namespace).Apply(ctx, s.obj.GetName(), s.obj,
			metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("apply %s: %w", s, err)
		}
	}
	return nil
}

// Delete deletes objs in the reverse order of Apply, workloads first.
// Objects already gone are fine; it goes on after an error and reports
// them all. It does not wait for the objects to disappear (a DaemonSet's
// pods are then still terminating).
func Delete(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	dyn, steps, err := connect(cfg, objs)
	if err != nil {
		return err
	}
	slices.Reverse(steps)
	background := metav1.DeletePropagationBackground
	var errs []error
	for _, s := range steps {
		err := dyn.Resource(s.gvr).Namespace(s.namespace).Delete(ctx, s.obj.GetName(),
			metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// connect makes the clients and maps objs to API resources.
func connect(cfg *rest.Config, objs []*unstructured.Unstructured) (*dynamic.DynamicClient, []step, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("dynamic client: %w", err)
	}
	steps, err := plan(objs, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)))
	if err != nil {
		return nil, nil, err
	}
	return dyn, steps, nil
}

// plan maps every object to its resource and orders them for creation:
// Namespaces and CustomResourceDefinitions, then the other cluster-scoped
// objects, then the namespaced ones. Within a group the given order stays
// (kustomize's: ServiceAccounts and RBAC before ConfigMaps before
// workloads). A namespaced object without a namespace goes to "default",
// as kubectl does.
func plan(objs []*unstructured.Unstructured, mapper meta.RESTMapper) ([]step, error) {
	steps := make([]step, 0, len(objs))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("%s %s: find its API resource: %w", gvk, o.GetName(), err)
		}
		s := step{obj: o, gvr: m.Resource}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if s.namespace = o.GetNamespace(); s.namespace == "" {
				s.namespace = metav1.NamespaceDefault
			}
		}
		steps = append(steps, s)
	}
	slices.SortStableFunc(steps, func(a, b step) int { return rank(a) - rank(b) })
	return steps, nil
}

// rank is a step's place in plan's order.
func rank(s step) int {
	switch {
	case s.namespace != "":
		return 2
	case s.gvr.GroupResource() == schema.GroupResource{Resource: "namespaces"},
		s.gvr.GroupResource() == schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}:
		return 0
	default:
		return 1
	}
}
