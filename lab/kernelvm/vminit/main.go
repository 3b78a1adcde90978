// Command vminit is PID 1 of a kernelvm VM: it mounts /proc, /sys, /dev,
// /run (with /run/netns) and the host's 9p share, loads the modules
// listed in /modules (in order), runs the command in /command with the
// environment in /environ, prints its exit status as a marker line and
// powers the VM off.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ExitMarker starts the line that carries the command's exit status.
const ExitMarker = "KERNELVM-EXIT "

func main() {
	code := run()
	fmt.Printf("\n%s%d\n", ExitMarker, code)
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func run() int {
	for _, m := range []struct{ src, dst, typ, data string }{
		{"proc", "/proc", "proc", ""}, {"sysfs", "/sys", "sysfs", ""}, {"devtmpfs", "/dev", "devtmpfs", ""},
		{"tmpfs", "/run", "tmpfs", "mode=0755"}, {"tmpfs", "/tmp", "tmpfs", "mode=1777"},
	} {
		_ = os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.typ, 0, m.data); err != nil {
			fmt.Fprintf(os.Stderr, "vminit: mount %s: %v\n", m.dst, err)
			return 120
		}
	}
	_ = os.MkdirAll("/run/netns", 0o755)
	if err := loopbackUp(); err != nil {
		fmt.Fprintln(os.Stderr, "vminit:", err)
		return 125
	}
	if err := loadModules(); err != nil {
		fmt.Fprintln(os.Stderr, "vminit:", err)
		return 121
	}
	_ = os.MkdirAll("/host", 0o755)
	if err := unix.Mount("host", "/host", "9p", unix.MS_RDONLY, "trans=virtio,version=9p2000.L,msize=262144"); err != nil {
		fmt.Fprintf(os.Stderr, "vminit: mount the host share: %v\n", err)
		return 122
	}
	argv := lines("/command")
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "vminit: no command")
		return 123
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = lines("/environ")
	cmd.Dir = "/tmp"
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				fmt.Fprintf(os.Stderr, "vminit: the command died of %v\n", ws.Signal())
				return 128 + int(ws.Signal()) // as a shell reports it
			}
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "vminit:", err)
		return 124
	}
	return 0
}

// loopbackUp sets lo up, as a booting system does: tests serve on
// 127.0.0.1.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

// loadModules loads every module file listed in /modules, in order.
func loadModules() error {
	for _, path := range lines("/modules") {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("load %s: %w", path, err)
		}
	}
	return nil
}

// lines reads a file of one entry per line.
func lines(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range bytes.Split(data, []byte("\n")) {
		if s := strings.TrimRight(string(l), "\r"); s != "" {
			out = append(out, s)
		}
	}
	return out
}
