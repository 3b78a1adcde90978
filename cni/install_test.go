package cni

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

type installDirs struct {
	bin, conf, src, binary string
}

func newInstallDirs(t *testing.T) installDirs {
	t.Helper()
	root := t.TempDir()
	d := installDirs{bin: filepath.Join(root, "opt", "cni", "bin"), conf: filepath.Join(root, "etc", "cni", "net.d"),
		src: filepath.Join(root, "src"), binary: filepath.Join(root, "src", "terway-build")}
	if err := os.MkdirAll(d.src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.binary, []byte("#!/bin/sh\necho plugin v1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d installDirs) write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(d.src, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// noTemps fails when a directory holds anything but want.
func noTemps(t *testing.T, dir string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("%s holds %v, want %v", dir, names, want)
	}
}

func TestInstallConf(t *testing.T) {
	t.Parallel()
	d := newInstallDirs(t)
	conf := d.write(t, "10-terway.conf", `{"cniVersion":"1.0.0","name":"terway","type":"terway","eniip_virtual_type":"IPVlan","ip_stack":"ipv4"}`)
	r, err := Install(InstallOptions{Binary: d.binary, BinDir: d.bin, ConfDir: d.conf, Conf: conf})
	if err != nil {
		t.Fatal(err)
	}
	if !r.BinaryChanged || !r.ConfigChanged {
		t.Errorf("first install changed nothing: %+v", r)
	}
	bin, err := os.ReadFile(filepath.Join(d.bin, "terway"))
	if err != nil || string(bin) != "#!/bin/sh\necho plugin v1\n" {
		t.Errorf("installed binary %q %v", bin, err)
	}
	if st, _ := os.Stat(filepath.Join(d.bin, "terway")); st.Mode().Perm() != 0o755 {
		t.Errorf("binary mode %v, want 0755", st.Mode().Perm())
	}
	path := filepath.Join(d.conf, "10-terway.conflist")
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("conflist: %v", err)
	}
	data, _ := os.ReadFile(path)
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		t.Fatalf("conflist does not load: %v\n%s", err, data)
	}
	if list.Name != "terway" || list.CNIVersion != "1.0.0" || len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "terway" {
		t.Errorf("conflist %+v", list)
	}
	var plugin map[string]any
	_ = json.Unmarshal(list.Plugins[0].Bytes, &plugin)
	if plugin["eniip_virtual_type"] != "IPVlan" || plugin["ip_stack"] != "ipv4" || plugin["name"] != nil || plugin["cniVersion"] != nil {
		t.Errorf("plugin keys %v", plugin)
	}
	noTemps(t, d.bin, "terway")
	noTemps(t, d.conf, "10-terway.conflist")

	// Again: nothing to do, nothing touched.
	st1, _ := os.Stat(path)
	r, err = Install(InstallOptions{Binary: d.binary, BinDir: d.bin, ConfDir: d.conf, Conf: conf})
	if err != nil || r.BinaryChanged || r.ConfigChanged {
		t.Errorf("second install: %+v %v", r, err)
	}
	if st2, _ := os.Stat(path); !os.SameFile(st1, st2) {
		t.Error("unchanged conflist rewritten")
	}
	// A new binary replaces the old one.
	if err := os.WriteFile(d.binary, []byte("#!/bin/sh\necho plugin v2\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	r, err = Install(InstallOptions{Binary: d.binary, BinDir: d.bin, ConfDir: d.conf, Conf: conf})
	if err != nil || !r.BinaryChanged || r.ConfigChanged {
		t.Errorf("install of a new binary: %+v %v", r, err)
	}
	if bin, _ := os.ReadFile(filepath.Join(d.bin, "terway")); !bytes.Contains(bin, []byte("v2")) {
		t.Errorf("binary not replaced: %q", bin)
	}
	noTemps(t, d.bin, "terway")
}

func TestInstallConflist(t *testing.T) {
	t.Parallel()
	d := newInstallDirs(t)
	conf := d.write(t, "in.conflist", `{"cniVersion":"1.1.0","name":"k8s","plugins":[
		{"type":"terway","mtu":1500,"socket_path":"/run/lab/eni.socket"},
		{"type":"portmap","capabilities":{"portMappings":true},"anything":"goes"}]}`)
	r, err := Install(InstallOptions{Binary: d.binary, BinDir: d.bin, ConfDir: d.conf, Conf: conf, ConflistName: "05-lab.conflist"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(r.ConflistPath)
	list, err := libcni.ConfListFromBytes(data)
	if err != nil || len(list.Plugins) != 2 || list.Plugins[1].Network.Type != "portmap" || filepath.Base(r.ConflistPath) != "05-lab.conflist" {
		t.Errorf("conflist %s: %+v %v", r.ConflistPath, list, err)
	}
}

// TestInstallRefusesBadConf: a config the plugin would reject is not
// installed, and neither is the binary.
func TestInstallRefusesBadConf(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"unknown key":   `{"cniVersion":"1.0.0","name":"terway","type":"terway","bogus":1}`,
		"bad mtu":       `{"cniVersion":"1.0.0","name":"terway","type":"terway","mtu":1}`,
		"bad version":   `{"cniVersion":"0.2.0","name":"terway","type":"terway"}`,
		"not JSON":      `{"cniVersion":`,
		"not terway":    `{"cniVersion":"1.0.0","name":"br","type":"bridge"}`,
		"list, bad key": `{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"terway","eniip_virtual_type":"nope"}]}`,
		"list, none":    `{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge"}]}`,
	}
	for name, content := range bad {
		d := newInstallDirs(t)
		conf := d.write(t, "c.conf", content)
		if _, err := Install(InstallOptions{Binary: d.binary, BinDir: d.bin, ConfDir: d.conf, Conf: conf}); err == nil {
			t.Errorf("%s: installed", name)
		}
		for _, dir := range []string{d.bin, d.conf} {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s: %s created (%v)", name, dir, err)
			}
		}
	}
	d := newInstallDirs(t)
	conf := d.write(t, "c.conf", `{"cniVersion":"1.0.0","name":"terway","type":"terway"}`)
	if _, err := Install(InstallOptions{Binary: d.binary, BinDir: d.bin, ConfDir: d.conf, Conf: conf, ConflistName: "../x.conflist"}); err == nil {
		t.Error("conflist name with a path accepted")
	}
}
