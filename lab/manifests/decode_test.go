package manifests

import (
	"fmt"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// rendered is a render's objects decoded into their typed structs.
type rendered struct {
	all          map[string]runtime.Object // "Kind ns/name"
	daemonSet    *appsv1.DaemonSet
	configMap    *corev1.ConfigMap
	clusterRole  *rbacv1.ClusterRole
	role         *rbacv1.Role
	crb          *rbacv1.ClusterRoleBinding
	roleBinding  *rbacv1.RoleBinding
	serviceAcct  *corev1.ServiceAccount
	objectsOrder []string
}

// typed points to the fields of r that hold an object by its type, one
// per kind the manifests must have.
func (r *rendered) typed() []any {
	return []any{&r.daemonSet, &r.configMap, &r.clusterRole, &r.role, &r.crb, &r.roleBinding, &r.serviceAcct}
}

// decodeStrict decodes every object into the typed struct of its kind,
// failing on any field the type does not have, and checks that the
// objects refer to each other correctly.
func decodeStrict(t *testing.T, objs []*unstructured.Unstructured) *rendered {
	t.Helper()
	r := &rendered{all: map[string]runtime.Object{}}
	for _, u := range objs {
		data, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		obj, err := scheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			t.Fatalf("%s %s: not a built-in kind: %v", u.GroupVersionKind(), u.GetName(), err)
		}
		if err := yaml.UnmarshalStrict(data, obj); err != nil {
			t.Fatalf("%s %s does not decode strictly into %T: %v", u.GetKind(), u.GetName(), obj, err)
		}
		key := fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
		if _, dup := r.all[key]; dup {
			t.Fatalf("%s twice", key)
		}
		for _, msg := range validation.IsDNS1123Subdomain(u.GetName()) {
			t.Errorf("%s: name: %s", key, msg)
		}
		r.all[key] = obj
		r.objectsOrder = append(r.objectsOrder, key)
		for _, slot := range r.typed() {
			if v := reflect.ValueOf(slot).Elem(); v.Type() == reflect.TypeOf(obj) {
				v.Set(reflect.ValueOf(obj))
			}
		}
	}
	for _, slot := range r.typed() {
		if reflect.ValueOf(slot).Elem().IsNil() {
			t.Fatalf("no %s among %v", reflect.TypeOf(slot).Elem().Elem().Name(), r.objectsOrder)
		}
	}
	r.checkReferences(t)
	return r
}

// checkReferences: the DaemonSet's service account, ConfigMap and volumes
// exist, and the bindings bind what exists.
func (r *rendered) checkReferences(t *testing.T) {
	t.Helper()
	pod := r.daemonSet.Spec.Template.Spec
	if pod.ServiceAccountName != r.serviceAcct.Name || r.serviceAcct.Namespace != r.daemonSet.Namespace {
		t.Errorf("DaemonSet runs as %q, ServiceAccount is %s/%s", pod.ServiceAccountName, r.serviceAcct.Namespace, r.serviceAcct.Name)
	}
	sel := r.daemonSet.Spec.Selector.MatchLabels
	for k, v := range sel {
		if pod := r.daemonSet.Spec.Template.Labels[k]; pod != v {
			t.Errorf("selector %s=%s does not match the pod template's labels %v", k, v, r.daemonSet.Spec.Template.Labels)
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		if v.ConfigMap != nil && v.ConfigMap.Name != r.configMap.Name {
			t.Errorf("volume %s mounts ConfigMap %s, the manifests have %s", v.Name, v.ConfigMap.Name, r.configMap.Name)
		}
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		paths := map[string]bool{}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("container %s mounts volume %s, which does not exist", c.Name, m.Name)
			}
			if paths[m.MountPath] {
				t.Errorf("container %s mounts %s twice", c.Name, m.MountPath)
			}
			paths[m.MountPath] = true
		}
	}
	for _, s := range append(append([]rbacv1.Subject{}, r.crb.Subjects...), r.roleBinding.Subjects...) {
		if s.Kind != "ServiceAccount" || s.Name != r.serviceAcct.Name || s.Namespace != r.serviceAcct.Namespace {
			t.Errorf("binding subject %+v is not the ServiceAccount %s/%s", s, r.serviceAcct.Namespace, r.serviceAcct.Name)
		}
	}
	if ref := r.crb.RoleRef; ref.Kind != "ClusterRole" || ref.Name != r.clusterRole.Name {
		t.Errorf("ClusterRoleBinding refers to %+v", ref)
	}
	if ref := r.roleBinding.RoleRef; ref.Kind != "Role" || ref.Name != r.role.Name || r.roleBinding.Namespace != r.role.Namespace {
		t.Errorf("RoleBinding refers to %+v", ref)
	}
}

// container returns the DaemonSet's (init) container of that name.
func (r *rendered) container(t *testing.T, name string) corev1.Container {
	t.Helper()
	c := containerNamed(r.daemonSet.Spec.Template.Spec, name)
	if c == nil {
		t.Fatalf("no container %s", name)
	}
	return *c
}

// env returns a container's environment by name.
func env(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}
