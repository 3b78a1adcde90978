package cni

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// about is printed on stderr when the binary runs without CNI_COMMAND.
var about = fmt.Sprintf("terway: the Terway-style CNI plugin for terwayd (CNI spec %s)", strings.Join(SupportedVersions, ", "))

// Main runs the binary as a CNI plugin: the CNI_* environment and the
// network config on stdin in, the result or a CNI error as JSON on stdout
// out, exit status 1 on error.
func Main() {
	os.Exit(run(os.Stdout, os.Stderr))
}

func run(stdout, stderr io.Writer) int {
	cmd := os.Getenv("CNI_COMMAND")
	var conf []byte
	if cmd == "" {
		// skel answers code 4 (missing CNI_COMMAND); a human gets a hint too.
		_, _ = fmt.Fprintln(stderr, about)
	} else if cmd != "VERSION" {
		// The config is read here, and replayed to skel, to answer errors
		// in the config's cniVersion.
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			printError(stdout, "", types.NewError(types.ErrIOFailure, fmt.Sprintf("read stdin: %v", err), ""))
			return 1
		}
		conf = data
		if err := replayStdin(data); err != nil {
			printError(stdout, "", types.NewError(types.ErrIOFailure, fmt.Sprintf("replay stdin: %v", err), ""))
			return 1
		}
	}
	p := newPlugin(stdout, stderr)
	p.reap = spawnReaper
	if e := skel.PluginMainFuncsWithError(p.funcs(), version.PluginSupports(SupportedVersions...), ""); e != nil {
		printError(stdout, errorVersion(conf), e)
		return 1
	}
	return 0
}

// replayStdin makes data os.Stdin again, through a pipe.
func replayStdin(data []byte) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	go func() {
		_, _ = w.Write(data)
		_ = w.Close()
	}()
	os.Stdin = r
	return nil
}

// errorVersion is the cniVersion of an error answer: the config's when
// the plugin supports it, else the newest.
func errorVersion(conf []byte) string {
	var c struct {
		CNIVersion string `json:"cniVersion"`
	}
	if json.Unmarshal(conf, &c) == nil && slices.Contains(SupportedVersions, c.CNIVersion) {
		return c.CNIVersion
	}
	return SupportedVersions[len(SupportedVersions)-1]
}

// cniError is the spec's error answer.
type cniError struct {
	CNIVersion string `json:"cniVersion"`
	Code       uint   `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details,omitempty"`
}

func printError(w io.Writer, cniVersion string, e *types.Error) {
	if cniVersion == "" {
		cniVersion = SupportedVersions[len(SupportedVersions)-1]
	}
	out, _ := json.MarshalIndent(cniError{CNIVersion: cniVersion, Code: e.Code, Msg: e.Msg, Details: e.Details}, "", "    ")
	_, _ = fmt.Fprintf(w, "%s\n", out)
}
