package manifests

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/terway-sim/terway/daemon/mode"
)

func obj(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// testMapper knows the kinds the tests use, as an API server would.
func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk        schema.GroupVersionKind
		namespaced bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, false},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, true},
		{schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, true},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, true},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, false},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, false},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, true},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, true},
		{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, false},
	} {
		scope := meta.RESTScopeRoot
		if k.namespaced {
			scope = meta.RESTScopeNamespace
		}
		m.Add(k.gvk, scope)
	}
	return m
}

// planIn plans objs with testMapper and checks that the steps come in
// the order of want.
func planIn(t *testing.T, objs []*unstructured.Unstructured, want ...string) []step {
	t.Helper()
	steps, err := plan(objs, testMapper())
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(steps))
	for i, s := range steps {
		got[i] = s.String()
	}
	if !slices.Equal(got, want) {
		t.Errorf("order\n%q\nwant\n%q", got, want)
	}
	return steps
}

// TestPlanOrder: Namespaces and CRDs, then the other cluster-scoped
// objects, then namespaced ones, each group in the given order; a
// namespaced object without a namespace goes to default.
func TestPlanOrder(t *testing.T) {
	objs := []*unstructured.Unstructured{
		obj("apps/v1", "DaemonSet", "kube-system", "terway"),
		obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "terway"),
		obj("v1", "ConfigMap", "", "loose"),
		obj("v1", "Namespace", "", "lab"),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "terway"),
		obj("v1", "ServiceAccount", "kube-system", "terway"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "podenis.network.alibabacloud.com"),
	}
	steps := planIn(t, objs,
		"Namespace lab",
		"CustomResourceDefinition podenis.network.alibabacloud.com",
		"ClusterRoleBinding terway",
		"ClusterRole terway",
		"DaemonSet kube-system/terway",
		"ConfigMap default/loose",
		"ServiceAccount kube-system/terway",
	)
	if g := steps[0].gvr; g != (schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}) {
		t.Errorf("Namespace maps to %v", g)
	}
	if g := steps[4].gvr; g != (schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}) {
		t.Errorf("DaemonSet maps to %v", g)
	}
}

// TestPlanRendered: the lab's own objects, cluster-scoped first.
func TestPlanRendered(t *testing.T) {
	objs, err := Render(Params{Image: testImage, Mode: mode.ENIMultiIP, ENIConf: labConf})
	if err != nil {
		t.Fatal(err)
	}
	planIn(t, objs,
		"ClusterRole terway",
		"ClusterRoleBinding terway",
		"ServiceAccount kube-system/terway",
		"Role kube-system/terway",
		"RoleBinding kube-system/terway",
		"ConfigMap kube-system/eni-config",
		"DaemonSet kube-system/terway",
	)
}

// TestPlanUnknownKind names the object the API server does not serve.
func TestPlanUnknownKind(t *testing.T) {
	_, err := plan([]*unstructured.Unstructured{obj("example.com/v1", "Widget", "x", "w1")}, testMapper())
	if err == nil || !strings.Contains(err.Error(), "Widget") || !strings.Contains(err.Error(), "w1") {
		t.Errorf("err %v, want one naming Widget w1", err)
	}
}

// fakeAPI serves discovery for the kinds of deploy/ and records every
// other request; DELETE of a name in gone answers 404.
type fakeAPI struct {
	mu    sync.Mutex
	calls []string // "METHOD path?query content-type"
	gone  map[string]bool
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		f.discovery(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Content-Type"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodDelete && f.gone[r.URL.Path] {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
		return
	}
	if r.Method == http.MethodPatch {
		// An applied object comes back as the server would store it; the
		// apply body is YAML or JSON, and the client only decodes it.
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, _ := u.MarshalJSON()
		_, _ = w.Write(out)
		return
	}
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
}

func (f *fakeAPI) discovery(w http.ResponseWriter, r *http.Request) {
	res := func(name, kind string, namespaced bool) metav1.APIResource {
		return metav1.APIResource{Name: name, Kind: kind, Namespaced: namespaced, Verbs: []string{"get", "patch", "delete"}}
	}
	list := func(gv string, rs ...metav1.APIResource) any {
		return metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: rs}
	}
	group := func(g string) metav1.APIGroup {
		v := metav1.GroupVersionForDiscovery{GroupVersion: g + "/v1", Version: "v1"}
		return metav1.APIGroup{Name: g, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
	}
	var out any
	switch r.URL.Path {
	case "/api":
		out = metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}}
	case "/apis":
		out = metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups: []metav1.APIGroup{group("apps"), group("rbac.authorization.k8s.io")}}
	case "/api/v1":
		out = list("v1", res("namespaces", "Namespace", false), res("configmaps", "ConfigMap", true),
			res("serviceaccounts", "ServiceAccount", true))
	case "/apis/apps/v1":
		out = list("apps/v1", res("daemonsets", "DaemonSet", true))
	case "/apis/rbac.authorization.k8s.io/v1":
		out = list("rbac.authorization.k8s.io/v1", res("clusterroles", "ClusterRole", false),
			res("clusterrolebindings", "ClusterRoleBinding", false), res("roles", "Role", true),
			res("rolebindings", "RoleBinding", true))
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// TestApplyDelete runs Apply and Delete against a fake API server on
// loopback: server-side apply as terway-lab with force, cluster-scoped
// first; Delete in reverse, tolerating objects already gone.
func TestApplyDelete(t *testing.T) {
	f := &fakeAPI{gone: map[string]bool{"/api/v1/namespaces/kube-system/configmaps/eni-config": true}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	objs, err := Render(Params{Image: testImage, Mode: mode.VPC, ENIConf: labConf})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cfg := &rest.Config{Host: srv.URL}
	if err := Apply(ctx, cfg, objs); err != nil {
		t.Fatal(err)
	}
	paths := []string{
		"/apis/rbac.authorization.k8s.io/v1/clusterroles/terway",
		"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/terway",
		"/api/v1/namespaces/kube-system/serviceaccounts/terway",
		"/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/terway",
		"/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings/terway",
		"/api/v1/namespaces/kube-system/configmaps/eni-config",
		"/apis/apps/v1/namespaces/kube-system/daemonsets/terway",
	}
	var want []string
	for _, p := range paths {
		want = append(want, "PATCH "+p+"?fieldManager=terway-lab&force=true application/apply-patch+yaml")
	}
	if !slices.Equal(f.calls, want) {
		t.Errorf("apply calls\n%s\nwant\n%s", strings.Join(f.calls, "\n"), strings.Join(want, "\n"))
	}
	f.calls = nil
	if err := Delete(ctx, cfg, objs); err != nil {
		t.Fatal(err)
	}
	want = want[:0]
	slices.Reverse(paths)
	for _, p := range paths {
		want = append(want, "DELETE "+p+"? application/json")
	}
	if !slices.Equal(f.calls, want) {
		t.Errorf("delete calls\n%s\nwant\n%s", strings.Join(f.calls, "\n"), strings.Join(want, "\n"))
	}
}
