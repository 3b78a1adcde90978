package daemon

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenUnixReplacesOnlySockets: a stale socket at socket_path is
// replaced; a regular file, a directory or a symlink there is refused with
// an error naming the path and what is there, and left as it was.
func TestListenUnixReplacesOnlySockets(t *testing.T) {
	dir, err := os.MkdirTemp("", "ts")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	t.Run("stale socket", func(t *testing.T) {
		path := filepath.Join(dir, "stale.sock")
		old, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		old.(*net.UnixListener).SetUnlinkOnClose(false)
		old.Close() // the socket file stays, as after a crash
		if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
			t.Fatalf("setup: want a stale socket at %s: %v %v", path, fi, err)
		}
		ln, err := listenUnix(path)
		if err != nil {
			t.Fatalf("a stale socket must be replaced: %v", err)
		}
		ln.Close()
	})

	refused := []struct {
		name, what string
		make       func(path string) error
		check      func(path string) error
	}{
		{"regular file", "a regular file",
			func(p string) error { return os.WriteFile(p, []byte("precious"), 0o600) },
			func(p string) error {
				b, err := os.ReadFile(p)
				if err == nil && string(b) != "precious" {
					t.Errorf("file content changed: %q", b)
				}
				return err
			}},
		{"directory", "a directory",
			func(p string) error {
				if err := os.Mkdir(p, 0o700); err != nil {
					return err
				}
				return os.WriteFile(filepath.Join(p, "inside"), nil, 0o600)
			},
			func(p string) error { _, err := os.Stat(filepath.Join(p, "inside")); return err }},
		{"symlink", "a symbolic link",
			func(p string) error {
				target := p + ".target"
				if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
					return err
				}
				return os.Symlink(target, p)
			},
			func(p string) error {
				fi, err := os.Lstat(p)
				if err == nil && fi.Mode().Type() != os.ModeSymlink {
					t.Errorf("symlink replaced by %v", fi.Mode())
				}
				if err == nil {
					_, err = os.Stat(p + ".target")
				}
				return err
			}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := tc.make(path); err != nil {
				t.Fatal(err)
			}
			ln, err := listenUnix(path)
			if err == nil {
				ln.Close()
				t.Fatalf("listenUnix over %s succeeded; want it refused", tc.what)
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, tc.what) {
				t.Errorf("error %q: want the path %s and %q", msg, path, tc.what)
			}
			if err := tc.check(path); err != nil {
				t.Errorf("what was at the path was touched: %v", err)
			}
		})
	}
}
