package hostcheck

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is one user process.
type Process struct {
	PID  int    `json:"pid"`
	PPID int    `json:"ppid"`
	SID  int    `json:"sid"`
	Comm string `json:"comm"`
	// Start is the start time in clock ticks after boot (stat field 22):
	// with PID and BootID it names one process, PIDs being reused.
	Start uint64 `json:"start"`
	// NetNS is the network namespace, "net:[inode]", empty if unreadable.
	NetNS string `json:"netns,omitempty"`
	// Cmdline is the command line, arguments joined by spaces, cut at
	// maxCmdline bytes.
	Cmdline string `json:"cmdline,omitempty"`
}

const (
	maxCmdline = 256
	// pfKthread is PF_KTHREAD in the stat flags field: kernel threads
	// (kworkers) come and go on their own.
	pfKthread = 0x00200000
)

// takeProcesses lists /proc. A process that exits while being read is
// simply not listed.
func (s *Snapshot) takeProcesses() error {
	s.BootID = readBootID()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("list /proc: %w", err)
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := readProcess(pid)
		if !ok {
			continue
		}
		s.Processes = append(s.Processes, p)
		if pid == self {
			s.Taker = p
		}
	}
	if s.Taker.PID == 0 {
		return fmt.Errorf("own process %d not found in /proc", self)
	}
	return nil
}

// readProcess reads one process; ok is false for kernel threads, zombies
// and processes gone meanwhile.
func readProcess(pid int) (Process, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Process{}, false
	}
	p, user, err := parseStat(stat)
	if err != nil || !user {
		return Process{}, false
	}
	p.NetNS, _ = os.Readlink(filepath.Join(dir, "ns", "net"))
	if cmd, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		p.Cmdline = formatCmdline(cmd)
	}
	return p, true
}

// parseStat parses /proc/<pid>/stat. user is false for kernel threads and
// for zombies (dead, not yet reaped: not a running leftover).
func parseStat(b []byte) (p Process, user bool, err error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return p, false, errors.New("stat: no command in parentheses")
	}
	if p.PID, err = strconv.Atoi(strings.TrimSpace(string(b[:open]))); err != nil {
		return p, false, fmt.Errorf("stat pid: %w", err)
	}
	p.Comm = string(b[open+1 : end])
	// Fields after the command, counted from stat(5)'s field 3 (state).
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 {
		return p, false, fmt.Errorf("stat of %d: %d fields after the command", p.PID, len(f))
	}
	if p.PPID, err = strconv.Atoi(f[1]); err != nil {
		return p, false, fmt.Errorf("stat of %d ppid: %w", p.PID, err)
	}
	if p.SID, err = strconv.Atoi(f[3]); err != nil {
		return p, false, fmt.Errorf("stat of %d session: %w", p.PID, err)
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return p, false, fmt.Errorf("stat of %d flags: %w", p.PID, err)
	}
	if p.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return p, false, fmt.Errorf("stat of %d start time: %w", p.PID, err)
	}
	state := f[0]
	return p, flags&pfKthread == 0 && state != "Z" && state != "X", nil
}

func formatCmdline(b []byte) string {
	s := strings.TrimRight(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), " ")
	if len(s) > maxCmdline {
		s = s[:maxCmdline] + "…"
	}
	return s
}

// same reports whether p and q are one process (PID reuse aside).
func (p Process) same(q Process) bool { return p.PID == q.PID && p.Start == q.Start }

// String names the process for reports.
func (p Process) String() string { return fmt.Sprintf("pid %d (%s)", p.PID, p.Comm) }
