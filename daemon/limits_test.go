package daemon

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/fakecloud"
)

func (l *lab) describeInstanceTypes() int64 {
	return l.cloud.CallCount(fakecloud.CallFilter{Action: "DescribeInstanceTypes"})
}

// nodeAnnotation waits until the node carries the annotation and returns it.
func (l *lab) nodeAnnotation(key string) string {
	l.t.Helper()
	var v string
	_ = poll(10*time.Millisecond, 10*time.Second, func() bool {
		n, err := l.kube.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
		if err != nil {
			l.t.Fatal(err)
		}
		v = n.Annotations[key]
		return v != ""
	})
	if v == "" {
		l.t.Fatalf("node has no annotation %s", key)
	}
	return v
}

func (l *lab) setNodeAnnotation(key, value string) {
	l.t.Helper()
	n, err := l.kube.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	n.Annotations[key] = value
	if _, err := l.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		l.t.Fatal(err)
	}
}

// A restart reads the instance type's limits from the store, a daemon
// that lost its store from the node's annotation: neither asks the cloud.
// Limits of another type (a resized instance) are not used.
func TestInstanceLimitsWithoutTheCloud(t *testing.T) {
	l := newLab(t)
	d, _, stop := l.daemon(nil)
	want := d.limits
	info := l.nodeAnnotation(k8s.AnnotationInstanceTypeInfo)
	stop()
	if n := l.describeInstanceTypes(); n != 1 {
		t.Fatalf("first start: %d DescribeInstanceTypes, want 1", n)
	}

	d, _, stop = l.daemon(nil)
	stop()
	if n := l.describeInstanceTypes(); n != 1 || d.limits != want {
		t.Fatalf("restart: %d DescribeInstanceTypes in all, limits %+v; want 1 and %+v", n, d.limits, want)
	}

	storePath := l.daemonConfig().StorePath
	if err := os.Remove(storePath); err != nil {
		t.Fatal(err)
	}
	d, _, stop = l.daemon(nil)
	stop()
	if n := l.describeInstanceTypes(); n != 1 || d.limits != want {
		t.Fatalf("start without a store: %d DescribeInstanceTypes in all, limits %+v; want 1 and %+v", n, d.limits, want)
	}

	var other map[string]any
	if err := json.Unmarshal([]byte(info), &other); err != nil {
		t.Fatal(err)
	}
	other["InstanceTypeId"] = "ecs.g7.2xlarge"
	b, _ := json.Marshal(other)
	l.setNodeAnnotation(k8s.AnnotationInstanceTypeInfo, string(b))
	if err := os.Remove(storePath); err != nil {
		t.Fatal(err)
	}
	d, _, _ = l.daemon(nil)
	if n := l.describeInstanceTypes(); n != 2 || d.limits != want {
		t.Fatalf("start with another type's limits on the node: %d DescribeInstanceTypes in all, limits %+v; want 2 and %+v", n, d.limits, want)
	}
	// The daemon publishes its own type's limits over the stale ones.
	if poll(10*time.Millisecond, 10*time.Second, func() bool { return l.nodeAnnotation(k8s.AnnotationInstanceTypeInfo) == info }) != nil {
		t.Fatalf("node annotation %s, want this type's %s", l.nodeAnnotation(k8s.AnnotationInstanceTypeInfo), info)
	}
}

// A new node (no store, no annotation of its own) takes the limits
// another node of its type published, and not those of a node labelled
// with its type whose annotation describes another.
func TestInstanceLimitsFromAPeer(t *testing.T) {
	l := newLab(t)
	d, _, stop := l.daemon(nil)
	want, info := d.limits, l.nodeAnnotation(k8s.AnnotationInstanceTypeInfo)
	stop()
	stale := strings.Replace(info, want.InstanceType, "ecs.g7.2xlarge", 1)
	for name, ann := range map[string]string{"peer-a": stale, "peer-b": info} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{corev1.LabelInstanceTypeStable: want.InstanceType},
			Annotations: map[string]string{k8s.AnnotationInstanceTypeInfo: ann}}}
		if _, err := l.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l.setNodeAnnotation(k8s.AnnotationInstanceTypeInfo, "")
	if err := os.Remove(l.daemonConfig().StorePath); err != nil {
		t.Fatal(err)
	}
	d, _, _ = l.daemon(nil)
	if n := l.describeInstanceTypes(); n != 1 || d.limits != want {
		t.Fatalf("start beside a peer: %d DescribeInstanceTypes in all, limits %+v; want 1 and %+v", n, d.limits, want)
	}
}

// A start that the cloud throttles on DescribeInstanceTypes waits for the
// next window and starts then, instead of failing (a crash loop).
func TestInstanceLimitsThrottledStartWaits(t *testing.T) {
	l := newLab(t, func(s *fakecloud.Spec, _ *fakecloud.Options) {
		s.Settings.ThrottleWindow = fakecloud.Duration(20 * time.Millisecond)
	})
	if _, err := l.cloud.AddFault(fakecloud.Fault{Name: "throttled-start", Kind: fakecloud.FaultError,
		Action: "DescribeInstanceTypes", Count: 8, Code: "Throttling.User", Status: 400}); err != nil {
		t.Fatal(err)
	}
	d, _, _ := l.daemon(nil)
	if d.limits.Adapters == 0 {
		t.Fatalf("limits %+v", d.limits)
	}
	if n := l.describeInstanceTypes(); n < 9 {
		t.Fatalf("%d DescribeInstanceTypes, want the 8 throttled and one that succeeded", n)
	}
}
