package kernelvm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/internal/plugintest"
)

// vmKernel is the kernel of KERNELVM_CACHE (make test-kernel sets it),
// fetched if need be; without it the VM tests do not run.
func vmKernel(t *testing.T) *Kernel {
	t.Helper()
	cache := os.Getenv("KERNELVM_CACHE")
	if cache == "" {
		t.Skip("KERNELVM_CACHE is not set: the kernel VM tests run with make test-kernel")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatalf("make test-kernel needs qemu-system-x86_64: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	release := os.Getenv("KERNELVM_RELEASE")
	if release == "" {
		var err error
		if release, err = DefaultRelease(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	k, err := Fetch(ctx, cache, release)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// static builds a package as a static binary into dir.
func static(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

var vmModules = []string{"virtio_pci", "9pnet_virtio", "9p", "veth", "ipvlan", "8021q", "dummy"}

// The VM's kernel creates the links this machine's cannot.
func TestVMCreatesIPVlanAndVLAN(t *testing.T) {
	k := vmKernel(t)
	share := t.TempDir()
	static(t, share, "github.com/terway-sim/terway/lab/kernelvm/internal/linkprobe")
	var console strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	code, err := Run(ctx, Config{Kernel: k, Modules: vmModules, Command: []string{"/host/linkprobe"},
		Share: share, WorkDir: t.TempDir(), Console: &console})
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("linkprobe exited %d; console:\n%s", code, console.String())
	}
	for _, want := range []string{"veth ok", "ipvlan ok", "vlan ok", "dummy ok"} {
		if !strings.Contains(console.String(), want) {
			t.Errorf("console lacks %q:\n%s", want, console.String())
		}
	}
	t.Logf("kernel %s: booted, created the links and powered off in %v", k.Release, time.Since(t0).Round(time.Millisecond))
}

// A command's exit status comes back, and a missing command is no exit
// status but an error with the console's tail.
func TestVMExitStatus(t *testing.T) {
	k := vmKernel(t)
	share := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	code, err := Run(ctx, Config{Kernel: k, Modules: vmModules, Command: []string{"/host/missing"},
		Share: share, WorkDir: t.TempDir()})
	if err != nil || code != 124 {
		t.Errorf("a command that cannot start: status %d, %v; want vminit's 124", code, err)
	}
}

// A VM that ends without the command's status (here: killed by its
// deadline while booting) is ErrNoExit, not a status.
func TestVMDeadline(t *testing.T) {
	k := vmKernel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	code, err := Run(ctx, Config{Kernel: k, Modules: vmModules, Command: []string{"/host/none"},
		Share: t.TempDir(), WorkDir: t.TempDir()})
	if !errors.Is(err, ErrNoExit) {
		t.Errorf("a VM killed while booting: status %d, %v; want ErrNoExit", code, err)
	}
}

// The modules load after what they depend on, and what is built into
// the kernel is left out.
func TestVMModulesInDependencyOrder(t *testing.T) {
	k := vmKernel(t)
	mods, err := k.Modules(vmModules)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, m := range mods {
		pos[moduleName(m)] = i
	}
	for _, m := range mods {
		deps, err := moduleDepends(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deps {
			if p, ok := pos[strings.ReplaceAll(d, "-", "_")]; ok && p > pos[moduleName(m)] {
				t.Errorf("%s loads before its dependency %s", moduleName(m), d)
			}
		}
	}
	for _, want := range []string{"ipvlan", "8021q", "9pnet_virtio"} {
		if _, ok := pos[want]; !ok {
			t.Errorf("%s not among the modules: %v", want, mods)
		}
	}
	if _, err := k.Modules([]string{"no_such_module"}); err == nil {
		t.Error("an unknown module resolved")
	}
}

// The datapath package's tests pass under the VM's kernel, with ipvlan
// there: the test binary runs from the host share, with the ip and nsenter
// it calls.
func TestVMDatapathTests(t *testing.T) {
	k := vmKernel(t)
	share := t.TempDir()
	build := exec.Command("go", "test", "-c", "-o", filepath.Join(share, "datapath.test"), "github.com/terway-sim/terway/cni/datapath")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the datapath tests: %v\n%s", err, out)
	}
	var progs []string
	for _, name := range []string{"ip", "nsenter"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("the datapath tests run %s: %v", name, err)
		}
		progs = append(progs, p)
	}
	var console strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	code, err := Run(ctx, Config{Kernel: k, Modules: append(vmModules, datapathModules...), Programs: progs,
		Command: []string{"/host/datapath.test", "-test.v", "-test.count=1",
			"-test.bench", "BenchmarkSetupTeardown", "-test.benchtime", "100x"},
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"}, Share: share, WorkDir: t.TempDir(), Console: &console})
	if err != nil {
		t.Fatal(err)
	}
	out := console.String()
	if code != 0 {
		t.Fatalf("the datapath tests exited %d in the VM; console:\n%s", code, out)
	}
	if !strings.Contains(out, "kernel has ipvlan: true") || !strings.Contains(out, "--- PASS: TestProbeIPVlan") {
		t.Errorf("TestProbeIPVlan did not pass with ipvlan in the VM:\n%s", out)
	}
	if strings.Contains(out, "--- SKIP") {
		t.Errorf("a datapath test skipped in the VM, where every kernel feature is there:\n%s", out)
	}
	requireVMPassed(t, out, "TestIPVlan", "TestIPVlanOneAddressOnePod", "TestCheckIPVlan", "TestVLAN", "TestCheckVLAN")
	t.Logf("datapath tests in the VM: %d passed", strings.Count(out, "--- PASS"))
	logRatios(t, out, "PolicyRoute", "IPVlan")
}

// datapathModules are what the datapaths' tests use besides links: tc
// (bandwidth), the ingress qdisc and filters the ENI datapaths set, and
// htb, which a test puts where tbf belongs.
var datapathModules = []string{"sch_tbf", "sch_htb", "sch_ingress", "cls_u32", "act_mirred", "act_skbedit", "act_tunnel_key", "ifb"}

// requireVMPassed fails unless every test named passed in the VM's
// output, and logs the ipvlan and VLAN tests that passed (make
// test-kernel's output shows them).
func requireVMPassed(t *testing.T, out string, names ...string) {
	t.Helper()
	passed := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "--- PASS: ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, " ")
		passed[name] = true
		if l := strings.ToLower(name); strings.Contains(l, "vlan") || strings.Contains(l, "trunk") {
			t.Logf("passed in the VM: %s", rest)
		}
	}
	for _, n := range names {
		if !passed[n] {
			t.Errorf("%s did not pass in the VM", n)
		}
	}
}

// e2eModules are what the lab's fabric and the end-to-end tests use:
// bridges with nftables anti-spoofing, and nftables NAT for the DNAT
// rule that stands in for kube-proxy (nft_meta_bridge: the bridge
// family's meta expression). crc32c_generic comes first:
// nf_tables needs libcrc32c, whose init asks the crypto API for crc32c,
// a soft dependency (no modprobe in the VM loads it on demand).
var e2eModules = []string{"crc32c_generic", "bridge", "nf_tables", "nft_meta_bridge", "nft_chain_nat", "nft_nat"}

// The lab's end-to-end tests of the IPVlan datapath pass under the VM's
// kernel: fakecloud, the fabric, a daemon per node and the plugin binary
// (built here and handed over by plugintest.PrebuiltEnv).
func TestVMEndToEndIPVlan(t *testing.T) {
	// A subtest pattern applies to tests without subtests too.
	out := runPackageInVM(t, "github.com/terway-sim/terway/lab/e2e",
		"^(TestDatapathsAcrossSpecVersions|TestIPVlanServiceThroughNode)$/^IPVlan$", e2eModules)
	requireVMPassed(t, out, "TestDatapathsAcrossSpecVersions/IPVlan", "TestIPVlanServiceThroughNode")
}

// The plugin picks IPVlan by its own probe, and VLAN for a trunk member's
// answer, and ADD, CHECK and DEL work through them.
func TestVMPluginKinds(t *testing.T) {
	out := runPackageInVM(t, "github.com/terway-sim/terway/cni", "^(TestIPVlanPod|TestTrunkMemberPod)$", nil)
	requireVMPassed(t, out, "TestIPVlanPod", "TestTrunkMemberPod")
}

// runPackageInVM builds pkg's tests and the plugin on the host, runs the
// tests matching run in the VM with the datapath modules and extra, and
// returns the console. A failure, or any skip, fails t.
func runPackageInVM(t *testing.T, pkg, run string, extra []string) string {
	t.Helper()
	k := vmKernel(t)
	share := t.TempDir()
	for _, b := range [][]string{
		{"test", "-c", "-o", filepath.Join(share, "pkg.test"), pkg},
		{"build", "-tags", "grpcnotrace", "-o", filepath.Join(share, "plugin", "terway"), "github.com/terway-sim/terway/cmd/terway"},
	} {
		build := exec.Command("go", b...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(b, " "), err, out)
		}
	}
	var console strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	code, err := Run(ctx, Config{Kernel: k, Modules: slices.Concat(vmModules, datapathModules, extra), Programs: hostPrograms(t, "ip", "nsenter"),
		Command: []string{"/host/pkg.test", "-test.v", "-test.count=1", "-test.run", run},
		Env:     []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", plugintest.PrebuiltEnv + "=/host/plugin"},
		Share:   share, WorkDir: t.TempDir(), Console: &console})
	if err != nil {
		t.Fatal(err)
	}
	out := console.String()
	if code != 0 {
		t.Fatalf("the tests of %s exited %d in the VM; console:\n%s", pkg, code, out)
	}
	if strings.Contains(out, "--- SKIP") {
		t.Errorf("a test of %s skipped in the VM, where the kernel has what it needs:\n%s", pkg, out)
	}
	return out
}

// hostPrograms resolves programs the tests in the VM run.
func hostPrograms(t *testing.T, names ...string) []string {
	t.Helper()
	var progs []string
	for _, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("the tests in the VM run %s: %v", name, err)
		}
		progs = append(progs, p)
	}
	return progs
}

// benchLine is a result line of BenchmarkSetupTeardown: the kind, then
// value-unit pairs.
var benchLine = regexp.MustCompile(`BenchmarkSetupTeardown/(\w+)-\d+\s+\d+\s+(.*)`)

// logRatios prints the benchmark's p50 and p99 of ADD (Setup) and DEL
// (TeardownDeferred) of kind over those of base, measured in the same VM:
// TCG's absolute times say little, their ratio does.
func logRatios(t *testing.T, out, base, kind string) {
	t.Helper()
	metrics := map[string]map[string]float64{}
	for _, m := range benchLine.FindAllStringSubmatch(out, -1) {
		f := strings.Fields(m[2])
		vals := map[string]float64{}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				vals[f[i+1]] = v
			}
		}
		metrics[m[1]] = vals
	}
	b, k := metrics[base], metrics[kind]
	if b == nil || k == nil {
		t.Errorf("BenchmarkSetupTeardown reported no %s or %s figures:\n%s", base, kind, out)
		return
	}
	for _, name := range []string{"add-p50-µs", "add-p99-µs", "del-p50-µs", "del-p99-µs"} {
		if b[name] == 0 {
			t.Errorf("no %s figure for %s", name, base)
			continue
		}
		t.Logf("%s %s: %.0f µs, %s %.0f µs, ratio %.2f (100 pairs, in the VM)", kind, name, k[name], base, b[name], k[name]/b[name])
	}
}
