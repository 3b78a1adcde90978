package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

// runBinaryIn runs the plugin binary inside the namespace n, as a runtime
// in a node's namespace would: the child inherits the namespace of the
// locked thread that starts it.
func runBinaryIn(t *testing.T, n ns.NetNS, env map[string]string, stdin string) execResult {
	t.Helper()
	cmd := exec.Command(filepath.Join(pluginDir, "terway"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := n.Do(func(ns.NetNS) error { return cmd.Start() }); err != nil {
		t.Fatalf("start plugin in %s: %v", n.Path(), err)
	}
	err := cmd.Wait()
	r := execResult{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.exitCode = ee.ExitCode()
	case err != nil:
		t.Fatalf("run plugin: %v", err)
	}
	if strings.Contains(r.stderr, "panic:") {
		t.Errorf("plugin panicked:\n%s", r.stderr)
	}
	return r
}

// TestBinaryAddDel runs the built binary for ADD, CHECK and DEL inside a
// test node namespace, with the node namespace being the process's own,
// as in production.
func TestBinaryAddDel(t *testing.T) {
	t.Parallel()
	e, p := newMultiIPPod(t, "192.168.1.80", "bin")
	conf := e.conf("1.1.0", "")
	env := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": p.cid, "CNI_NETNS": p.ns.Path(), "CNI_IFNAME": "eth0",
		"CNI_PATH": "/nonexistent", "CNI_ARGS": podArgs("default", p.name, p.cid)}
	r := runBinaryIn(t, e.node.ns, env, string(conf))
	if r.exitCode != 0 {
		t.Fatalf("ADD: exit %d\n%s\n%s", r.exitCode, r.stdout, r.stderr)
	}
	var res struct {
		CNIVersion string `json:"cniVersion"`
		IPs        []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.CNIVersion != "1.1.0" || len(res.IPs) != 1 || res.IPs[0].Address != "192.168.1.80/32" {
		t.Fatalf("ADD result %s (%v)", r.stdout, err)
	}
	e.recordedHostNS = "" // the binary's own namespace is the node's
	att := e.wantState(p, "PolicyRoute")
	if !linkExists(t, e.node.nl, att.Spec.HostVeth) {
		t.Errorf("host veth %s not in the node namespace", att.Spec.HostVeth)
	}
	env["CNI_COMMAND"] = "CHECK"
	if r := runBinaryIn(t, e.node.ns, env, string(withPrev(conf, []byte(r.stdout)))); r.exitCode != 0 {
		t.Errorf("CHECK: exit %d %s", r.exitCode, r.stdout)
	}
	env["CNI_COMMAND"] = "DEL"
	for range 2 {
		if r := runBinaryIn(t, e.node.ns, env, string(conf)); r.exitCode != 0 || r.stdout != "" {
			t.Errorf("DEL: exit %d %q %s", r.exitCode, r.stdout, r.stderr)
		}
		env["CNI_NETNS"] = ""
	}
	if linkExists(t, e.node.nl, att.Spec.HostVeth) {
		t.Errorf("host veth %s left after DEL", att.Spec.HostVeth)
	}
	if m := mentions(e.node.state(t), "192.168.1.80"); len(m) > 0 {
		t.Errorf("node still refers to the pod:\n%s", strings.Join(m, "\n"))
	}
}
