package workload

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestSpecObjects(t *testing.T) {
	s := Spec{Namespace: "ns1", Replicas: 3}
	d := s.Deployment()
	if d.Name != DefaultName || d.Namespace != "ns1" || *d.Spec.Replicas != 3 {
		t.Fatalf("deployment meta: %s/%s replicas %d", d.Namespace, d.Name, *d.Spec.Replicas)
	}
	sel, err := labels.Parse(s.Selector())
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Fatalf("selector %q does not match the pod labels %v (%v)", s.Selector(), d.Spec.Template.Labels, err)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != DefaultImage || c.ImagePullPolicy != corev1.PullNever || *pod.TerminationGracePeriodSeconds != 1 {
		t.Errorf("container: image %s policy %s grace %d", c.Image, c.ImagePullPolicy, *pod.TerminationGracePeriodSeconds)
	}
	if !strings.Contains(c.Command[2], "httpd -f -p 8080") || c.ReadinessProbe.TCPSocket.Port.IntValue() != 8080 {
		t.Errorf("server %q, probe %+v", c.Command, c.ReadinessProbe)
	}
	if len(c.Resources.Limits) != 0 || len(pod.TopologySpreadConstraints) != 0 {
		t.Errorf("plain spec got resources %v or spread %v", c.Resources, pod.TopologySpreadConstraints)
	}
	svc := s.Service()
	if svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.IntValue() != 8080 ||
		!sel.Matches(labels.Set(svc.Spec.Selector)) || svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service: %+v", svc.Spec)
	}
	if s.NamespaceObject().Labels[ManagedLabel] != "true" {
		t.Errorf("namespace not labelled %s", ManagedLabel)
	}
}

func TestSpecExclusiveENIAndSpread(t *testing.T) {
	s := Spec{Namespace: "ns1", Name: "eni", ExclusiveENI: true, Spread: true, PullPolicy: corev1.PullIfNotPresent}
	pod := s.Deployment().Spec.Template.Spec
	c := pod.Containers[0]
	req, lim := c.Resources.Requests[ENIResource], c.Resources.Limits[ENIResource]
	if req.Value() != 1 || lim.Value() != 1 {
		t.Errorf("aliyun/eni request %v limit %v, want 1 and 1", req, lim)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("pull policy %s", c.ImagePullPolicy)
	}
	tsc := pod.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].TopologyKey != corev1.LabelHostname || tsc[0].MaxSkew != 1 ||
		tsc[0].WhenUnsatisfiable != corev1.DoNotSchedule || tsc[0].LabelSelector.MatchLabels[AppLabel] != "eni" ||
		*tsc[0].NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor {
		t.Errorf("spread: %+v", tsc)
	}
}

func TestSpecStatefulSetNodeAndAnnotations(t *testing.T) {
	ann := map[string]string{"k8s.aliyun.com/egress-bandwidth": "10M"}
	s := Spec{Namespace: "ns1", Name: "db", Replicas: 2, StatefulSet: true, Node: "lab-1", Annotations: ann}
	sts := s.StatefulSetObject()
	if sts.Spec.ServiceName != "db" || *sts.Spec.Replicas != 2 || sts.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("statefulset spec: %+v", sts.Spec)
	}
	if sts.Spec.Selector.MatchLabels[AppLabel] != "db" || sts.Spec.Template.Labels[AppLabel] != "db" {
		t.Errorf("statefulset selector %v, template labels %v", sts.Spec.Selector, sts.Spec.Template.Labels)
	}
	tmpl := sts.Spec.Template
	if tmpl.Annotations["k8s.aliyun.com/egress-bandwidth"] != "10M" {
		t.Errorf("pod annotations %v", tmpl.Annotations)
	}
	if tmpl.Spec.NodeSelector[corev1.LabelHostname] != "lab-1" {
		t.Errorf("node selector %v", tmpl.Spec.NodeSelector)
	}
	if d := s.Deployment().Spec.Template; d.Spec.NodeSelector[corev1.LabelHostname] != "lab-1" || d.Annotations["k8s.aliyun.com/egress-bandwidth"] != "10M" {
		t.Errorf("deployment template %+v", d)
	}
	if sel := (Spec{Namespace: "x"}).Deployment().Spec.Template.Spec.NodeSelector; sel != nil {
		t.Errorf("no Node: node selector %v", sel)
	}
}
