package prereq

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// goTool runs the go command for builds. It owns the environment, so a
// GOFLAGS, GOBIN, GOOS or CGO_ENABLED of the caller (the Makefile exports
// GOFLAGS) cannot change what gets built or break -mod in the nested
// modules.
type goTool struct {
	path string
}

func newGoTool() (*goTool, error) {
	path, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the lab builds its binaries with the Go toolchain, and go is not in PATH (under sudo, keep PATH: sudo env PATH=$PATH ...): %w", err)
	}
	return &goTool{path: path}, nil
}

// goRun is one go command: args after "go", and extra environment.
type goRun struct {
	args []string
	env  []string
}

// String is the command as a shell would take it; stamps record it.
func (r goRun) String() string {
	words := append([]string{}, r.env...)
	words = append(words, "go")
	for _, a := range r.args {
		if strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// scrubbedEnv is the caller's environment without the variables that
// would change the build, plus GOWORK=off: the nested modules must build
// on their own even if a go.work appears above them.
func scrubbedEnv() []string {
	drop := map[string]bool{"GOFLAGS": true, "GOBIN": true, "GOWORK": true, "GOOS": true, "GOARCH": true, "CGO_ENABLED": true}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	return append(env, "GOWORK=off")
}

// run runs go in dir. Output is kept (its tail) and returned in the error
// only when the command fails: a working build is one progress line.
func (g *goTool) run(ctx context.Context, dir string, r goRun) error {
	cmd := exec.CommandContext(ctx, g.path, r.args...)
	cmd.Dir = dir
	cmd.Env = append(scrubbedEnv(), r.env...)
	out := &tailBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so cancelling kills the compilers and the
	// linker the go command started, not only the go command.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s (in %s): %w\n%s", r, dir, err, out.String())
	}
	return nil
}

// output runs go and returns its stdout, for queries like go env.
func (g *goTool) output(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, g.path, args...)
	cmd.Dir = dir
	cmd.Env = scrubbedEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// tailBuffer keeps the last max bytes written to it: a failing Kubernetes
// build can print a lot, and the end holds the cause.
type tailBuffer struct {
	max       int
	buf       []byte
	truncated bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.truncated = true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t.truncated {
		return "[…]\n" + string(t.buf)
	}
	return string(t.buf)
}
