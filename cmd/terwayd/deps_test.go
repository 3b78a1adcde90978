package main

import (
	"os/exec"
	"strings"
	"testing"
)

// terwayd links the API groups it uses and no others: client-go's
// clientset, or any typed client, would register all of them at start
// (see package kubeapi), which costs every node about 6 MiB.
func TestLinksOnlyTheAPIGroupsItUses(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list terwayd's packages:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	allowed := map[string]bool{"k8s.io/api/core/v1": true, "k8s.io/api/policy/v1": true}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "k8s.io/api/") && !allowed[p] || strings.HasPrefix(p, "k8s.io/client-go/kubernetes") ||
			strings.HasPrefix(p, "k8s.io/client-go/informers") {
			t.Errorf("terwayd links %s", p)
		}
	}
}
