// Command fakeplugin is a stand-in CNI plugin for cnicheck's tests. It
// touches no network: ADD returns a fixed address, CHECK passes unless a
// marker file named after the container ID exists in the netconf's
// markerDir, and every call is appended as one JSON line to
// <recordDir>/calls.log so tests can see what libcni passed.
//
// A marker may hold JSON {"code":N,"msg":"…","sleepMs":N}; an empty marker
// means code 999. It is built by the tests in a module of its own, so it
// uses only the standard library.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

var supported = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

type netConf struct {
	CNIVersion string `json:"cniVersion"`
	MarkerDir  string `json:"markerDir"`
	RecordDir  string `json:"recordDir"`
}

type marker struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	SleepMs int    `json:"sleepMs"`
}

type call struct {
	Command     string          `json:"command"`
	ContainerID string          `json:"containerID"`
	NetNS       string          `json:"netns"`
	IfName      string          `json:"ifName"`
	Args        string          `json:"args"`
	Path        string          `json:"path"`
	Stdin       json.RawMessage `json:"stdin"`
	// HostNetNS is the network namespace the plugin ran in.
	HostNetNS string `json:"hostNetns"`
}

func main() {
	stdin, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("", 5, "read stdin: "+err.Error())
	}
	cmd := os.Getenv("CNI_COMMAND")
	if cmd == "VERSION" {
		emit(map[string]any{"cniVersion": "1.1.0", "supportedVersions": supported})
		return
	}
	var conf netConf
	if err := json.Unmarshal(stdin, &conf); err != nil {
		fail("", 6, "decode netconf: "+err.Error())
	}
	record(conf, cmd, stdin)
	switch cmd {
	case "ADD":
		emit(addResult(conf.CNIVersion))
	case "CHECK":
		check(conf)
	case "DEL":
	default:
		fail(conf.CNIVersion, 4, "unknown CNI_COMMAND "+cmd)
	}
}

func check(conf netConf) {
	data, err := os.ReadFile(filepath.Join(conf.MarkerDir, os.Getenv("CNI_CONTAINERID")))
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		fail(conf.CNIVersion, 5, "read marker: "+err.Error())
	}
	m := marker{Code: 999, Msg: "stand-in: network of " + os.Getenv("CNI_CONTAINERID") + " does not match"}
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := json.Unmarshal(data, &m); err != nil {
			fail(conf.CNIVersion, 6, "decode marker: "+err.Error())
		}
	}
	time.Sleep(time.Duration(m.SleepMs) * time.Millisecond)
	fail(conf.CNIVersion, m.Code, m.Msg)
}

func addResult(v string) map[string]any {
	ip := map[string]any{"address": "192.168.1.10/24", "gateway": "192.168.1.253", "interface": 0}
	if strings.HasPrefix(v, "0.") {
		ip["version"] = "4"
	}
	return map[string]any{
		"cniVersion": v,
		"interfaces": []any{map[string]any{"name": os.Getenv("CNI_IFNAME"), "sandbox": os.Getenv("CNI_NETNS")}},
		"ips":        []any{ip},
	}
}

func record(conf netConf, cmd string, stdin []byte) {
	line, err := json.Marshal(call{
		Command:     cmd,
		ContainerID: os.Getenv("CNI_CONTAINERID"),
		NetNS:       os.Getenv("CNI_NETNS"),
		IfName:      os.Getenv("CNI_IFNAME"),
		Args:        os.Getenv("CNI_ARGS"),
		Path:        os.Getenv("CNI_PATH"),
		Stdin:       stdin,
		HostNetNS:   hostNetNS(),
	})
	if err != nil {
		fail(conf.CNIVersion, 999, "encode record: "+err.Error())
	}
	f, err := os.OpenFile(filepath.Join(conf.RecordDir, "calls.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fail(conf.CNIVersion, 5, "open record: "+err.Error())
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		fail(conf.CNIVersion, 5, "write record: "+err.Error())
	}
}

func emit(v any) {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func fail(v string, code uint, msg string) {
	emit(map[string]any{"cniVersion": v, "code": code, "msg": msg})
	os.Exit(1)
}

// hostNetNS names the network namespace this process runs in
// ("net:[inode]").
func hostNetNS() string {
	l, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return l
}
