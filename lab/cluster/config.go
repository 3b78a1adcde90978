package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/mode"
)

// Config is what up asks for. The supervisor reads it from config.json in
// the lab's directory.
type Config struct {
	// Name names the lab (1-8 of [a-z0-9-]): node names are <Name>-<i>,
	// network namespaces and cgroups carry it.
	Name string `json:"name"`
	// Dir is the lab's state directory.
	Dir          string    `json:"dir"`
	Nodes        int       `json:"nodes"`
	Mode         mode.Mode `json:"mode"`
	InstanceType string    `json:"instanceType"`
	WorldFile    string    `json:"worldFile,omitempty"`
	// TimeScale scales fakecloud's delays (attach, metadata lag, ...).
	TimeScale float64 `json:"timeScale,omitempty"`
	// IPStack is eni_conf's ip_stack: "ipv4" (the default) or "dual",
	// where pods get an IPv6 address of their ENI too.
	IPStack string `json:"ipStack,omitempty"`
	// BinDir holds the Kubernetes, etcd, containerd, runc and crictl
	// binaries (lab/prereq).
	BinDir string `json:"binDir"`
	// Images are docker-save archives imported into every node.
	Images []string `json:"images"`
	// TerwayImage is the reference of the image with terwayd and terway.
	TerwayImage string `json:"terwayImage"`
}

var labName = regexp.MustCompile(`^[a-z0-9-]{1,8}$`)

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.Name == "" {
		c.Name = "lab"
	}
	if !labName.MatchString(c.Name) {
		return fmt.Errorf("lab name %q: want 1 to 8 characters of [a-z0-9-]", c.Name)
	}
	if c.Dir == "" {
		c.Dir = filepath.Join(DefaultStateRoot, c.Name)
	}
	if c.Mode == "" {
		c.Mode = mode.Default
	}
	if !c.Mode.Valid() {
		return fmt.Errorf("mode %q: want %s, %s or %s", c.Mode, mode.ENIMultiIP, mode.ENIOnly, mode.VPC)
	}
	if c.WorldFile == "" && c.Nodes == 0 {
		c.Nodes = 2
	}
	if c.Nodes < 0 || c.Nodes > 20 {
		return fmt.Errorf("nodes %d: want 1 to 20", c.Nodes)
	}
	if c.InstanceType == "" {
		c.InstanceType = DefaultInstanceType
	}
	switch c.IPStack {
	case "":
		c.IPStack = config.IPStackIPv4
	case config.IPStackIPv4, config.IPStackDual:
	default:
		return fmt.Errorf("ip stack %q: want %s or %s", c.IPStack, config.IPStackIPv4, config.IPStackDual)
	}
	if c.TimeScale < 0 {
		return fmt.Errorf("time scale %g: want > 0", c.TimeScale)
	}
	return nil
}

func configPath(dir string) string { return filepath.Join(dir, "config.json") }

// WriteConfig stores c in its lab directory for the supervisor.
func WriteConfig(c Config) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("create lab dir: %w", err)
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(configPath(c.Dir), data, 0o600)
}

// ReadConfig loads the config of the lab in dir.
func ReadConfig(dir string) (Config, error) {
	var c Config
	data, err := os.ReadFile(configPath(dir))
	if err != nil {
		return c, fmt.Errorf("read lab config: %w", err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("parse lab config: %w", err)
	}
	return c, c.Validate()
}
