package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/libcni"
)

// Installer defaults.
const (
	// DefaultConflistName is the file Install writes into the conf dir.
	DefaultConflistName = "10-terway.conflist"
	// PluginType is the plugin's type in a network config and its file
	// name in the bin dir.
	PluginType = "terway"
)

// InstallOptions says what Install copies where.
type InstallOptions struct {
	// Binary is the plugin executable to install (the running one).
	Binary string
	// BinDir is the runtime's CNI bin dir (e.g. /opt/cni/bin).
	BinDir string
	// ConfDir is the runtime's CNI conf dir (e.g. /etc/cni/net.d).
	ConfDir string
	// Conf is a network config: a .conflist, or a single-plugin .conf
	// that Install turns into a .conflist.
	Conf string
	// ConflistName is the file written in ConfDir; DefaultConflistName
	// when empty.
	ConflistName string
}

// InstallResult says what Install changed.
type InstallResult struct {
	BinaryPath, ConflistPath     string
	BinaryChanged, ConfigChanged bool
}

// Install puts the plugin and its network config where a runtime finds
// them. The config is validated first (nothing is written when it is
// bad). Both files are replaced atomically by a temp file in the target
// directory renamed over the old one: a runtime never runs a half-copied
// binary, and containerd 1.6, which reloads on WRITE/RENAME in its conf
// dir but ignores files moved in, sees the change. Unchanged files are
// left alone, so running it again is a no-op.
func Install(o InstallOptions) (*InstallResult, error) {
	if o.ConflistName == "" {
		o.ConflistName = DefaultConflistName
	}
	if filepath.Ext(o.ConflistName) != ".conflist" || filepath.Base(o.ConflistName) != o.ConflistName {
		return nil, fmt.Errorf("conflist name %q: want a file name ending in .conflist", o.ConflistName)
	}
	raw, err := os.ReadFile(o.Conf)
	if err != nil {
		return nil, fmt.Errorf("read network config: %w", err)
	}
	list, err := BuildConflist(raw)
	if err != nil {
		return nil, fmt.Errorf("network config %s: %w", o.Conf, err)
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("read plugin binary: %w", err)
	}
	r := &InstallResult{BinaryPath: filepath.Join(o.BinDir, PluginType), ConflistPath: filepath.Join(o.ConfDir, o.ConflistName)}
	for _, d := range []string{o.BinDir, o.ConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	// The binary first: a config must never name a plugin not there yet.
	if r.BinaryChanged, err = replaceIfChanged(r.BinaryPath, bin, 0o755); err != nil {
		return nil, fmt.Errorf("install plugin binary: %w", err)
	}
	if r.ConfigChanged, err = replaceIfChanged(r.ConflistPath, list, 0o644); err != nil {
		return nil, fmt.Errorf("install network config: %w", err)
	}
	return r, nil
}

// BuildConflist validates a network config (a .conflist, or a .conf of
// this plugin) with ParseConfig for every plugin of type terway and with
// libcni, and returns it as an indented .conflist.
func BuildConflist(raw []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if _, ok := top["plugins"]; !ok {
		var err error
		if raw, err = confToList(raw); err != nil {
			return nil, err
		}
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		return nil, err
	}
	ours := 0
	for _, pc := range list.Plugins {
		if pc.Network.Type != PluginType {
			continue
		}
		ours++
		// Validate what the runtime will send: the plugin's keys with the
		// list's name and cniVersion injected.
		injected, err := libcni.InjectConf(pc, map[string]any{"name": list.Name, "cniVersion": list.CNIVersion})
		if err != nil {
			return nil, err
		}
		if _, err := ParseConfig(injected.Bytes); err != nil {
			return nil, fmt.Errorf("plugin %d: %w", ours, err)
		}
	}
	if ours == 0 {
		return nil, fmt.Errorf("no plugin of type %q", PluginType)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// confToList wraps a single-plugin config in a list: name and cniVersion
// move to the list, the rest stays the plugin's.
func confToList(raw []byte) ([]byte, error) {
	var plugin map[string]json.RawMessage
	if err := json.Unmarshal(raw, &plugin); err != nil {
		return nil, err
	}
	if _, err := ParseConfig(raw); err != nil {
		return nil, err
	}
	list := struct {
		CNIVersion json.RawMessage   `json:"cniVersion"`
		Name       json.RawMessage   `json:"name"`
		Plugins    []json.RawMessage `json:"plugins"`
	}{CNIVersion: plugin["cniVersion"], Name: plugin["name"]}
	delete(plugin, "cniVersion")
	delete(plugin, "name")
	p, err := json.Marshal(plugin)
	if err != nil {
		return nil, err
	}
	list.Plugins = []json.RawMessage{p}
	return json.Marshal(list)
}

// replaceIfChanged writes data to path atomically unless it already holds
// exactly that with that mode.
func replaceIfChanged(path string, data []byte, mode os.FileMode) (bool, error) {
	if st, err := os.Stat(path); err == nil && st.Mode().Perm() == mode && st.Size() == int64(len(data)) {
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			return false, nil
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, writeFileAtomic(path, data, mode, true)
}
