package prereq

// Pinned versions of everything the lab builds. The Kubernetes and etcd
// versions must match the require lines of the nested modules
// lab/prereq/kube and lab/prereq/etcd (a test checks it).
const (
	// KubernetesVersion is k8s.io/kubernetes in lab/prereq/kube.
	KubernetesVersion = "v1.37.2"
	// EtcdVersion is go.etcd.io/etcd/server/v3 in lab/prereq/etcd.
	EtcdVersion = "v3.6.16"
	// ContainerdVersion is github.com/containerd/containerd/v2: 2.x
	// forwards CNI STATUS, and kubelet 1.38 drops containerd 1.x.
	ContainerdVersion = "v2.4.2"
	// RuncVersion is github.com/opencontainers/runc, built with seccomp.
	RuncVersion = "v1.5.3"
	// CrictlVersion is sigs.k8s.io/cri-tools (crictl), for debugging nodes.
	CrictlVersion = "v1.37.0"
)

// Image references of the archives Ensure writes. The terway image's tag
// is a hash of its binaries, see Toolset.TerwayImage.
const (
	PauseImage      = "lab.local/pause:1"
	BusyboxImage    = "lab.local/busybox:1"
	TerwayImageRepo = "lab.local/terway"
)
