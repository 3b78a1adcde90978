package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/bench/harness"
	"github.com/terway-sim/terway/bench/node"
)

// nodeFlags are the flags of node and compare.
type nodeFlags struct {
	scenario       string
	pods           int
	profile        string
	seed           int64
	timeScale      float64
	instanceType   string
	pools          []string
	sets           []string
	duration       time.Duration
	interval       time.Duration
	maxWave        int
	tail           time.Duration
	free           int
	recoverAfter   time.Duration
	throttleWindow time.Duration
	throttle       []string
	retryEvery     time.Duration
	deadline       time.Duration
	sampleEvery    time.Duration
	name           string
	out            string
}

func (f *nodeFlags) register(cmd *cobra.Command, poolHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&f.scenario, "scenario", node.ScenarioColdBurst, "scenario: "+strings.Join(node.Scenarios(), ", "))
	fl.IntVar(&f.pods, "pods", 100, "pods of the burst (cold-burst, burst-release, exhaustion, throttled) or running throughout (warm-churn)")
	fl.StringVar(&f.profile, "profile", "default", "cloud latency profile: "+profileNames())
	fl.Int64Var(&f.seed, "seed", 1, "seed of fakecloud (IDs, latency jitter) and of the churn")
	fl.Float64Var(&f.timeScale, "time-scale", 1, "real time per simulated time (0.1 runs ten times faster; results are in simulated time)")
	fl.StringVar(&f.instanceType, "instance-type", harness.DefaultInstanceType, "ECS instance type of the node")
	fl.StringArrayVar(&f.pools, "pool", nil, poolHelp)
	fl.StringArrayVar(&f.sets, "set", nil, "eni_conf KEY=VALUE over the pool's keys, simulated time (repeatable; VALUE is JSON or a string)")
	fl.DurationVar(&f.duration, "duration", 0, "warm-churn: how long the churn runs (default 2m)")
	fl.DurationVar(&f.interval, "interval", 0, "warm-churn: time between waves (default 5s)")
	fl.IntVar(&f.maxWave, "max-wave", 0, "warm-churn: most pods replaced in one wave (default 6)")
	fl.DurationVar(&f.tail, "tail", 0, "warm-churn: quiet spell after the last wave, still measured (shows idle reclaim)")
	fl.IntVar(&f.free, "free", 0, "exhaustion: addresses left in the vSwitch when the burst starts (default pods/2)")
	fl.DurationVar(&f.recoverAfter, "recover-after", 0, "exhaustion: when the other tenant gives its addresses back (default 20s)")
	fl.DurationVar(&f.throttleWindow, "throttle-window", 0, "throttled: length of a throttle window (default 60s)")
	fl.StringArrayVar(&f.throttle, "throttle", nil, "throttled: budget ACTION=CALLS per window (repeatable; \"*\" for the rest)")
	fl.DurationVar(&f.retryEvery, "retry-every", 0, "how long the plugin waits before retrying a failed ADD (default 5s)")
	fl.DurationVar(&f.deadline, "deadline", 0, "how long a pod may take in all before it counts as failed (default 15m)")
	fl.DurationVar(&f.sampleEvery, "sample-every", 0, "sampling period of the time series (default 1s)")
	fl.StringVar(&f.name, "name", "", "name of the result (default <scenario>-<pods>-<profile>-pool<min>-<max>...)")
	outFlag(cmd, &f.out)
}

// options turns the flags into one run's options with pool p.
func (f *nodeFlags) options(g *globals, p node.PoolPolicy) (node.Options, error) {
	sets, err := parseSets(f.sets)
	if err != nil {
		return node.Options{}, err
	}
	budgets, err := parseBudgets(f.throttle)
	if err != nil {
		return node.Options{}, err
	}
	log, err := g.logger()
	if err != nil {
		return node.Options{}, err
	}
	if f.timeScale <= 0 || f.timeScale > 1 {
		return node.Options{}, fmt.Errorf("--time-scale %v must be in (0, 1]", f.timeScale)
	}
	return node.Options{Scenario: f.scenario, Pods: f.pods, Profile: f.profile, Seed: f.seed, TimeScale: f.timeScale,
		InstanceType: f.instanceType, Pool: p, Daemon: sets, Duration: f.duration, Interval: f.interval, MaxWave: f.maxWave, Tail: f.tail,
		Free: f.free, RecoverAfter: f.recoverAfter, ThrottleWindow: f.throttleWindow, Throttle: budgets,
		RetryEvery: f.retryEvery, Deadline: f.deadline, SampleEvery: f.sampleEvery, Name: f.name, Command: g.command,
		Logger: log}, nil
}

func newNodeCommand(g *globals) *cobra.Command {
	f := &nodeFlags{}
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run one node benchmark (cold-burst, burst-release, warm-churn, exhaustion, throttled)",
		Example: `  terway-bench node --scenario cold-burst --pods 100 --profile default --seed 1 --time-scale 1 --out bench/results
  terway-bench node --scenario warm-churn --pods 40 --duration 2m --pool 0/5 --time-scale 0.1 --out /tmp/r`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.pools) > 1 {
				return errors.New("node takes one --pool; use compare for several")
			}
			p := node.DefaultPool
			if len(f.pools) == 1 {
				var err error
				if p, err = node.ParsePool(f.pools[0]); err != nil {
					return err
				}
			}
			o, err := f.options(g, p)
			if err != nil {
				return err
			}
			return runNode(cmd, g, o, f.out)
		},
	}
	f.register(cmd, "pool policy MIN/MAX[,reclaim=DUR][,reclaim-interval=DUR][,reclaim-batch=N][,min-eni=N] (default 0/5)")
	return cmd
}

func runNode(cmd *cobra.Command, g *globals, o node.Options, out string) error {
	r, err := node.Run(cmd.Context(), o)
	if err != nil {
		return err
	}
	if err := writeResult(g.stdout, out, r); err != nil {
		return err
	}
	if r.Metrics.PodsFailed > 0 {
		return fmt.Errorf("%s: %d %w", r.Name, r.Metrics.PodsFailed, errPodsFailed)
	}
	return nil
}

func newCompareCommand(g *globals) *cobra.Command {
	f := &nodeFlags{}
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Run one node scenario under several pool policies, one result each",
		Long: `compare runs the same node scenario (same seed, profile and time scale)
once per --pool and writes one result per policy; the report puts them side
by side.`,
		Example: `  terway-bench compare --scenario warm-churn --pods 40 --pool 0/5 --pool 10/30 --pool 0/0 --time-scale 0.1 --out bench/results`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.pools) < 2 {
				return errors.New("compare needs at least two --pool")
			}
			if f.name != "" {
				return errors.New("compare names each result after its pool; --name is not allowed")
			}
			var errs []error
			for _, s := range f.pools {
				p, err := node.ParsePool(s)
				if err != nil {
					return err
				}
				o, err := f.options(g, p)
				if err != nil {
					return err
				}
				if err := runNode(cmd, g, o, f.out); err != nil {
					if !errors.Is(err, errPodsFailed) {
						return err
					}
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
	f.register(cmd, "pool policy MIN/MAX[,reclaim=DUR]... (repeatable, at least two)")
	return cmd
}
