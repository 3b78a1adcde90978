// Command terwayd is the node daemon: it gets ENIs and addresses from ECS
// and serves the CNI plugin over gRPC on a unix socket.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	dpapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/terway-sim/terway/daemon"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/dynconfig"
	"github.com/terway-sim/terway/daemon/kubeapi"
	"github.com/terway-sim/terway/daemon/mode"
)

func main() {
	if err := newCommand(os.Stderr).Execute(); err != nil {
		os.Exit(1)
	}
}

type options struct {
	mode            string
	logLevel        string
	readonlyListen  string
	kubeconfig      string
	configPath      string
	importTerwayDB  bool
	rebuildStore    bool
	hostNetNS       string
	devicePluginDir string
}

func newCommand(stderr io.Writer) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "terwayd",
		Short: "The Terway-style node daemon: ENIs and addresses for pods",
		Long: `terwayd gets ENIs and secondary addresses from ECS for the pods of its node,
keeps warm pools, persists what every pod holds, and serves the CNI plugin
over gRPC on a unix socket (socket_path in the config, default
/var/run/eni/eni.socket).

Environment: NODE_NAME (required), POD_NAMESPACE (where the dynamic-config
ConfigMaps live, default kube-system), ECS_ENDPOINT and VPC_ENDPOINT
(override the config's endpoints; "http://host:port" for an emulator),
POOL_CHECK_PERIOD_SECONDS (how often every pod's resources are checked and
CNI CHECK runs on pods with a netns; default 600, 0 disables).

Dynamic per-node config: a node labelled terway-config=<name> merges the
eni_conf key of ConfigMap <name> (in POD_NAMESPACE) over the base config as
an RFC 7396 merge patch, at start.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, o, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.mode, "daemon-mode", string(mode.Default), "ENIMultiIP, ENIOnly or VPC")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.readonlyListen, "readonly-listen", "unix:///var/run/eni/eni_debug.socket", "metrics and pprof listener: unix:///path or host:port")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config)")
	f.StringVar(&o.configPath, "config", config.DefaultPath, "eni_conf file (falls back to "+config.DefaultLegacyPath+")")
	f.BoolVar(&o.importTerwayDB, "import-terway-db", false, "read a store written by Terway instead of refusing it")
	f.BoolVar(&o.rebuildStore, "rebuild-store", false, "a damaged store is moved aside (<store_path>.damaged-<UTC time>) and rebuilt from the node's ENIs, metadata and pods instead of refused")
	f.StringVar(&o.hostNetNS, "host-netns", "/proc/self/ns/net", "the node's host network namespace, where GC removes the rules and routes of pods that went without a CNI DEL (\"\": never touch it)")
	f.StringVar(&o.devicePluginDir, "device-plugin-dir", dpapi.DevicePluginPath, "kubelet's device-plugin directory, where aliyun/eni is advertised in ENIOnly and VPC modes (\"\": off)")
	return cmd
}

func run(ctx context.Context, o *options, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	node := os.Getenv("NODE_NAME")
	if node == "" {
		return errors.New("NODE_NAME is not set (the DaemonSet passes spec.nodeName)")
	}
	rc, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	// The config is read with client-go's default limits; the daemon's
	// client then gets kube_client_qps and kube_client_burst.
	boot, err := kubeapi.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	cfg, err := loadConfig(ctx, o.configPath, boot, node)
	if err != nil {
		return err
	}
	kube, err := kubeapi.NewForConfig(withLimits(rc, cfg))
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	log.Info("config", "config", cfg.Redacted())
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	check, err := checkPeriod()
	if err != nil {
		return err
	}
	d, err := daemon.New(ctx, daemon.Options{Mode: mode.Mode(o.mode), Config: cfg, NodeName: node, Kube: kube, Logger: log,
		Registerer: reg, ImportTerwayDB: o.importTerwayDB, RebuildStore: o.rebuildStore, HostNetNS: o.hostNetNS, DevicePluginDir: o.devicePluginDir,
		CheckPeriod: check})
	if err != nil {
		return err
	}
	debug, err := serveDebug(o.readonlyListen, reg, log)
	if err != nil {
		d.Close()
		return err
	}
	defer debug.Close()
	stopping := context.AfterFunc(ctx, func() { log.Info("shutting down") })
	defer stopping()
	// Serve returns when ctx ends and everything has stopped, the store
	// and the node lock closed.
	return d.Serve(ctx)
}

// restConfig is the Kubernetes client configuration: the kubeconfig file,
// else the in-cluster one.
func restConfig(kubeconfig string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	rc.Timeout = 70 * time.Second
	rc.UserAgent = "terwayd"
	return rc, nil
}

// withLimits returns a copy of rc with the client-side limits of the
// config: kube_client_qps and kube_client_burst, 0 leaving client-go's
// defaults (rest.DefaultQPS 5, rest.DefaultBurst 10). A QPS without a
// burst gets a burst of max(10, QPS) (client-go refuses a QPS without one).
func withLimits(rc *rest.Config, cfg *config.Config) *rest.Config {
	out := rest.CopyConfig(rc)
	if cfg.KubeClientQPS > 0 {
		out.QPS = cfg.KubeClientQPS
		out.Burst = max(rest.DefaultBurst, int(math.Ceil(float64(cfg.KubeClientQPS))))
	}
	if cfg.KubeClientBurst > 0 {
		out.Burst = cfg.KubeClientBurst
	}
	return out
}

// loadConfig reads eni_conf, applies the node's dynamic config (in
// POD_NAMESPACE) and the endpoint environment variables.
func loadConfig(ctx context.Context, path string, kube kubeapi.Interface, node string) (*config.Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && path == config.DefaultPath {
		data, err = os.ReadFile(config.DefaultLegacyPath)
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := dynconfig.Load(ctx, kube, node, data, os.Getenv("POD_NAMESPACE"))
	if err != nil {
		return nil, err
	}
	if v := os.Getenv("ECS_ENDPOINT"); v != "" {
		cfg.ECSEndpointURL = v
	}
	if v := os.Getenv("VPC_ENDPOINT"); v != "" {
		cfg.VPCEndpointURL = v
	}
	return cfg, nil
}

// serveDebug serves /metrics and /debug/pprof/ on a unix socket (0600) or
// a TCP address.
func serveDebug(addr string, reg *prometheus.Registry, log *slog.Logger) (io.Closer, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var ln net.Listener
	var err error
	if strings.HasPrefix(addr, "unix://") {
		u, perr := url.Parse(addr)
		if perr != nil {
			return nil, fmt.Errorf("--readonly-listen %s: %w", addr, perr)
		}
		_ = os.Remove(u.Path)
		if ln, err = net.Listen("unix", u.Path); err == nil {
			err = os.Chmod(u.Path, 0o600)
		}
	} else {
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("--readonly-listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug listener", "err", err)
		}
	}()
	return srv, nil
}

// checkPeriod reads POOL_CHECK_PERIOD_SECONDS (Terway's variable).
func checkPeriod() (time.Duration, error) {
	v := os.Getenv("POOL_CHECK_PERIOD_SECONDS")
	if v == "" {
		return 600 * time.Second, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("POOL_CHECK_PERIOD_SECONDS=%q: want a whole number of seconds >= 0", v)
	}
	return time.Duration(n) * time.Second, nil
}
