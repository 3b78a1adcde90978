// Command fakecloud runs the Alibaba Cloud ECS/VPC and instance-metadata
// emulator. See fakecloud/README.md for actions, error codes and knobs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/terway-sim/terway/fakecloud"
)

func main() {
	if err := newRootCommand(os.Stdout, os.Stderr).Execute(); err != nil {
		os.Exit(1)
	}
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "fakecloud",
		Short: "An Alibaba Cloud ECS/VPC and instance-metadata emulator for the real SDKs",
		Long: `fakecloud emulates one Alibaba Cloud account in one region: the ECS
(2014-05-26) and VPC (2016-04-28) RPC APIs that ENI-based container networks
use, the instance metadata service and STS credentials of instance RAM roles.
The unmodified alibaba-cloud-sdk-go and the Tea SDKs talk to it; only the
endpoint URL differs from the real cloud.`,
		SilenceUsage: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newServeCommand(stdout, stderr), newWorldCommand(stdout))
	return root
}

type serveOptions struct {
	listen         string
	world          string
	state          string
	seed           int64
	timeScale      float64
	accessKeyID    string
	accessSecret   string
	adminToken     string
	metadataListen []string
	logLevel       string
}

func newServeCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the ECS/VPC API, the metadata service and the admin API",
		Long: `serve listens on --listen and serves, on that one listener:
  /              the ECS and VPC RPC APIs (signature v1 HMAC-SHA1 and ACS3-HMAC-SHA256)
  /latest/       the instance metadata service (instance chosen by source address)
  /fakecloud/    the admin API (needs --admin-token; see fakecloud/README.md)
When ready it prints exactly one line to stdout: the endpoint URL, e.g.
  http://127.0.0.1:18080
Logs go to stderr. SIGINT/SIGTERM stop it after writing the state file.

The AccessKey secret and the admin token may also come from the environment
(FAKECLOUD_ACCESS_KEY_SECRET, FAKECLOUD_ADMIN_TOKEN) to keep them out of ps.`,
		Example: `  fakecloud serve --listen 127.0.0.1:18080 --access-key-id LTAIexample --access-key-secret example-secret
  fakecloud serve --listen 127.0.0.1:0 --world world.yaml --state /tmp/fc.json --time-scale 0.01 \
      --admin-token t0ken --metadata-listen 127.0.0.1:18081=i-bp1lab0000000000001`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serve(ctx, o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:18080", "address to listen on (port 0 picks a free one)")
	f.StringVar(&o.world, "world", "", "world file (YAML or JSON); default: the built-in world (see 'fakecloud world')")
	f.StringVar(&o.state, "state", "", "state file: the world survives restarts (written 0600); an existing file wins over --world")
	f.Int64Var(&o.seed, "seed", 1, "seed for IDs, MACs and fault decisions")
	f.Float64Var(&o.timeScale, "time-scale", 1, "multiply every emulated delay (attach, detach, metadata lag, injected latency) by this factor")
	f.StringVar(&o.accessKeyID, "access-key-id", "", "add a static AccessKey pair with this ID")
	f.StringVar(&o.accessSecret, "access-key-secret", "", "secret of --access-key-id (or FAKECLOUD_ACCESS_KEY_SECRET)")
	f.StringVar(&o.adminToken, "admin-token", "", "enable the admin API for this bearer token (or FAKECLOUD_ADMIN_TOKEN)")
	f.StringArrayVar(&o.metadataListen, "metadata-listen", nil, "extra metadata listener ADDR=INSTANCE_ID (bound to one instance) or ADDR (by source address); repeatable")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

func newWorldCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "world",
		Short: "Print the built-in default world as a world file (YAML)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b, err := yaml.Marshal(fakecloud.DefaultSpec())
			if err != nil {
				return err
			}
			_, err = stdout.Write(b)
			return err
		},
	}
}

func serve(ctx context.Context, o *serveOptions, stdout, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	spec, err := serveSpec(o, log)
	if err != nil {
		return err
	}
	if o.timeScale <= 0 {
		return fmt.Errorf("--time-scale must be positive, got %v", o.timeScale)
	}
	token := o.adminToken
	if token == "" {
		token = os.Getenv("FAKECLOUD_ADMIN_TOKEN")
	}
	cloud, err := fakecloud.New(fakecloud.Options{Spec: &spec, StatePath: o.state, Seed: o.seed,
		TimeScale: o.timeScale, Logger: log, AdminToken: token})
	if err != nil {
		return err
	}
	defer func() {
		if err := cloud.Close(); err != nil {
			log.Error("close", "err", err)
		}
	}()
	servers, url, err := listenAll(o, cloud, log)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, url)
	<-ctx.Done()
	log.Info("shutting down")
	// Calls held by pause faults would otherwise keep Shutdown waiting.
	cloud.ClearFaults()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(sctx)
	}
	return nil
}

// serveSpec is the world serve starts: the world file's (or the default
// one), with the AccessKey of the flags.
func serveSpec(o *serveOptions, log *slog.Logger) (fakecloud.Spec, error) {
	spec := fakecloud.DefaultSpec()
	if o.world != "" {
		s, err := fakecloud.LoadSpec(o.world)
		if err != nil {
			return spec, err
		}
		spec = s
	}
	secret := o.accessSecret
	if secret == "" {
		secret = os.Getenv("FAKECLOUD_ACCESS_KEY_SECRET")
	}
	switch {
	case o.accessKeyID != "" && secret == "":
		return spec, errors.New("--access-key-id needs --access-key-secret (or FAKECLOUD_ACCESS_KEY_SECRET)")
	case o.accessKeyID == "" && o.accessSecret != "":
		return spec, errors.New("--access-key-secret needs --access-key-id")
	case o.accessKeyID != "":
		spec.AccessKeys = append(spec.AccessKeys, fakecloud.AccessKeySpec{ID: o.accessKeyID, Secret: secret})
	}
	if len(spec.AccessKeys) == 0 {
		log.Warn("no static AccessKey configured: only instance RAM-role (STS) credentials will be accepted")
	}
	return spec, nil
}

// listenAll opens the API listener and every metadata listener before
// anything is served, so that a bad address fails the start.
func listenAll(o *serveOptions, cloud *fakecloud.Cloud, log *slog.Logger) ([]*http.Server, string, error) {
	type pending struct {
		ln net.Listener
		h  http.Handler
	}
	var ps []pending
	closeAll := func() {
		for _, p := range ps {
			p.ln.Close()
		}
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return nil, "", fmt.Errorf("--listen: %w", err)
	}
	ps = append(ps, pending{ln, cloud})
	for _, m := range o.metadataListen {
		addr, inst, bound := strings.Cut(m, "=")
		h := cloud.MetadataBySourceHandler()
		if bound {
			if _, ok := cloud.Instance(inst); !ok {
				closeAll()
				return nil, "", fmt.Errorf("--metadata-listen %s: unknown instance %q", m, inst)
			}
			h = cloud.MetadataHandler(inst)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll()
			return nil, "", fmt.Errorf("--metadata-listen %s: %w", m, err)
		}
		log.Info("metadata listener", "addr", l.Addr().String(), "instance", inst)
		ps = append(ps, pending{l, h})
	}
	var servers []*http.Server
	for _, p := range ps {
		s := fakecloud.NewHTTPServer(p.h, fakecloud.ServerTimeouts{}, slog.NewLogLogger(log.Handler(), slog.LevelDebug))
		servers = append(servers, s)
		go func(s *http.Server, l net.Listener) { _ = s.Serve(l) }(s, p.ln)
	}
	return servers, "http://" + ln.Addr().String(), nil
}
