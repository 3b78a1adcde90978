// Package kubeserve serves a client-go fake clientset over HTTP on the
// API server's core/v1 paths: get, list, watch, create, update, patch and
// the eviction subresource, with label and field selectors. Tests and
// benchmarks that run terwayd as a process of its own point its
// kubeconfig here; what the process does shows in the clientset, whose
// reactors still apply.
//
// It is no API server: no authentication, no admission, no validation,
// and the field selectors the daemon uses (metadata.name,
// metadata.namespace, spec.nodeName) are the only ones it knows.
package kubeserve

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/terway-sim/terway/daemon/kubeapi"
)

// Server is an HTTP server over a fake clientset.
type Server struct {
	*httptest.Server
	cs     *fake.Clientset
	codecs serializer.CodecFactory
}

// New serves cs on a loopback port until Close.
func New(cs *fake.Clientset) *Server {
	s := &Server{cs: cs, codecs: serializer.NewCodecFactory(kubeapi.Scheme)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Kubeconfig writes a kubeconfig for this server into dir and returns
// its path.
func (s *Server) Kubeconfig(dir string) (string, error) {
	path := filepath.Join(dir, "kubeconfig")
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
`, s.URL)
	return path, os.WriteFile(path, []byte(doc), 0o600)
}

// request is a core/v1 REST path taken apart.
type request struct {
	namespace, resource, name, subresource string
}

// parsePath reads /api/v1[/namespaces/<ns>]/<resource>[/<name>[/<sub>]].
func parsePath(p string) (request, error) {
	rest, ok := strings.CutPrefix(p, "/api/v1/")
	if !ok {
		return request{}, fmt.Errorf("%s: only /api/v1 is served", p)
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	var r request
	if len(parts) >= 3 && parts[0] == "namespaces" {
		r.namespace, parts = parts[1], parts[2:]
	}
	if len(parts) == 0 || len(parts) > 3 || parts[0] == "" {
		return request{}, fmt.Errorf("%s: not a resource path", p)
	}
	r.resource = parts[0]
	if len(parts) > 1 {
		r.name = parts[1]
	}
	if len(parts) > 2 {
		r.subresource = parts[2]
	}
	return r, nil
}

func (s *Server) serve(w http.ResponseWriter, hr *http.Request) {
	r, err := parsePath(hr.URL.Path)
	if err != nil {
		s.fail(w, apierrors.NewNotFound(corev1.Resource(""), hr.URL.Path))
		return
	}
	gvr := corev1.SchemeGroupVersion.WithResource(r.resource)
	var opts metav1.ListOptions
	if err := params.DecodeParameters(hr.URL.Query(), corev1.SchemeGroupVersion, &opts); err != nil {
		s.fail(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	switch {
	case hr.Method == http.MethodGet && r.name != "":
		obj, err := s.cs.Invokes(k8stesting.NewGetSubresourceAction(gvr, r.namespace, r.subresource, r.name), nil)
		s.reply(w, obj, err)
	case hr.Method == http.MethodGet && opts.Watch:
		s.watch(w, hr, gvr, r.namespace, opts)
	case hr.Method == http.MethodGet:
		s.list(w, gvr, r.namespace, opts)
	case hr.Method == http.MethodPost, hr.Method == http.MethodPut:
		obj, err := s.body(hr)
		if err != nil {
			s.fail(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		action := k8stesting.Action(k8stesting.NewCreateSubresourceAction(gvr, r.name, r.subresource, r.namespace, obj))
		if hr.Method == http.MethodPut {
			action = k8stesting.NewUpdateSubresourceAction(gvr, r.subresource, r.namespace, obj)
		}
		out, err := s.cs.Invokes(action, nil)
		s.reply(w, out, err)
	case hr.Method == http.MethodPatch && r.name != "":
		data, err := io.ReadAll(hr.Body)
		if err != nil {
			s.fail(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		pt := types.PatchType(strings.TrimSpace(strings.Split(hr.Header.Get("Content-Type"), ";")[0]))
		var subs []string
		if r.subresource != "" {
			subs = []string{r.subresource}
		}
		obj, err := s.cs.Invokes(k8stesting.NewPatchSubresourceAction(gvr, r.namespace, r.name, pt, data, subs...), nil)
		s.reply(w, obj, err)
	default:
		s.fail(w, apierrors.NewMethodNotSupported(gvr.GroupResource(), hr.Method))
	}
}

// body decodes a request's object (JSON or protobuf, as the client sent it).
func (s *Server) body(hr *http.Request) (runtime.Object, error) {
	data, err := io.ReadAll(hr.Body)
	if err != nil {
		return nil, err
	}
	obj, _, err := s.codecs.UniversalDeserializer().Decode(data, nil, nil)
	return obj, err
}

// list answers a list with the selectors applied.
func (s *Server) list(w http.ResponseWriter, gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions) {
	kind := strings.TrimSuffix(listKinds[gvr.Resource], "List")
	obj, err := s.cs.Invokes(k8stesting.NewListActionWithOptions(gvr, corev1.SchemeGroupVersion.WithKind(kind), ns, opts), nil)
	if err != nil {
		s.fail(w, err)
		return
	}
	sel, err := newSelector(opts)
	if err != nil {
		s.fail(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		s.fail(w, err)
		return
	}
	var kept []runtime.Object
	for _, it := range items {
		if sel.matches(it) && (opts.Limit == 0 || int64(len(kept)) < opts.Limit) {
			kept = append(kept, it)
		}
	}
	if err := meta.SetList(obj, kept); err != nil {
		s.fail(w, err)
		return
	}
	s.reply(w, obj, nil)
}

// watch streams the clientset's watch events that match the selectors
// until the client goes.
func (s *Server) watch(w http.ResponseWriter, hr *http.Request, gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions) {
	sel, err := newSelector(opts)
	if err != nil {
		s.fail(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	// A watch-list (client-go's informers ask for one) starts with what a
	// list shows, then a bookmark marking the end of it. The watch is
	// registered before the list, so that nothing created in between is
	// missed: an object in both comes twice, which a watcher takes as an
	// update.
	var initial []runtime.Object
	var bookmark runtime.Object
	var wi watch.Interface
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		if wi, err = s.cs.Tracker().Watch(gvr, ns); err == nil {
			initial, bookmark, err = s.initialEvents(gvr, ns, opts, sel)
		}
	} else {
		wi, err = s.cs.InvokesWatch(k8stesting.NewWatchActionWithOptions(gvr, ns, opts))
	}
	if err != nil {
		if wi != nil {
			wi.Stop()
		}
		s.fail(w, err)
		return
	}
	defer wi.Stop()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flush := w.(http.Flusher)
	enc := json.NewEncoder(w)
	send := func(t watch.EventType, obj runtime.Object) bool {
		raw, err := s.encode(obj)
		return err == nil && enc.Encode(metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: raw}}) == nil
	}
	for _, obj := range initial {
		if !send(watch.Added, obj) {
			return
		}
	}
	if bookmark != nil && !send(watch.Bookmark, bookmark) {
		return
	}
	flush.Flush()
	for {
		select {
		case <-hr.Context().Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			if ev.Type != watch.Error && !sel.matches(ev.Object) {
				continue
			}
			if !send(ev.Type, ev.Object) {
				return
			}
			flush.Flush()
		}
	}
}

// initialEvents is what a watch-list starts with: the objects a list
// shows, and the bookmark that ends them (an empty object of the kind with
// the list's resource version, annotated as the end of the initial events).
func (s *Server) initialEvents(gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions, sel selector) ([]runtime.Object, runtime.Object, error) {
	kind := strings.TrimSuffix(listKinds[gvr.Resource], "List")
	lo := opts
	lo.Watch, lo.SendInitialEvents, lo.ResourceVersion, lo.ResourceVersionMatch = false, nil, "", ""
	list, err := s.cs.Invokes(k8stesting.NewListActionWithOptions(gvr, corev1.SchemeGroupVersion.WithKind(kind), ns, lo), nil)
	if err != nil {
		return nil, nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, nil, err
	}
	var out []runtime.Object
	for _, it := range items {
		if sel.matches(it) {
			out = append(out, it)
		}
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, nil, err
	}
	mark, err := kubeapi.Scheme.New(corev1.SchemeGroupVersion.WithKind(kind))
	if err != nil {
		return nil, nil, err
	}
	m := mark.(metav1.Object)
	m.SetResourceVersion(lm.GetResourceVersion())
	m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	return out, mark, nil
}

// reply writes obj as JSON, or err as a Status.
func (s *Server) reply(w http.ResponseWriter, obj runtime.Object, err error) {
	if err != nil {
		s.fail(w, err)
		return
	}
	if obj == nil { // an eviction, say: the fake returns nothing
		obj = &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}
	}
	data, err := s.encode(obj)
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// encode is obj as JSON with its apiVersion and kind.
func (s *Server) encode(obj runtime.Object) ([]byte, error) {
	return runtime.Encode(s.codecs.LegacyCodec(corev1.SchemeGroupVersion, metav1.SchemeGroupVersion), obj)
}

// fail writes err as the API server would: a Status with its code.
func (s *Server) fail(w http.ResponseWriter, err error) {
	st := apierrors.APIStatus(apierrors.NewInternalError(err))
	if as, ok := err.(apierrors.APIStatus); ok {
		st = as
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
}

// listKinds names the list kind of each resource served.
var listKinds = map[string]string{
	"pods": "PodList", "nodes": "NodeList", "configmaps": "ConfigMapList", "events": "EventList",
	"namespaces": "NamespaceList", "services": "ServiceList", "endpoints": "EndpointsList",
}

// selector is a list's or watch's label and field selectors.
type selector struct {
	labels labels.Selector
	fields fields.Selector
}

func newSelector(opts metav1.ListOptions) (selector, error) {
	ls, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return selector{}, fmt.Errorf("labelSelector: %w", err)
	}
	fs, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return selector{}, fmt.Errorf("fieldSelector: %w", err)
	}
	for _, r := range fs.Requirements() {
		if !knownFields[r.Field] {
			return selector{}, fmt.Errorf("fieldSelector: field %q is not served", r.Field)
		}
	}
	return selector{labels: ls, fields: fs}, nil
}

var knownFields = map[string]bool{"metadata.name": true, "metadata.namespace": true, "spec.nodeName": true}

func (s selector) matches(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	set := fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}
	if p, ok := obj.(*corev1.Pod); ok {
		set["spec.nodeName"] = p.Spec.NodeName
	}
	return s.labels.Matches(labels.Set(m.GetLabels())) && s.fields.Matches(set)
}

// params reads list and watch options from a query.
var params = runtime.NewParameterCodec(kubeapi.Scheme)
