package prereq

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionsMatchNestedModules: the pinned constants name what the
// nested modules really build (the kubelet reports KubernetesVersion).
func TestVersionsMatchNestedModules(t *testing.T) {
	cases := []struct{ dir, module, version string }{
		{"kube", "k8s.io/kubernetes", KubernetesVersion},
		{"etcd", "go.etcd.io/etcd/server/v3", EtcdVersion},
	}
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join(c.dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		found := ""
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require"))
			if len(f) >= 2 && f[0] == c.module {
				found = f[1]
			}
		}
		if found != c.version {
			t.Errorf("%s/go.mod requires %s %q; versions.go pins %q", c.dir, c.module, found, c.version)
		}
	}
}

func TestKubeLDFlags(t *testing.T) {
	got := kubeLDFlags("v1.37.2")
	for _, want := range []string{"version.gitVersion=v1.37.2", "version.gitMajor=1 ", "version.gitMinor=37", "-s -w"} {
		if !strings.Contains(got, want) {
			t.Errorf("kubeLDFlags = %q, missing %q", got, want)
		}
	}
}
