// Command terway-cli inspects a running terwayd through its tracing API
// and the instance metadata service.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/rpc"
)

func main() {
	err := newCommand(os.Stdout).Execute()
	var me mappingError
	switch {
	case errors.As(err, &me):
		os.Exit(1)
	case err != nil:
		os.Exit(2)
	}
}

// mappingError makes `mapping` exit 1 when something is broken.
type mappingError struct{ n int }

func (e mappingError) Error() string { return fmt.Sprintf("error exists in mapping: %d broken", e.n) }

type globals struct {
	socket   string
	timeout  time.Duration
	metadata string
}

func newCommand(out io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:          "terway-cli",
		Short:        "Inspect terwayd: its resources, the pod ↔ store ↔ pool mapping, and instance metadata",
		SilenceUsage: true,
	}
	root.SetOut(out)
	pf := root.PersistentFlags()
	pf.StringVar(&g.socket, "socket", config.DefaultSocketPath, "the daemon's gRPC socket")
	pf.DurationVar(&g.timeout, "timeout", 30*time.Second, "how long a call may take")
	pf.StringVar(&g.metadata, "metadata-endpoint", cloud.DefaultMetadataEndpoint, "instance metadata service (metadata command)")
	root.AddCommand(listCommand(g, out), showCommand(g, out), mappingCommand(g, out), metadataCommand(g, out))
	return root
}

func (g *globals) client() (rpc.TerwayTracingClient, func(), error) {
	conn, err := grpc.NewClient("unix://"+g.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", g.socket, err)
	}
	return rpc.NewTerwayTracingClient(conn), func() { conn.Close() }, nil
}

// call runs fn with a client of the daemon's tracing API and a context
// bounded by --timeout, and closes the connection after.
func (g *globals) call(cmd *cobra.Command, fn func(context.Context, rpc.TerwayTracingClient) error) error {
	c, done, err := g.client()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	defer cancel()
	return fn(ctx, c)
}

func listCommand(g *globals, out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "list [type]",
		Short: "List resource types, or the resources of a type",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c rpc.TerwayTracingClient) error {
				if len(args) == 0 {
					r, err := c.GetResourceTypes(ctx, &rpc.Placeholder{})
					if err != nil {
						return err
					}
					fmt.Fprintln(out, strings.Join(r.TypeNames, "\n"))
					return nil
				}
				r, err := c.GetResources(ctx, &rpc.ResourceTypeRequest{Name: args[0]})
				if err != nil {
					return err
				}
				fmt.Fprintln(out, strings.Join(r.ResourceNames, "\n"))
				return nil
			})
		},
	}
}

func showCommand(g *globals, out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "show <type> [name]",
		Short: "Show the configuration and trace of a resource",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c rpc.TerwayTracingClient) error {
				name := "default"
				if len(args) == 2 {
					name = args[1]
				}
				req := &rpc.ResourceTypeNameRequest{Type: args[0], Name: name}
				conf, err := c.GetResourceConfig(ctx, req)
				if err != nil {
					return err
				}
				trace, err := c.GetResourceTrace(ctx, req)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "config:")
				for _, e := range conf.Config {
					fmt.Fprintf(w, "  %s\t%s\n", e.Key, e.Value)
				}
				fmt.Fprintln(w, "trace:")
				for _, e := range trace.Trace {
					fmt.Fprintf(w, "  %s\t%s\n", e.Key, e.Value)
				}
				return w.Flush()
			})
		},
	}
}

func mappingCommand(g *globals, out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "mapping",
		Short: "Three-way mapping: store and pool, instance metadata, pods (and host rules); exit 1 if anything is broken",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c rpc.TerwayTracingClient) error {
				r, err := c.GetResourceMapping(ctx, &rpc.Placeholder{})
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "STATUS\tPOD\tSTORE\tPOOL\tREASON")
				broken := 0
				for _, m := range r.Info {
					st := map[rpc.ResourceMappingType]string{rpc.ResourceMappingType_MappingTypeNormal: "Normal",
						rpc.ResourceMappingType_MappingTypeIdle: "Idle", rpc.ResourceMappingType_MappingTypeError: "Error"}[m.Type]
					if m.Type == rpc.ResourceMappingType_MappingTypeError {
						broken++
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", st, m.PodName, m.ResourceName, m.FactoryResourceName, m.Reason)
				}
				if err := w.Flush(); err != nil {
					return err
				}
				if broken > 0 {
					return mappingError{broken}
				}
				return nil
			})
		},
	}
}

func metadataCommand(g *globals, out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "metadata",
		Short: "Print what the instance metadata service says about this node's ENIs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			md := cloud.NewMetadata(g.metadata, nil, nil, nil, nil)
			in, err := md.Instance(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "instance %s (%s) in %s, vpc %s, vswitch %s\n", in.ID, in.InstanceType, in.ZoneID, in.VPCID, in.VSwitchID)
			macs, err := md.MACs(ctx)
			if err != nil {
				return err
			}
			sort.Strings(macs)
			for _, mac := range macs {
				e, err := md.ENI(ctx, mac)
				if err != nil {
					return err
				}
				role := "secondary"
				if mac == in.PrimaryMAC {
					role = "primary"
				}
				fmt.Fprintf(out, "%s %s (%s) vswitch %s %s gw %s\n", mac, e.ID, role, e.VSwitchID, e.CIDR, e.Gateway)
				for _, a := range e.IPv4 {
					fmt.Fprintf(out, "  %s\n", a)
				}
				for _, a := range e.IPv6 {
					fmt.Fprintf(out, "  %s\n", a)
				}
			}
			return nil
		},
	}
}
