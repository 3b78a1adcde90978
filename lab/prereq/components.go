package prereq

import (
	"fmt"
	"strings"
)

// component is a third-party program built with the go command: from a
// nested module of this repository (modDir), or with `go install
// pkg@version` from the module proxy (modDir empty).
type component struct {
	name    string // stamp entry and progress title, with version
	version string
	group   Group
	hint    string   // how long the first build takes
	modDir  string   // relative to the repository root
	bins    []string // what the runs put into the output directory
	runs    func(out string) []goRun
}

// title is how progress lines name the component.
func (c component) title() string { return c.name + " " + c.version }

// outDirToken stands for the output directory in stamps, which must not
// change with the temporary directory's random name.
const outDirToken = "$OUT"

// components lists every third-party component, in build order.
func components() []component {
	return []component{kubernetesComponent(), etcdComponent(), containerdComponent(), runcComponent(), crictlComponent()}
}

// kubeCommands are the Kubernetes binaries, all from k8s.io/kubernetes/cmd.
var kubeCommands = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"}

func kubernetesComponent() component {
	return component{
		name: "kubernetes", version: KubernetesVersion, group: Kubernetes,
		hint:   "first run takes ~12 min on 2 cores",
		modDir: "lab/prereq/kube",
		bins:   kubeCommands,
		runs: func(out string) []goRun {
			args := []string{"build", "-trimpath", "-ldflags", kubeLDFlags(KubernetesVersion), "-o", out + "/"}
			for _, c := range kubeCommands {
				args = append(args, "k8s.io/kubernetes/cmd/"+c)
			}
			return []goRun{{args: args, env: []string{"CGO_ENABLED=0"}}}
		},
	}
}

// kubeLDFlags strips the binaries and stamps the version the way the
// Kubernetes release does; without it they call themselves v0.0.0, and the
// kubelet reports that as the node's version.
func kubeLDFlags(version string) string {
	major, minor := "0", "0"
	if parts := strings.Split(strings.TrimPrefix(version, "v"), "."); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	const v = "k8s.io/component-base/version."
	return fmt.Sprintf("-s -w -X %sgitVersion=%s -X %sgitMajor=%s -X %sgitMinor=%s", v, version, v, major, v, minor)
}

func etcdComponent() component {
	return component{
		name: "etcd", version: EtcdVersion, group: Etcd,
		hint:   "~40 s",
		modDir: "lab/prereq/etcd",
		bins:   []string{"etcd"},
		runs: func(out string) []goRun {
			return []goRun{{
				args: []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", out + "/etcd", "."},
				env:  []string{"CGO_ENABLED=0"},
			}}
		},
	}
}

func containerdComponent() component {
	return component{
		name: "containerd", version: ContainerdVersion, group: Runtime,
		hint: "~80 s",
		bins: []string{"containerd", "containerd-shim-runc-v2", "ctr"},
		runs: func(out string) []goRun {
			args := []string{"install", "-trimpath", "-ldflags", "-s -w"}
			for _, c := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
				args = append(args, "github.com/containerd/containerd/v2/cmd/"+c+"@"+ContainerdVersion)
			}
			return []goRun{{args: args, env: []string{"CGO_ENABLED=0", "GOBIN=" + out}}}
		},
	}
}

func runcComponent() component {
	return component{
		name: "runc", version: RuncVersion, group: Runtime,
		hint: "~20 s",
		bins: []string{"runc"},
		runs: func(out string) []goRun {
			// cgo for libseccomp: pods with seccompProfile RuntimeDefault
			// (the kubelet's default in many setups) need it.
			return []goRun{{
				args: []string{"install", "-trimpath", "-tags", "seccomp", "-ldflags", "-s -w", "github.com/opencontainers/runc@" + RuncVersion},
				env:  []string{"CGO_ENABLED=1", "GOBIN=" + out},
			}}
		},
	}
}

func crictlComponent() component {
	return component{
		name: "crictl", version: CrictlVersion, group: Runtime,
		hint: "~40 s",
		bins: []string{"crictl"},
		runs: func(out string) []goRun {
			return []goRun{{
				args: []string{"install", "-trimpath", "-ldflags", "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=" + CrictlVersion,
					"sigs.k8s.io/cri-tools/cmd/crictl@" + CrictlVersion},
				env: []string{"CGO_ENABLED=0", "GOBIN=" + out},
			}}
		},
	}
}
