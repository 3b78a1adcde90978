package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is one process the supervisor started and watches.
type proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	// expected is set before the supervisor itself ends the process (a
	// kill, a node stop or release): its exit is then no failure.
	expected atomic.Bool
}

// procs starts processes with a log file and a pid file each, so that
// down can find them after the supervisor itself died.
type procs struct {
	pidDir, logDir string
	env            []string

	mu   sync.Mutex
	list []*proc
}

func newProcs(dir string, env []string) (*procs, error) {
	ps := &procs{pidDir: filepath.Join(dir, "pids"), logDir: filepath.Join(dir, "logs"), env: env}
	for _, d := range []string{ps.pidDir, ps.logDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// start runs argv in the background with its output in <name>.log.
func (ps *procs) start(name string, argv ...string) (*proc, error) {
	logPath := filepath.Join(ps.logDir, name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = ps.env
	// Its own process group: a signal meant for the supervisor's group
	// must not reach the lab's processes, whose order of stopping matters.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// The pid file is written before anything waits for the process: until
	// then even one that has already exited stays a zombie whose
	// /proc/<pid>/stat still gives its start time.
	if err := writePidFile(filepath.Join(ps.pidDir, name+".pid"), cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("pid file of %s: %w", name, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, nil
}

// firstExited returns a process that has ended unexpectedly, or nil:
// every process of a lab is meant to run until down, except those the
// supervisor ended itself (kill, expectExit).
func (ps *procs) firstExited() *proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.list {
		if done, _ := p.exited(); done && !p.expected.Load() {
			return p
		}
	}
	return nil
}

// forget drops processes that have ended and were expected to, so that
// the list does not grow with every kill and restart.
func (ps *procs) forget() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	keep := ps.list[:0]
	for _, p := range ps.list {
		if done, _ := p.exited(); !done || !p.expected.Load() {
			keep = append(keep, p)
		}
	}
	clear(ps.list[len(keep):])
	ps.list = keep
}

// expectExit marks the process's end as the supervisor's doing.
func (p *proc) expectExit() { p.expected.Store(true) }

// kill ends the process with SIGKILL, as expected, and waits for it.
func (p *proc) kill() {
	p.expectExit()
	_ = p.cmd.Process.Kill()
	<-p.done
}

// running reports whether the process has not ended.
func (p *proc) running() bool {
	done, _ := p.exited()
	return !done
}

// exited reports whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM and waits; Kubernetes components that are still
// busy shutting down gracefully exit at once on a second SIGTERM, and
// whatever is left after that is killed.
func (p *proc) stop(grace time.Duration) {
	p.expectExit()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGKILL} {
		_ = p.cmd.Process.Signal(sig)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	<-p.done
}

// writePidFile records pid with its start time, so that a later sweep
// never kills an unrelated process that reused the number.
func writePidFile(path string, pid int) error {
	start, err := procStartTime(pid)
	if err != nil {
		return err
	}
	return os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", pid, start), 0o600)
}

// procStartTime is field 22 of /proc/<pid>/stat: when the process began,
// in clock ticks since boot.
func procStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it start
	// behind the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// pidFileAlive reads a pid file and returns the pid if that very process
// still runs.
func pidFileAlive(path string) (int, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(string(data), "%d %d", &pid, &start); err != nil || pid <= 0 {
		return 0, false
	}
	now, err := procStartTime(pid)
	if err != nil || now != start {
		return 0, false
	}
	return pid, true
}

// killPid stops one process of an earlier run: SIGTERM twice, then SIGKILL.
func killPid(pid int, grace time.Duration) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGKILL} {
		if err := syscall.Kill(pid, sig); errors.Is(err, syscall.ESRCH) {
			return
		}
		deadline := time.Now().Add(grace)
		for time.Now().Before(deadline) {
			if !processExists(pid) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// processExists reports whether pid runs and is not a zombie.
func processExists(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}
