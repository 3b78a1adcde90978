// Command terway is the CNI plugin (package cni): a container runtime runs
// it with the CNI_* environment and a network config on stdin. Run as
// `terway install-cni …` it installs itself and its network config
// instead (the DaemonSet's init container does this); `terway reap-links`
// is the detached child a DEL starts to delete the host veths it retired.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/cni"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == cni.ReapCommand {
		cni.ReapMain()
	}
	if len(os.Args) > 1 && os.Args[1] == "install-cni" {
		cmd := newInstallCommand(os.Stdout)
		cmd.SetArgs(os.Args[2:])
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
		return
	}
	cni.Main()
}

func newInstallCommand(stdout io.Writer) *cobra.Command {
	o := cni.InstallOptions{}
	cmd := &cobra.Command{
		Use:   "install-cni",
		Short: "Install the terway plugin binary and its network config",
		Long: `install-cni copies this executable into --bin-dir as "terway" and writes the
network config --conf into --conf-dir as --conflist-name (a single-plugin
.conf becomes a .conflist). The config is validated first; when it is bad
nothing is written. Each file is written to a temp file in its target
directory and renamed into place, and left alone when unchanged.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find own executable: %w", err)
			}
			o.Binary = self
			r, err := cni.Install(o)
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(stdout, "%s: %s\n%s: %s\n", r.BinaryPath, changed(r.BinaryChanged), r.ConflistPath, changed(r.ConfigChanged))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.BinDir, "bin-dir", "", "CNI bin directory of the runtime (e.g. /opt/cni/bin)")
	f.StringVar(&o.ConfDir, "conf-dir", "", "CNI conf directory of the runtime (e.g. /etc/cni/net.d)")
	f.StringVar(&o.Conf, "conf", "", "network config to install (.conf or .conflist)")
	f.StringVar(&o.ConflistName, "conflist-name", cni.DefaultConflistName, "file name of the installed conflist")
	for _, name := range []string{"bin-dir", "conf-dir", "conf"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func changed(c bool) string {
	if c {
		return "installed"
	}
	return "unchanged"
}
