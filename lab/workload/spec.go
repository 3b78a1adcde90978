package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Defaults of a Spec's empty fields.
const (
	DefaultName  = "web"
	DefaultImage = "lab.local/busybox:1"
	// DefaultPort is the port httpd listens on in the pods.
	DefaultPort = 8080
	// ServicePort is the Service's port (to DefaultPort of the pods).
	ServicePort = 80
)

// ENIResource is the device-plugin resource of an exclusive ENI
// (ENIOnly mode): a pod that asks for one gets a whole ENI.
const ENIResource corev1.ResourceName = "aliyun/eni"

// Labels put on what the package creates.
const (
	// AppLabel selects the workload's pods; its value is Spec.Name.
	AppLabel = "app.kubernetes.io/name"
	// ManagedLabel marks namespaces made by this package, so leftovers of
	// an aborted run can be found (kubectl get ns -l terway-lab/workload).
	ManagedLabel = "terway-lab/workload"
)

// Spec describes a web workload.
type Spec struct {
	// Namespace is created for the workload and deleted with it. Required.
	Namespace string
	// Name of the Deployment and the Service; DefaultName if empty.
	Name string
	// Replicas the Deployment starts with.
	Replicas int32
	// Image must contain busybox sh and httpd; DefaultImage if empty.
	Image string
	// PullPolicy defaults to Never: the lab has no registry, and kind needs
	// the image loaded (kind load docker-image) anyway.
	PullPolicy corev1.PullPolicy
	// ExclusiveENI makes every pod request one aliyun/eni (ENIOnly mode).
	ExclusiveENI bool
	// Spread places pods evenly over the nodes (a hostname topology spread
	// with maxSkew 1 that the scheduler must honour), so every schedulable
	// node gets pods and both same-node and cross-node pairs exist.
	Spread bool
	// Node pins every pod to this node (a kubernetes.io/hostname node
	// selector): for what one node's daemon holds, such as a sticky
	// address or a drained vSwitch.
	Node string
	// Annotations go on every pod (bandwidth limits, for instance).
	Annotations map[string]string
	// StatefulSet makes the pods a StatefulSet's (Parallel pod
	// management, the Service as its service) instead of a Deployment's:
	// pods named <Name>-<ordinal> that the daemon treats as stateful.
	StatefulSet bool
}

func (s Spec) withDefaults() Spec {
	if s.Name == "" {
		s.Name = DefaultName
	}
	if s.Image == "" {
		s.Image = DefaultImage
	}
	if s.PullPolicy == "" {
		s.PullPolicy = corev1.PullNever
	}
	return s
}

// Selector is the label selector of the workload's pods.
func (s Spec) Selector() string {
	s = s.withDefaults()
	return labels.SelectorFromSet(s.podLabels()).String()
}

func (s Spec) podLabels() map[string]string {
	return map[string]string{AppLabel: s.Name}
}

// NamespaceObject is the workload's namespace.
func (s Spec) NamespaceObject() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   s.Namespace,
		Labels: map[string]string{ManagedLabel: "true"},
	}}
}

// serverScript makes httpd answer every GET of / with the pod name: the
// kubelet sets HOSTNAME to it. exec keeps httpd as PID 1 so that it gets
// the stop signal itself.
const serverScript = `echo "$HOSTNAME" > /tmp/index.html && exec httpd -f -p %d -h /tmp`

// Deployment is the workload's Deployment.
func (s Spec) Deployment() *appsv1.Deployment {
	s = s.withDefaults()
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.podLabels()},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(s.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: s.podLabels()},
			Template: s.podTemplate(),
		},
	}
}

// StatefulSetObject is the workload's StatefulSet (Spec.StatefulSet).
func (s Spec) StatefulSetObject() *appsv1.StatefulSet {
	s = s.withDefaults()
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.podLabels()},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(s.Replicas),
			Selector:    &metav1.LabelSelector{MatchLabels: s.podLabels()},
			ServiceName: s.Name,
			// Parallel: pods start and go together, not one by one.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template:            s.podTemplate(),
		},
	}
}

func (s Spec) podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: s.podLabels(), Annotations: s.Annotations},
		Spec:       s.podSpec(),
	}
}

func (s Spec) podSpec() corev1.PodSpec {
	spec := corev1.PodSpec{
		// busybox shells ignore SIGTERM as PID 1; httpd does not, but a
		// second is all a stop should ever take here.
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		// No service links: the environment stays small and no pod
		// depends on Services that happen to exist in the namespace.
		EnableServiceLinks: ptr.To(false),
		Containers:         []corev1.Container{s.container()},
	}
	if s.Node != "" {
		spec.NodeSelector = map[string]string{corev1.LabelHostname: s.Node}
	}
	if s.Spread {
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       corev1.LabelHostname,
			WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: s.podLabels()},
			// Only nodes the pods can use count as domains: a tainted
			// (NotReady, cordoned) node would otherwise hold the skew at
			// zero pods and keep pods Pending.
			NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
		}}
	}
	return spec
}

func (s Spec) container() corev1.Container {
	c := corev1.Container{
		Name:            "httpd",
		Image:           s.Image,
		ImagePullPolicy: s.PullPolicy,
		Command:         []string{"sh", "-c", fmt.Sprintf(serverScript, DefaultPort)},
		Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: DefaultPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(DefaultPort)}},
			PeriodSeconds: 1,
		},
	}
	if s.ExclusiveENI {
		one := corev1.ResourceList{ENIResource: resource.MustParse("1")}
		// Extended resources need requests equal to limits.
		c.Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	}
	return c
}

// Service is the workload's ClusterIP Service, port 80 to the pods' 8080.
func (s Spec) Service() *corev1.Service {
	s = s.withDefaults()
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.podLabels()},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: s.podLabels(),
			Ports: []corev1.ServicePort{{
				Name: "http", Port: ServicePort, TargetPort: intstr.FromInt32(DefaultPort), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}
