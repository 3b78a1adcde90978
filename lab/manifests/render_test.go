package manifests

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/terway-sim/terway/cni"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/mode"
)

// labConf is an eni_conf as the lab writes it: the emulated world's
// vSwitches and security group.
var labConf = []byte(`{
  "version": "1",
  "vswitches": {"cn-hangzhou-k": ["vsw-lab000000000000001", "vsw-lab000000000000002"]},
  "security_group": "sg-lab000000000000001",
  "max_pool_size": 10,
  "min_pool_size": 2,
  "service_cidr": "10.96.0.0/12"
}
`)

const testImage = "lab.local/terway:t42"

// TestRenderModes: in every mode the lab's manifests carry the image (never
// pulled), the mode, the lab's environment and eni_conf, and decode
// strictly into their types.
func TestRenderModes(t *testing.T) {
	base := renderDirForTest(t, deployDir)
	for _, m := range mode.All() {
		t.Run(string(m), func(t *testing.T) {
			objs, err := Render(Params{Image: testImage, Mode: m, ENIConf: labConf})
			if err != nil {
				t.Fatal(err)
			}
			r := decodeStrict(t, objs)
			if !slices.Equal(r.objectsOrder, base.objectsOrder) {
				t.Errorf("objects %v, the base has %v", r.objectsOrder, base.objectsOrder)
			}
			for _, name := range []string{InstallContainer, DaemonContainer} {
				c := r.container(t, name)
				if c.Image != testImage || c.ImagePullPolicy != corev1.PullNever {
					t.Errorf("%s: image %s pull %q, want %s pull Never", name, c.Image, c.ImagePullPolicy, testImage)
				}
			}
			d := r.container(t, DaemonContainer)
			if want := "--daemon-mode=" + string(m); d.Args[0] != want || len(flagValues(d.Args, modeFlag)) != 1 {
				t.Errorf("args %q, want %s once, first", d.Args, want)
			}
			checkLabEnv(t, env(d))
			if got := r.configMap.Data["eni_conf"]; got != string(labConf) {
				t.Errorf("eni_conf:\n%s\nwant\n%s", got, labConf)
			}
			if r.configMap.Name != ConfigMapName {
				t.Errorf("ConfigMap is called %s: the generator must not add a hash", r.configMap.Name)
			}
			if got, want := r.configMap.Data["10-terway.conf"], base.configMap.Data["10-terway.conf"]; got != want {
				t.Errorf("10-terway.conf changed:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// checkLabEnv: the downward API values of the base plus the overlay's.
func checkLabEnv(t *testing.T, e map[string]corev1.EnvVar) {
	t.Helper()
	for name, path := range map[string]string{"NODE_NAME": "spec.nodeName", "POD_NAMESPACE": "metadata.namespace"} {
		if v := e[name].ValueFrom; v == nil || v.FieldRef == nil || v.FieldRef.FieldPath != path {
			t.Errorf("%s: %+v, want fieldRef %s", name, e[name], path)
		}
	}
	for name, want := range map[string]string{
		"ECS_ENDPOINT":              "http://100.100.0.10",
		"VPC_ENDPOINT":              "http://100.100.0.10",
		"KUBERNETES_SERVICE_HOST":   "127.0.0.1",
		"KUBERNETES_SERVICE_PORT":   "6443",
		"POOL_CHECK_PERIOD_SECONDS": "60",
	} {
		if got := e[name]; got.Value != want || got.ValueFrom != nil {
			t.Errorf("%s = %+v, want %q", name, got, want)
		}
	}
}

// TestRenderBase: deploy/ as a user applies it is valid on its own: the
// example eni_conf parses with no ignored key, 10-terway.conf is a config
// the installer accepts, the image is the public one, the mode ENIMultiIP,
// and the RBAC is exactly what the daemon uses.
func TestRenderBase(t *testing.T) {
	r := renderDirForTest(t, deployDir)
	if b := renderDirForTest(t, deployDir+"/base"); !reflect.DeepEqual(b.all, r.all) {
		t.Error("deploy/ and deploy/base render differently")
	}
	cfg, err := config.Parse([]byte(r.configMap.Data["eni_conf"]))
	if err != nil {
		t.Fatalf("base eni_conf: %v", err)
	}
	if len(cfg.Ignored) > 0 || cfg.AccessKey != "" || cfg.AccessSecret != "" {
		t.Errorf("base eni_conf: ignored keys %v, access key %q: want none (RAM role)", cfg.Ignored, cfg.AccessKey)
	}
	if _, err := cni.BuildConflist([]byte(r.configMap.Data["10-terway.conf"])); err != nil {
		t.Errorf("base 10-terway.conf: %v", err)
	}
	for _, name := range []string{InstallContainer, DaemonContainer} {
		if c := r.container(t, name); c.Image != "ghcr.io/terway-sim/terway:latest" || c.ImagePullPolicy != "" {
			t.Errorf("%s: image %s pull %q", name, c.Image, c.ImagePullPolicy)
		}
	}
	d := r.container(t, DaemonContainer)
	if d.Args[0] != "--daemon-mode=ENIMultiIP" {
		t.Errorf("args %q: want --daemon-mode=ENIMultiIP first", d.Args)
	}
	if e := env(d); len(e) != 2 {
		t.Errorf("base env %v: want only NODE_NAME and POD_NAMESPACE", e)
	}
	install := r.container(t, InstallContainer)
	if want := []string{"/usr/bin/terway", "install-cni", "--bin-dir=/opt/cni/bin", "--conf-dir=/etc/cni/net.d",
		"--conf=/etc/eni/10-terway.conf"}; !slices.Equal(install.Command, want) {
		t.Errorf("install-cni command %q, want %q", install.Command, want)
	}
	checkPodSpec(t, r)
	checkRBAC(t, r)
}

// checkPodSpec: the node-agent settings and every host path the daemon
// and the installer use.
func checkPodSpec(t *testing.T, r *rendered) {
	t.Helper()
	pod := r.daemonSet.Spec.Template.Spec
	if !pod.HostNetwork || pod.PriorityClassName != "system-node-critical" || pod.DNSPolicy != corev1.DNSDefault {
		t.Errorf("hostNetwork %v, priorityClassName %q, dnsPolicy %q", pod.HostNetwork, pod.PriorityClassName, pod.DNSPolicy)
	}
	if len(pod.Tolerations) != 1 || pod.Tolerations[0].Operator != corev1.TolerationOpExists || pod.Tolerations[0].Key != "" {
		t.Errorf("tolerations %+v: want one that tolerates every taint", pod.Tolerations)
	}
	d := r.container(t, DaemonContainer)
	if d.SecurityContext == nil || d.SecurityContext.Privileged == nil || !*d.SecurityContext.Privileged {
		t.Error("terwayd is not privileged")
	}
	for _, p := range []*corev1.Probe{d.ReadinessProbe, d.LivenessProbe, d.StartupProbe} {
		if p == nil || p.Exec == nil || p.Exec.Command[0] != "/usr/bin/terway-cli" {
			t.Errorf("probe %+v: want exec terway-cli", p)
		}
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounts := func(c corev1.Container) map[string]string {
		out := map[string]string{}
		for _, m := range c.VolumeMounts {
			if p, ok := hostPaths[m.Name]; ok {
				out[p] = m.MountPath
			}
		}
		return out
	}
	// Host paths are mounted where they are on the host: the config
	// defaults (socket, store, CNI dirs) and the netns paths the runtime
	// records are the same inside and out.
	want := map[string][]string{
		DaemonContainer: {"/var/run/eni", "/var/lib/cni", "/etc/cni/net.d", "/opt/cni/bin", "/var/run/netns",
			"/var/lib/kubelet/device-plugins"},
		InstallContainer: {"/opt/cni/bin", "/etc/cni/net.d"},
	}
	for name, paths := range want {
		got := mounts(r.container(t, name))
		for _, p := range paths {
			if got[p] != p {
				t.Errorf("%s: host path %s mounted at %q", name, p, got[p])
			}
		}
		if len(got) != len(paths) {
			t.Errorf("%s mounts host paths %v, want %v", name, got, paths)
		}
	}
	for _, m := range d.VolumeMounts {
		if (m.MountPath == "/var/run/netns") != (m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationHostToContainer) {
			t.Errorf("mount %s: propagation %v", m.MountPath, m.MountPropagation)
		}
	}
}

// checkRBAC compares the roles with what daemon/k8s and cmd/terwayd call.
func checkRBAC(t *testing.T, r *rendered) {
	t.Helper()
	core := func(res string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{res}, Verbs: verbs}
	}
	wantCluster := []rbacv1.PolicyRule{
		core("pods", "get", "list", "watch"),
		core("pods", "patch"),
		core("pods/eviction", "create"),
		core("nodes", "get", "patch"),
		core("nodes", "list"),
		core("nodes/status", "patch"),
		core("events", "create", "patch"),
	}
	if !reflect.DeepEqual(r.clusterRole.Rules, wantCluster) {
		t.Errorf("ClusterRole rules %+v\nwant %+v", r.clusterRole.Rules, wantCluster)
	}
	if want := []rbacv1.PolicyRule{core("configmaps", "get")}; !reflect.DeepEqual(r.role.Rules, want) {
		t.Errorf("Role rules %+v, want %+v", r.role.Rules, want)
	}
	if r.role.Namespace != Namespace {
		t.Errorf("Role in %s", r.role.Namespace)
	}
}

// TestRenderLabOverlay: deploy/overlays/lab builds on its own too (what
// `kubectl apply -k deploy/overlays/lab` would send).
func TestRenderLabOverlay(t *testing.T) {
	r := renderDirForTest(t, labDir)
	for _, name := range []string{InstallContainer, DaemonContainer} {
		if c := r.container(t, name); c.Image != labImage+":latest" || c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("%s: image %s pull %q", name, c.Image, c.ImagePullPolicy)
		}
	}
	checkLabEnv(t, env(r.container(t, DaemonContainer)))
}

// TestRenderOptions: a digest reference, the 10-terway.conf override, and
// no eni_conf (the example stays).
func TestRenderOptions(t *testing.T) {
	img := "lab.local/terway@sha256:" + strings.Repeat("ab", 32)
	cniConf := `{"cniVersion":"1.0.0","name":"terway","type":"terway","eniip_virtual_type":"IPVlan"}`
	objs, err := Render(Params{Image: img, Mode: mode.VPC, CNIConf: []byte(cniConf)})
	if err != nil {
		t.Fatal(err)
	}
	r := decodeStrict(t, objs)
	base := renderDirForTest(t, deployDir)
	if c := r.container(t, DaemonContainer); c.Image != img {
		t.Errorf("image %s, want %s", c.Image, img)
	}
	if got := r.configMap.Data["10-terway.conf"]; got != cniConf {
		t.Errorf("10-terway.conf %s", got)
	}
	if got, want := r.configMap.Data["eni_conf"], base.configMap.Data["eni_conf"]; got != want {
		t.Errorf("eni_conf %s, want the example %s", got, want)
	}
}

// TestRenderBadParams: each bad parameter is named in the error.
func TestRenderBadParams(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
		want []string
	}{
		{"empty mode", Params{Image: testImage}, []string{`mode ""`, "ENIMultiIP, ENIOnly or VPC"}},
		{"unknown mode", Params{Image: testImage, Mode: "eniip"}, []string{`mode "eniip"`}},
		{"mode case", Params{Image: testImage, Mode: "enimultiip"}, []string{`mode "enimultiip"`}},
		{"mode injection", Params{Image: testImage, Mode: "VPC\n- --x"}, []string{"mode"}},
		{"no image", Params{Mode: mode.VPC}, []string{`image ""`}},
		{"no tag", Params{Image: "lab.local/terway", Mode: mode.VPC}, []string{"needs a tag or a digest"}},
		{"bad tag", Params{Image: "lab.local/terway:a b", Mode: mode.VPC}, []string{"tag"}},
		{"upper case", Params{Image: "lab.local/Terway:1", Mode: mode.VPC}, []string{"image"}},
		{"bad digest", Params{Image: "lab.local/terway@sha256:xyz", Mode: mode.VPC}, []string{"digest"}},
		{"eni_conf value", Params{Image: testImage, Mode: mode.VPC, ENIConf: []byte(`{"max_pool_size": -1}`)},
			[]string{"eni_conf", "max_pool_size"}},
		{"eni_conf syntax", Params{Image: testImage, Mode: mode.VPC, ENIConf: []byte(`{`)}, []string{"eni_conf"}},
		{"cni conf", Params{Image: testImage, Mode: mode.VPC, CNIConf: []byte(`[1]`)}, []string{"10-terway.conf"}},
		{"all at once", Params{Mode: "x", ENIConf: []byte(`[]`)}, []string{"mode", "image", "eni_conf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(tc.p)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestVerify: Render's own check catches manifests that lost what the lab
// set (as after an edit of deploy/ that kustomize silently tolerates).
func TestVerify(t *testing.T) {
	p := Params{Image: testImage, Mode: mode.ENIOnly, ENIConf: labConf}
	for _, tc := range []struct {
		name   string
		mutate func(pod map[string]any, cm map[string]any)
		want   string
	}{
		{"image", func(pod, _ map[string]any) { container(pod, "initContainers", 0)["image"] = "other:1" }, "image other:1"},
		{"mode", func(pod, _ map[string]any) { container(pod, "containers", 0)["args"] = []any{"--daemon-mode=VPC"} }, "want exactly one"},
		{"two modes", func(pod, _ map[string]any) {
			container(pod, "containers", 0)["args"] = []any{"--daemon-mode=ENIOnly", "--daemon-mode=VPC"}
		}, "want exactly one"},
		{"order", func(pod, _ map[string]any) {
			cs := pod["containers"].([]any)
			pod["containers"] = append([]any{map[string]any{"name": "sidecar", "image": testImage}}, cs...)
		}, "must come first"},
		{"eni_conf", func(_, cm map[string]any) { cm["data"].(map[string]any)["eni_conf"] = "{}" }, "eni_conf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Render(p)
			if err != nil {
				t.Fatal(err)
			}
			var pod, cm map[string]any
			for _, o := range objs {
				switch o.GetKind() {
				case "DaemonSet":
					pod = o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
				case "ConfigMap":
					cm = o.Object
				}
			}
			tc.mutate(pod, cm)
			if err := p.verify(objs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("verify: %v, want an error about %q", err, tc.want)
			}
		})
	}
}

func container(pod map[string]any, list string, i int) map[string]any {
	return pod[list].([]any)[i].(map[string]any)
}

// renderDirForTest builds one directory of the embedded tree as is.
func renderDirForTest(t *testing.T, dir string) *rendered {
	t.Helper()
	fsys, err := deployFS()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := build(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	return decodeStrict(t, objs)
}
