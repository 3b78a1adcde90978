package cnicheck

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

// fixture is one node's CNI files, all under the test's temp dir.
type fixture struct {
	t                                    *testing.T
	confDir, cacheDir, markerDir, record string
	netns                                string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{
		t:         t,
		confDir:   filepath.Join(root, "net.d"),
		cacheDir:  filepath.Join(root, "cache"),
		markerDir: filepath.Join(root, "markers"),
		record:    filepath.Join(root, "record"),
		// The stand-in plugin never enters the netns; any existing path does.
		netns: filepath.Join(root, "netns"),
	}
	for _, d := range []string{f.confDir, f.markerDir, f.record} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.write(f.netns, "")
	return f
}

func (f *fixture) checker(networkName string) *Checker {
	return New(Options{ConfDir: f.confDir, BinDirs: []string{pluginBinDir}, CacheDir: f.cacheDir, NetworkName: networkName})
}

func (f *fixture) target(cid string) Target {
	return Target{ContainerID: cid, NetNS: f.netns, IfName: "eth0", PodNamespace: "default", PodName: "web-" + cid}
}

// pluginConf is the stand-in's netconf; extra is appended inside the object.
func (f *fixture) pluginConf(extra string) string {
	return fmt.Sprintf(`{"type":%q,"markerDir":%q,"recordDir":%q%s}`, pluginType, f.markerDir, f.record, extra)
}

func (f *fixture) conflist(name, version, extra string) string {
	return fmt.Sprintf(`{"cniVersion":%q,"name":%q,%s"plugins":[%s]}`, version, name, extra, f.pluginConf(""))
}

func (f *fixture) write(path, content string) {
	f.t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) writeConf(file, content string) string {
	f.t.Helper()
	path := filepath.Join(f.confDir, file)
	f.write(path, content)
	return path
}

// replaceConf swaps the file by rename, as config writers should.
func (f *fixture) replaceConf(file, content string) {
	f.t.Helper()
	tmp := filepath.Join(f.confDir, ".tmp-"+file)
	f.write(tmp, content)
	if err := os.Rename(tmp, filepath.Join(f.confDir, file)); err != nil {
		f.t.Fatal(err)
	}
}

// runtimeConf is what kubelet/containerd pass, written out independently
// of the code under test.
func (f *fixture) runtimeConf(tgt Target, capArgs map[string]any) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: tgt.ContainerID, NetNS: tgt.NetNS, IfName: tgt.IfName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", tgt.PodNamespace},
			{"K8S_POD_NAME", tgt.PodName}, {"K8S_POD_INFRA_CONTAINER_ID", tgt.ContainerID},
		},
		CapabilityArgs: capArgs,
	}
}

// add sets the pod up the way a runtime does, through libcni, which writes
// the ADD result into the cache dir.
func (f *fixture) add(network string, tgt Target, capArgs map[string]any) {
	f.t.Helper()
	list, err := libcni.LoadNetworkConf(f.confDir, network)
	if err != nil {
		f.t.Fatalf("load %q for ADD: %v", network, err)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{pluginBinDir}, f.cacheDir, nil)
	if _, err := cni.AddNetworkList(context.Background(), list, f.runtimeConf(tgt, capArgs)); err != nil {
		f.t.Fatalf("ADD %s: %v", tgt.ContainerID, err)
	}
}

// addedC1 writes the one network "terway" (CNI 1.0.0) and ADDs container
// c1 to it, as the runtime did when the pod started; it returns c1.
func (f *fixture) addedC1() Target {
	f.t.Helper()
	f.writeConf("10-net.conflist", f.conflist("terway", "1.0.0", ""))
	tgt := f.target("c1")
	f.add("terway", tgt, nil)
	return tgt
}

func (f *fixture) del(network string, tgt Target) {
	f.t.Helper()
	list, err := libcni.LoadNetworkConf(f.confDir, network)
	if err != nil {
		f.t.Fatal(err)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{pluginBinDir}, f.cacheDir, nil)
	if err := cni.DelNetworkList(context.Background(), list, f.runtimeConf(tgt, nil)); err != nil {
		f.t.Fatalf("DEL %s: %v", tgt.ContainerID, err)
	}
}

func (f *fixture) mark(cid, content string) {
	f.write(filepath.Join(f.markerDir, cid), content)
}

func (f *fixture) unmark(cid string) {
	if err := os.Remove(filepath.Join(f.markerDir, cid)); err != nil {
		f.t.Fatal(err)
	}
}

// call is one invocation the stand-in plugin recorded.
type call struct {
	Command     string `json:"command"`
	ContainerID string `json:"containerID"`
	NetNS       string `json:"netns"`
	IfName      string `json:"ifName"`
	Args        string `json:"args"`
	Path        string `json:"path"`
	HostNetNS   string `json:"hostNetns"`
	Stdin       struct {
		Name          string         `json:"name"`
		CNIVersion    string         `json:"cniVersion"`
		RuntimeConfig map[string]any `json:"runtimeConfig"`
		PrevResult    *struct {
			IPs []struct {
				Address string `json:"address"`
			} `json:"ips"`
		} `json:"prevResult"`
	} `json:"stdin"`
}

func (f *fixture) calls(command, cid string) []call {
	f.t.Helper()
	file, err := os.Open(filepath.Join(f.record, "calls.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	var out []call
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		var c call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			f.t.Fatalf("record %q: %v", sc.Text(), err)
		}
		if c.Command == command && c.ContainerID == cid {
			out = append(out, c)
		}
	}
	if err := sc.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) wantNoCheckRun(cid string) {
	f.t.Helper()
	if got := f.calls("CHECK", cid); len(got) != 0 {
		f.t.Fatalf("plugin ran CHECK %d times for %s, want none", len(got), cid)
	}
}

func wantIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want errors.Is %v", err, target)
	}
}

func TestCheckPassesAndSendsRuntimeArgs(t *testing.T) {
	tests := []struct {
		name, file, version string
		single              bool
	}{
		{name: "conflist 0.4.0", file: "10-net.conflist", version: "0.4.0"},
		{name: "conflist 1.0.0", file: "10-net.conflist", version: "1.0.0"},
		{name: "conflist 1.1.0", file: "10-net.conflist", version: "1.1.0"},
		{name: "single conf 0.4.0", file: "10-net.conf", version: "0.4.0", single: true},
		{name: "single json 1.0.0", file: "10-net.json", version: "1.0.0", single: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			content := f.conflist("terway", tc.version, "")
			if tc.single {
				content = fmt.Sprintf(`{"cniVersion":%q,"name":"terway",%s`, tc.version, f.pluginConf("")[1:])
			}
			f.writeConf(tc.file, content)
			tgt := f.target("c1")
			f.add("terway", tgt, nil)

			if err := f.checker("").Check(context.Background(), tgt); err != nil {
				t.Fatalf("Check: %v", err)
			}
			checks := f.calls("CHECK", "c1")
			if len(checks) != 1 {
				t.Fatalf("plugin ran CHECK %d times, want 1", len(checks))
			}
			wantCheckCall(t, checks[0], tgt, tc.version)
		})
	}
}

func wantCheckCall(t *testing.T, c call, tgt Target, version string) {
	t.Helper()
	wantArgs := "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-c1;K8S_POD_INFRA_CONTAINER_ID=c1"
	if c.Args != wantArgs {
		t.Errorf("CNI_ARGS %q, want %q", c.Args, wantArgs)
	}
	if c.NetNS != tgt.NetNS || c.IfName != tgt.IfName {
		t.Errorf("netns %q ifname %q, want %q %q", c.NetNS, c.IfName, tgt.NetNS, tgt.IfName)
	}
	if c.Path != pluginBinDir {
		t.Errorf("CNI_PATH %q, want %q", c.Path, pluginBinDir)
	}
	if c.Stdin.Name != "terway" || c.Stdin.CNIVersion != version {
		t.Errorf("netconf name %q version %q, want terway %s", c.Stdin.Name, c.Stdin.CNIVersion, version)
	}
	if p := c.Stdin.PrevResult; p == nil || len(p.IPs) != 1 || p.IPs[0].Address != "192.168.1.10/24" {
		t.Errorf("prevResult %+v, want the cached ADD result with 192.168.1.10/24", p)
	}
}

func TestCheckPluginFailureKeepsCodeAndMessage(t *testing.T) {
	f := newFixture(t)
	tgt := f.addedC1()
	c := f.checker("")

	f.mark("c1", `{"code":999,"msg":"veth peer is down"}`)
	err := c.Check(context.Background(), tgt)
	wantIs(t, err, ErrCheckFailed)
	var cniErr *types.Error
	if !errors.As(err, &cniErr) {
		t.Fatalf("error %v does not carry a *types.Error", err)
	}
	if cniErr.Code != 999 || cniErr.Msg != "veth peer is down" {
		t.Fatalf("plugin error code %d msg %q, want 999 %q", cniErr.Code, cniErr.Msg, "veth peer is down")
	}
	for _, want := range []string{"veth peer is down", "code 999", "default/web-c1", `network "terway"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	f.unmark("c1")
	if err := c.Check(context.Background(), tgt); err != nil {
		t.Fatalf("Check after repair: %v", err)
	}
}

func TestCheckTryAgainLaterIsNotAFailure(t *testing.T) {
	f := newFixture(t)
	tgt := f.addedC1()
	f.mark("c1", `{"code":11,"msg":"daemon busy"}`)

	err := f.checker("").Check(context.Background(), tgt)
	var cniErr *types.Error
	if err == nil || errors.Is(err, ErrCheckFailed) || !errors.As(err, &cniErr) || cniErr.Code != 11 {
		t.Fatalf("error %v, want a code 11 *types.Error that is not ErrCheckFailed", err)
	}
}

func TestCheckUnknownContainerHasNothingToCheck(t *testing.T) {
	f := newFixture(t)
	f.writeConf("10-net.conflist", f.conflist("terway", "1.0.0", ""))
	f.add("terway", f.target("c1"), nil)
	c := f.checker("")

	wantIs(t, c.Check(context.Background(), f.target("other")), ErrNotSetUp)
	f.wantNoCheckRun("other")

	otherIf := f.target("c1")
	otherIf.IfName = "eth1"
	wantIs(t, c.Check(context.Background(), otherIf), ErrNotSetUp)

	f.del("terway", f.target("c1"))
	wantIs(t, c.Check(context.Background(), f.target("c1")), ErrNotSetUp)
	f.wantNoCheckRun("c1")
}

func TestCheckWithoutConfigIsErrNoConfig(t *testing.T) {
	t.Run("empty dir", func(t *testing.T) {
		f := newFixture(t)
		wantIs(t, f.checker("").Check(context.Background(), f.target("c1")), ErrNoConfig)
	})
	t.Run("missing dir", func(t *testing.T) {
		f := newFixture(t)
		c := New(Options{ConfDir: filepath.Join(f.confDir, "absent"), BinDirs: []string{pluginBinDir}, CacheDir: f.cacheDir})
		wantIs(t, c.Check(context.Background(), f.target("c1")), ErrNoConfig)
	})
	t.Run("only other files", func(t *testing.T) {
		f := newFixture(t)
		f.writeConf("README.md", "not a config")
		if err := os.Mkdir(filepath.Join(f.confDir, "sub.conflist"), 0o755); err != nil {
			t.Fatal(err)
		}
		wantIs(t, f.checker("").Check(context.Background(), f.target("c1")), ErrNoConfig)
	})
	t.Run("no network with the name", func(t *testing.T) {
		f := newFixture(t)
		f.writeConf("10-net.conflist", f.conflist("terway", "1.0.0", ""))
		err := f.checker("absent").Check(context.Background(), f.target("c1"))
		wantIs(t, err, ErrNoConfig)
		if !strings.Contains(err.Error(), `"absent"`) {
			t.Errorf("error %q does not name the wanted network", err)
		}
	})
}

func TestCheckOldSpecVersionIsUnsupported(t *testing.T) {
	t.Run("conflist 0.3.1 with cached ADD", func(t *testing.T) {
		f := newFixture(t)
		f.writeConf("10-net.conflist", f.conflist("terway", "0.3.1", ""))
		f.add("terway", f.target("c1"), nil)
		wantIs(t, f.checker("").Check(context.Background(), f.target("c1")), ErrCheckUnsupported)
		f.wantNoCheckRun("c1")
	})
	t.Run("conf without cniVersion", func(t *testing.T) {
		f := newFixture(t)
		f.writeConf("10-net.conf", `{"name":"terway",`+f.pluginConf("")[1:])
		wantIs(t, f.checker("").Check(context.Background(), f.target("c1")), ErrCheckUnsupported)
	})
}

func TestCheckDisabledByConfig(t *testing.T) {
	f := newFixture(t)
	f.writeConf("10-net.conflist", f.conflist("terway", "1.0.0", `"disableCheck":true,`))
	f.add("terway", f.target("c1"), nil)
	wantIs(t, f.checker("").Check(context.Background(), f.target("c1")), ErrCheckDisabled)
	f.wantNoCheckRun("c1")
}

func TestCheckMalformedConfigNamesFile(t *testing.T) {
	tests := []struct{ name, file, content string }{
		{"invalid JSON", "10-net.conflist", `{"cniVersion":"1.0.0","name":"terway","plugins":[`},
		{"empty plugin list", "10-net.conflist", `{"cniVersion":"1.0.0","name":"terway","plugins":[]}`},
		{"no plugins key", "10-net.conflist", `{"cniVersion":"1.0.0","name":"terway"}`},
		{"no name", "10-net.conflist", `{"cniVersion":"1.0.0","plugins":[{"type":"x"}]}`},
		{"conf without type", "10-net.conf", `{"cniVersion":"1.0.0","name":"terway"}`},
		{"bad cniVersion", "10-net.conflist", `{"cniVersion":"one","name":"terway","plugins":[{"type":"x"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			path := f.writeConf(tc.file, tc.content)
			// A valid network later in lexical order must not be used instead.
			f.writeConf("20-net.conflist", f.conflist("other", "1.0.0", ""))
			err := f.checker("").Check(context.Background(), f.target("c1"))
			if err == nil || errors.Is(err, ErrNoConfig) {
				t.Fatalf("error %v, want a config error", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name %s", err, path)
			}
		})
	}
}

func TestCheckPicksNetwork(t *testing.T) {
	f := newFixture(t)
	f.writeConf("10-a.conflist", f.conflist("a", "1.0.0", ""))
	f.writeConf("20-b.conflist", f.conflist("b", "1.0.0", ""))
	tgt := f.target("c1")
	f.add("b", tgt, nil)

	// By default the lexically first file wins, which has no ADD for c1.
	wantIs(t, f.checker("").Check(context.Background(), tgt), ErrNotSetUp)
	if err := f.checker("b").Check(context.Background(), tgt); err != nil {
		t.Fatalf("Check network b: %v", err)
	}
	checks := f.calls("CHECK", "c1")
	if len(checks) != 1 || checks[0].Stdin.Name != "b" {
		t.Fatalf("CHECK calls %+v, want one for network b", checks)
	}
}

func TestCheckReloadsChangedConfig(t *testing.T) {
	f := newFixture(t)
	tgt := f.addedC1()
	c := f.checker("")
	if err := c.Check(context.Background(), tgt); err != nil {
		t.Fatalf("Check: %v", err)
	}

	f.replaceConf("10-net.conflist", f.conflist("terway", "0.3.1", ""))
	wantIs(t, c.Check(context.Background(), tgt), ErrCheckUnsupported)

	// Rewritten in place, same size: the new mtime must be noticed.
	path := f.writeConf("10-net.conflist", f.conflist("terway", "1.0.0", ""))
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(context.Background(), tgt); err != nil {
		t.Fatalf("Check after rewrite: %v", err)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	wantIs(t, c.Check(context.Background(), tgt), ErrNoConfig)
}

func TestLoadNetworkCachesUntilFileChanges(t *testing.T) {
	f := newFixture(t)
	path := f.writeConf("10-net.conflist", f.conflist("terway", "1.0.0", ""))
	c := f.checker("")
	first := mustLoad(t, c)
	if again := mustLoad(t, c); again.list != first.list {
		t.Fatal("unchanged file was parsed again")
	}

	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if again := mustLoad(t, c); again.list == first.list {
		t.Fatal("touched file was served from the cache")
	}

	// Plugins from <confDir>/<name>/*.conf are outside the file's stat,
	// so such a list is never cached.
	pluginDir := filepath.Join(f.confDir, "terway")
	if err := os.Mkdir(pluginDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f.write(filepath.Join(pluginDir, "50-extra.conf"), `{"type":"extra"}`)
	one, two := mustLoad(t, c), mustLoad(t, c)
	if one.list == two.list || len(two.list.Plugins) != 2 {
		t.Fatalf("list with a plugin dir: cached=%v plugins=%d, want uncached with 2", one.list == two.list, len(two.list.Plugins))
	}
}

func mustLoad(t *testing.T, c *Checker) network {
	t.Helper()
	net, err := c.loadNetwork()
	if err != nil {
		t.Fatal(err)
	}
	return net
}

func TestCheckReplaysCachedCapabilityArgs(t *testing.T) {
	f := newFixture(t)
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"terway","plugins":[%s]}`,
		f.pluginConf(`,"capabilities":{"portMappings":true}`))
	f.writeConf("10-net.conflist", conf)
	tgt := f.target("c1")
	ports := []any{map[string]any{"hostPort": float64(8080), "containerPort": float64(80), "protocol": "tcp"}}
	f.add("terway", tgt, map[string]any{"portMappings": ports})

	if err := f.checker("").Check(context.Background(), tgt); err != nil {
		t.Fatalf("Check: %v", err)
	}
	checks := f.calls("CHECK", "c1")
	if len(checks) != 1 {
		t.Fatalf("plugin ran CHECK %d times, want 1", len(checks))
	}
	if got := checks[0].Stdin.RuntimeConfig["portMappings"]; !reflect.DeepEqual(got, ports) {
		t.Fatalf("runtimeConfig.portMappings %v, want %v from the ADD", got, ports)
	}
}

func TestCheckHonoursContext(t *testing.T) {
	f := newFixture(t)
	tgt := f.addedC1()
	f.mark("c1", `{"code":999,"msg":"slow","sleepMs":30000}`)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := f.checker("").Check(ctx, tgt)
	wantIs(t, err, context.DeadlineExceeded)
	if errors.Is(err, ErrCheckFailed) {
		t.Fatalf("killed plugin counted as a failed check: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Check took %v after its deadline", d)
	}
}

func TestCheckMissingPluginIsNotAFailure(t *testing.T) {
	f := newFixture(t)
	tgt := f.addedC1()
	f.replaceConf("10-net.conflist", fmt.Sprintf(`{"cniVersion":"1.0.0","name":"terway","plugins":[%s,{"type":"no-such-plugin"}]}`, f.pluginConf("")))

	err := f.checker("").Check(context.Background(), tgt)
	if err == nil || errors.Is(err, ErrCheckFailed) || !strings.Contains(err.Error(), "no-such-plugin") {
		t.Fatalf("error %v, want a missing-plugin error that is not ErrCheckFailed", err)
	}
}

func TestCheckRejectsIncompleteTarget(t *testing.T) {
	f := newFixture(t)
	tgt := f.addedC1()
	tgt.NetNS = ""
	if err := f.checker("").Check(context.Background(), tgt); err == nil {
		t.Fatal("Check without netns succeeded")
	}
	f.wantNoCheckRun("c1")
}

func TestCheckConcurrent(t *testing.T) {
	f := newFixture(t)
	f.writeConf("10-net.conflist", f.conflist("terway", "1.0.0", ""))
	const pods = 8
	for i := range pods {
		f.add("terway", f.target(fmt.Sprint("c", i)), nil)
	}
	f.mark("c3", "")
	c := f.checker("")

	var wg sync.WaitGroup
	errs := make([]error, pods)
	for i := range pods {
		wg.Go(func() {
			for range 3 {
				if err := c.Check(context.Background(), f.target(fmt.Sprint("c", i))); err != nil {
					errs[i] = err
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if want := i == 3; errors.Is(err, ErrCheckFailed) != want || (!want && err != nil) {
			t.Errorf("pod c%d: error %v, want failure %v", i, err, want)
		}
	}
}

func TestNewDefaultsToProductionPaths(t *testing.T) {
	c := New(Options{})
	want := Options{ConfDir: "/etc/cni/net.d", BinDirs: []string{"/opt/cni/bin"}, CacheDir: "/var/lib/cni"}
	if !reflect.DeepEqual(c.opts, want) {
		t.Fatalf("defaults %+v, want %+v", c.opts, want)
	}

	dirs := []string{"/a"}
	c = New(Options{BinDirs: dirs})
	dirs[0] = "/changed"
	if c.opts.BinDirs[0] != "/a" {
		t.Fatal("Checker shares the caller's BinDirs slice")
	}
}
