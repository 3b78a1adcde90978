package cni

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// binEnv is a complete environment for one verb, as containerd sets it.
func binEnv(t *testing.T, cmd string) map[string]string {
	t.Helper()
	netns := filepath.Join(t.TempDir(), "netns") // never opened: every case fails before
	return map[string]string{
		"CNI_COMMAND":     cmd,
		"CNI_CONTAINERID": "c0ffee",
		"CNI_NETNS":       netns,
		"CNI_IFNAME":      "eth0",
		"CNI_PATH":        "/nonexistent-cni-bin",
		"CNI_ARGS":        podArgs("default", "web-0", "c0ffee"),
	}
}

// binConf is a config whose socket and state dir are private to the test.
func binConf(t *testing.T, version string, extra string) (conf, socket string) {
	t.Helper()
	dir := t.TempDir()
	socket = filepath.Join(dir, "no-daemon.socket")
	conf = fmt.Sprintf(`{"cniVersion":%q,"name":"terway","type":"terway","socket_path":%q,"state_dir":%q%s}`,
		version, socket, filepath.Join(dir, "state"), extra)
	return conf, socket
}

// wantCNIError asserts a failed run printed the spec's error JSON.
func wantCNIError(t *testing.T, r execResult, code uint, msgHas ...string) {
	t.Helper()
	if r.exitCode == 0 {
		t.Fatalf("exit status 0, want failure; stdout %q", r.stdout)
	}
	var e struct {
		CNIVersion *string `json:"cniVersion"`
		Code       *uint   `json:"code"`
		Msg        *string `json:"msg"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q (stderr %q)", err, r.stdout, r.stderr)
	}
	if e.CNIVersion == nil || *e.CNIVersion == "" || e.Code == nil || e.Msg == nil {
		t.Fatalf("error JSON lacks cniVersion, code or msg: %s", r.stdout)
	}
	if *e.Code != code {
		t.Fatalf("code %d, want %d: %s", *e.Code, code, r.stdout)
	}
	for _, s := range msgHas {
		if !strings.Contains(*e.Msg, s) {
			t.Errorf("msg %q lacks %q", *e.Msg, s)
		}
	}
}

// TestBinaryErrorCodes runs the binary the way a runtime does and checks
// the CNI error code of every kind of bad input.
func TestBinaryErrorCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cmd     string
		unset   string // env var to remove
		version string
		extra   string // appended to the config object
		stdin   string // replaces the config when set
		code    uint
		msgHas  []string
	}{
		{name: "malformed stdin", cmd: "ADD", stdin: `{"cniVersion":"1.0.0",`, code: 6},
		{name: "stdin not an object", cmd: "DEL", stdin: `[1,2]`, code: 6},
		{name: "unknown field", cmd: "ADD", extra: `,"bogus_key":{"x":1}`, code: 2, msgHas: []string{"bogus_key", `{"x":1}`}},
		{name: "unknown field on DEL", cmd: "DEL", extra: `,"eniip_virtual":"IPVlan"`, code: 2, msgHas: []string{"eniip_virtual", "IPVlan"}},
		{name: "unsupported cniVersion", cmd: "ADD", version: "0.2.0", code: 1},
		{name: "future cniVersion", cmd: "ADD", version: "9.9.9", code: 1},
		{name: "no cniVersion", cmd: "ADD", stdin: `{"name":"terway","type":"terway"}`, code: 1},
		{name: "CHECK before 0.4.0", cmd: "CHECK", version: "0.3.1", code: 1},
		{name: "GC before 1.1.0", cmd: "GC", version: "1.0.0", code: 1},
		{name: "STATUS before 1.1.0", cmd: "STATUS", version: "0.4.0", code: 1},
		{name: "missing CNI_COMMAND", cmd: "ADD", unset: "CNI_COMMAND", code: 4, msgHas: []string{"CNI_COMMAND"}},
		{name: "missing CNI_CONTAINERID", cmd: "ADD", unset: "CNI_CONTAINERID", code: 4, msgHas: []string{"CNI_CONTAINERID"}},
		{name: "missing CNI_NETNS", cmd: "ADD", unset: "CNI_NETNS", code: 4, msgHas: []string{"CNI_NETNS"}},
		{name: "missing CNI_IFNAME", cmd: "ADD", unset: "CNI_IFNAME", code: 4, msgHas: []string{"CNI_IFNAME"}},
		{name: "missing CNI_IFNAME on DEL", cmd: "DEL", unset: "CNI_IFNAME", code: 4, msgHas: []string{"CNI_IFNAME"}},
		{name: "missing pod in CNI_ARGS", cmd: "ADD", unset: "CNI_ARGS", code: 4, msgHas: []string{"K8S_POD_NAME"}},
		{name: "bad host_stack_cidrs", cmd: "ADD", extra: `,"host_stack_cidrs":["10.0.0.0/33"]`, code: 7, msgHas: []string{"10.0.0.0/33"}},
		{name: "bad mtu", cmd: "ADD", extra: `,"mtu":70000`, code: 7, msgHas: []string{"mtu"}},
		{name: "mtu not a number", cmd: "ADD", extra: `,"mtu":"big"`, code: 7},
		{name: "bad eniip_virtual_type", cmd: "ADD", extra: `,"eniip_virtual_type":"macvlan"`, code: 7, msgHas: []string{"macvlan"}},
		{name: "reserved veth_prefix", cmd: "ADD", extra: `,"veth_prefix":"tzd"`, code: 7, msgHas: []string{"tzd", "reserved"}},
		{name: "relative socket_path", cmd: "STATUS", version: "1.1.0", stdin: `{"cniVersion":"1.1.0","name":"terway","type":"terway","socket_path":"eni.socket"}`, code: 7},
		{name: "daemon unreachable on ADD", cmd: "ADD", code: 11, msgHas: []string{"no-daemon.socket", "unreachable"}},
		{name: "daemon unreachable on STATUS", cmd: "STATUS", version: "1.1.0", code: 50, msgHas: []string{"no-daemon.socket"}},
		{name: "daemon unreachable on GC", cmd: "GC", version: "1.1.0", code: 11, msgHas: []string{"no-daemon.socket"}},
		{name: "CHECK without state", cmd: "CHECK", code: 3, msgHas: []string{"container unknown", "c0ffee"}},
		{name: "unusable state_dir", cmd: "DEL", stdin: `{"cniVersion":"1.0.0","name":"terway","type":"terway","state_dir":"/dev/null/state"}`, code: 5, msgHas: []string{"/dev/null/state"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			version := tc.version
			if version == "" {
				version = "1.0.0"
			}
			conf, _ := binConf(t, version, tc.extra)
			if tc.stdin != "" {
				conf = tc.stdin
			}
			env := binEnv(t, tc.cmd)
			delete(env, tc.unset)
			r := runBinary(t, env, conf)
			wantCNIError(t, r, tc.code, tc.msgHas...)
			if tc.unset == "CNI_COMMAND" && !strings.Contains(r.stderr, "CNI plugin") && !strings.Contains(r.stderr, "terway") {
				t.Errorf("no hint on stderr without CNI_COMMAND: %q", r.stderr)
			}
		})
	}
}

// TestBinaryErrorVersion: an error is answered in the config's cniVersion
// when the plugin speaks it.
func TestBinaryErrorVersion(t *testing.T) {
	t.Parallel()
	for _, v := range SupportedVersions {
		conf, _ := binConf(t, v, `,"mtu":1`)
		r := runBinary(t, binEnv(t, "ADD"), conf)
		wantCNIError(t, r, 7)
		if !strings.Contains(r.stdout, `"cniVersion": "`+v+`"`) {
			t.Errorf("config %s: error answered as %s", v, r.stdout)
		}
	}
}

// TestBinaryDelDaemonDown: DEL with the daemon down and no state succeeds
// and prints nothing; so does the second DEL without CNI_NETNS.
func TestBinaryDelDaemonDown(t *testing.T) {
	t.Parallel()
	for _, v := range SupportedVersions {
		conf, _ := binConf(t, v, "")
		env := binEnv(t, "DEL")
		for i, netns := range []string{env["CNI_NETNS"], ""} {
			env["CNI_NETNS"] = netns
			r := runBinary(t, env, conf)
			if r.exitCode != 0 || r.stdout != "" {
				t.Errorf("%s DEL %d: exit %d stdout %q stderr %q", v, i+1, r.exitCode, r.stdout, r.stderr)
			}
		}
	}
}

// TestBinaryVersion: VERSION lists exactly the spec versions supported.
func TestBinaryVersion(t *testing.T) {
	t.Parallel()
	r := runBinary(t, map[string]string{"CNI_COMMAND": "VERSION"}, "")
	if r.exitCode != 0 {
		t.Fatalf("VERSION: exit %d: %s %s", r.exitCode, r.stdout, r.stderr)
	}
	var v struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("VERSION output %q: %v", r.stdout, err)
	}
	want := []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}
	if !reflect.DeepEqual(v.SupportedVersions, want) || v.CNIVersion != "1.1.0" {
		t.Errorf("VERSION = %+v, want cniVersion 1.1.0 and supportedVersions %v", v, want)
	}
}

// TestBinaryLogFile: with log_file set nothing but the result reaches
// stdout and the log lands in the file, naming the ignored Terway keys.
func TestBinaryLogFile(t *testing.T) {
	t.Parallel()
	logFile := filepath.Join(t.TempDir(), "log", "terway.log")
	conf, _ := binConf(t, "1.1.0", fmt.Sprintf(`,"log_file":%q,"ip_stack":"ipv4","vlan_strip_type":"filter","debug":true`, logFile))
	r := runBinary(t, binEnv(t, "DEL"), conf)
	if r.exitCode != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("DEL: exit %d stdout %q stderr %q", r.exitCode, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"ip_stack", "vlan_strip_type", "verb=DEL", "containerID=c0ffee"} {
		if !strings.Contains(string(data), s) {
			t.Errorf("log lacks %q:\n%s", s, data)
		}
	}
}
