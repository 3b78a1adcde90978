package cnicheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/containernetworking/cni/libcni"
)

// network is one loaded configuration list and the file it came from, so
// errors name the file an operator has to fix.
type network struct {
	list *libcni.NetworkConfigList
	path string
}

// cacheEntry is a parsed file and the stat it was parsed under.
type cacheEntry struct {
	info os.FileInfo
	net  network
	// pluginDir is <confDir>/<name> for a .conflist that may pull plugins
	// from there (CNI 1.1); the entry is stale once that directory exists.
	pluginDir string
}

// confCache keeps parsed configuration files keyed by path, so a Check
// costs a directory read and a stat when nothing changed, yet sees every
// change: an entry is used only while the file is the same inode with the
// same size and modification time.
type confCache struct {
	mu      sync.Mutex
	entries map[string]cacheEntry
}

// loadNetwork picks the network the runtime would use: the first file in
// lexical order, or the one named Options.NetworkName. A file that cannot
// be parsed is an error, as in containerd, rather than silently skipped,
// since skipping could check pods against a network they were not set up
// with.
func (c *Checker) loadNetwork() (network, error) {
	dir := c.opts.ConfDir
	files, err := confFiles(dir)
	if err != nil {
		return network{}, err
	}
	c.confs.retain(files)
	if len(files) == 0 {
		return network{}, fmt.Errorf("%w in %s", ErrNoConfig, dir)
	}
	if c.opts.NetworkName == "" {
		return c.confs.load(files[0])
	}
	for _, f := range files {
		net, err := c.confs.load(f)
		if err != nil {
			return network{}, err
		}
		if net.list.Name == c.opts.NetworkName {
			return net, nil
		}
	}
	return network{}, fmt.Errorf("%w named %q in %s", ErrNoConfig, c.opts.NetworkName, dir)
}

// confFiles lists candidate files in lexical order with the extensions
// kubelet and containerd accept. A missing directory is an empty one.
func confFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read CNI config dir: %w", err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && isConfFile(e.Name()) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files, nil
}

func isConfFile(name string) bool {
	switch filepath.Ext(name) {
	case ".conflist", ".conf", ".json":
		return true
	}
	return false
}

// load returns the parsed file, from the cache while the file is
// unchanged. It stats before reading, so a change racing the read leaves
// an entry that the next stat invalidates.
func (cc *confCache) load(path string) (network, error) {
	info, err := os.Stat(path)
	if err != nil {
		return network{}, fmt.Errorf("stat CNI config: %w", err)
	}
	if net, ok := cc.lookup(path, info); ok {
		return net, nil
	}
	list, err := parseConfFile(path)
	if err != nil {
		return network{}, fmt.Errorf("load CNI config %s: %w", path, err)
	}
	net := network{list: list, path: path}
	cc.mu.Lock()
	cc.entries[path] = cacheEntry{info: info, net: net, pluginDir: pluginDir(path, list)}
	cc.mu.Unlock()
	return net, nil
}

// lookup serves an entry while the file is unchanged, and never for a list
// that also draws on a plugin directory, whose contents the file's stat
// does not cover.
func (cc *confCache) lookup(path string, info os.FileInfo) (network, bool) {
	cc.mu.Lock()
	e, ok := cc.entries[path]
	cc.mu.Unlock()
	if !ok || !sameFile(e.info, info) || dirExists(e.pluginDir) {
		return network{}, false
	}
	return e.net, true
}

// retain drops entries for files no longer in the directory, so the cache
// does not grow with renamed or removed files.
func (cc *confCache) retain(files []string) {
	keep := make(map[string]bool, len(files))
	for _, f := range files {
		keep[f] = true
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for path := range cc.entries {
		if !keep[path] {
			delete(cc.entries, path)
		}
	}
}

func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func dirExists(dir string) bool {
	if dir == "" {
		return false
	}
	info, err := os.Stat(dir)
	return err == nil && info.IsDir()
}

func pluginDir(path string, list *libcni.NetworkConfigList) string {
	if filepath.Ext(path) != ".conflist" || list.LoadOnlyInlinedPlugins {
		return ""
	}
	return filepath.Join(filepath.Dir(path), list.Name)
}

// parseConfFile reads a .conflist as is and turns a single-plugin .conf or
// .json into a one-element list, as runtimes do.
func parseConfFile(path string) (*libcni.NetworkConfigList, error) {
	var list *libcni.NetworkConfigList
	var err error
	if filepath.Ext(path) == ".conflist" {
		list, err = libcni.NetworkConfFromFile(path)
	} else {
		list, err = singleConfAsList(path)
	}
	if err != nil {
		return nil, err
	}
	if list.Name == "" {
		return nil, errors.New("network has no name")
	}
	return list, nil
}

// singleConfAsList does what libcni's deprecated ConfListFromConf does:
// wrap the plugin's own JSON, unchanged, as the only plugin of a list with
// its name and version.
func singleConfAsList(path string) (*libcni.NetworkConfigList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	conf, err := libcni.NetworkPluginConfFromBytes(data)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("error parsing configuration: %w", err)
	}
	listJSON, err := json.Marshal(map[string]any{
		"name":       conf.Network.Name,
		"cniVersion": conf.Network.CNIVersion,
		"plugins":    []any{raw},
	})
	if err != nil {
		return nil, fmt.Errorf("build configuration list: %w", err)
	}
	return libcni.NetworkConfFromBytes(listJSON)
}
