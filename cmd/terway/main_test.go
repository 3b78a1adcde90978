package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "terway-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "terway")
	out, err := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", bin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errb.String(), "panic:") {
		t.Errorf("panic:\n%s", errb.String())
	}
	return out.String(), errb.String(), code
}

// TestInstallCNI: install-cni copies the binary and writes the conflist
// atomically (no temp files left), the installed binary works as the
// plugin, and a second run changes nothing.
func TestInstallCNI(t *testing.T) {
	root := t.TempDir()
	binDir, confDir := filepath.Join(root, "bin"), filepath.Join(root, "net.d")
	conf := filepath.Join(root, "10-terway.conf")
	if err := os.WriteFile(conf, []byte(`{"cniVersion":"0.4.0","name":"terway","type":"terway","eniip_virtual_type":"Veth"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"install-cni", "--bin-dir", binDir, "--conf-dir", confDir, "--conf", conf}
	out, errOut, code := run(t, nil, "", args...)
	if code != 0 || strings.Count(out, "installed") != 2 {
		t.Fatalf("install-cni: exit %d\n%s%s", code, out, errOut)
	}
	want, _ := os.ReadFile(bin)
	got, err := os.ReadFile(filepath.Join(binDir, "terway"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("installed binary differs from the running one (%v)", err)
	}
	if st, _ := os.Stat(filepath.Join(binDir, "terway")); st == nil || st.Mode().Perm() != 0o755 {
		t.Errorf("installed binary mode %v", st)
	}
	data, err := os.ReadFile(filepath.Join(confDir, "10-terway.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	if list, err := libcni.ConfListFromBytes(data); err != nil || list.CNIVersion != "0.4.0" || list.Plugins[0].Network.Type != "terway" {
		t.Errorf("conflist %+v %v\n%s", list, err, data)
	}
	for _, dir := range []string{binDir, confDir} {
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("%s holds %d files, want 1 (temp files left?)", dir, len(entries))
		}
	}
	iout, _, icode := runAt(t, filepath.Join(binDir, "terway"), []string{"CNI_COMMAND=VERSION"})
	if icode != 0 || !strings.Contains(iout, `"1.1.0"`) {
		t.Errorf("installed binary VERSION: exit %d %q", icode, iout)
	}
	out, errOut, code = run(t, nil, "", args...)
	if code != 0 || strings.Count(out, "unchanged") != 2 {
		t.Errorf("second install-cni: exit %d\n%s%s", code, out, errOut)
	}
}

func runAt(t *testing.T, path string, env []string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(path)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errb.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// TestInstallCNIRefuses: a bad config or a missing flag exits non-zero
// and writes nothing.
func TestInstallCNIRefuses(t *testing.T) {
	root := t.TempDir()
	binDir, confDir := filepath.Join(root, "bin"), filepath.Join(root, "net.d")
	conf := filepath.Join(root, "bad.conf")
	if err := os.WriteFile(conf, []byte(`{"cniVersion":"1.0.0","name":"terway","type":"terway","not_a_key":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"install-cni", "--bin-dir", binDir, "--conf-dir", confDir, "--conf", conf},
		{"install-cni", "--bin-dir", binDir, "--conf-dir", confDir},
		{"install-cni", "--bin-dir", binDir, "--conf-dir", confDir, "--conf", filepath.Join(root, "missing.conf")},
	} {
		_, errOut, code := run(t, nil, "", args...)
		if code == 0 {
			t.Errorf("%v: exit 0", args)
		}
		if args[len(args)-1] == conf && !strings.Contains(errOut, "not_a_key") {
			t.Errorf("%v: stderr %q does not name the bad key", args, errOut)
		}
	}
	for _, dir := range []string{binDir, confDir} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s created by a refused install (%v)", dir, err)
		}
	}
}

// TestPluginDispatch: without install-cni the binary is the CNI plugin.
func TestPluginDispatch(t *testing.T) {
	out, _, code := run(t, []string{"CNI_COMMAND=VERSION"}, "")
	if code != 0 || !strings.Contains(out, `"supportedVersions"`) {
		t.Errorf("VERSION: exit %d %q", code, out)
	}
	out, _, code = run(t, nil, "")
	if code == 0 || !strings.Contains(out, `"code": 4`) {
		t.Errorf("no CNI_COMMAND: exit %d %q, want CNI error code 4", code, out)
	}
}
