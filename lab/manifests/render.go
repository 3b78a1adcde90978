package manifests

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/resid"
	"sigs.k8s.io/yaml"

	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/deploy"
)

// Names in deploy/ that Render relies on.
const (
	// Namespace is where deploy/ puts every namespaced object.
	Namespace = "kube-system"
	// DaemonSetName is the DaemonSet running terwayd.
	DaemonSetName = "terway"
	// ConfigMapName is the ConfigMap holding eni_conf and 10-terway.conf.
	ConfigMapName = "eni-config"
	// DaemonContainer and InstallContainer are the DaemonSet's containers.
	DaemonContainer  = "terwayd"
	InstallContainer = "install-cni"
	// labImage is the image name deploy/overlays/lab leaves behind; the
	// generated kustomization rewrites it to Params.Image.
	labImage = "lab.local/terway"
	// modeFlag is terwayd's mode flag as deploy/ writes it, in args/0.
	modeFlag = "--daemon-mode="
)

// Where Render puts things on its in-memory file system.
const (
	deployDir = "/deploy"
	labDir    = deployDir + "/overlays/lab"
	renderDir = "/render"
)

// Params is what the lab decides at run time.
type Params struct {
	// Image is the terway image, e.g. "lab.local/terway:3f2a1b" (a
	// "name@sha256:..." digest reference works too).
	Image string
	// Mode is terwayd's --daemon-mode: ENIMultiIP, ENIOnly or VPC.
	Mode mode.Mode
	// ENIConf is the whole eni_conf JSON document; it replaces the example
	// of deploy/base/configmap.yaml. Empty keeps the example.
	ENIConf []byte
	// CNIConf, when set, replaces the network config 10-terway.conf.
	CNIConf []byte
}

// Render builds the lab's manifests: deploy/overlays/lab with p applied.
// The objects come in kustomize's order (Namespaces, RBAC, ConfigMaps,
// workloads), ready for Apply.
func Render(p Params) ([]*unstructured.Unstructured, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	fsys, err := deployFS()
	if err != nil {
		return nil, err
	}
	if err := p.writeKustomization(fsys); err != nil {
		return nil, err
	}
	objs, err := build(fsys, renderDir)
	if err != nil {
		return nil, err
	}
	if err := p.verify(objs); err != nil {
		return nil, fmt.Errorf("rendered manifests do not carry the lab's parameters (was deploy/ changed?): %w", err)
	}
	return objs, nil
}

// validate reports every bad parameter at once.
func (p Params) validate() error {
	var errs []error
	if !p.Mode.Valid() {
		errs = append(errs, fmt.Errorf("mode %q: want %s, %s or %s", p.Mode, mode.ENIMultiIP, mode.ENIOnly, mode.VPC))
	}
	if _, err := parseImage(p.Image); err != nil {
		errs = append(errs, err)
	}
	if len(p.ENIConf) > 0 {
		if _, err := config.Parse(p.ENIConf); err != nil {
			errs = append(errs, fmt.Errorf("eni_conf: %w", err))
		}
	}
	if len(p.CNIConf) > 0 && !isJSONObject(p.CNIConf) {
		errs = append(errs, errors.New("10-terway.conf: not a JSON object"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("manifest parameters: %w", err)
	}
	return nil
}

// isJSONObject reports whether b is a JSON object; install-cni validates
// the rest on the node, with the plugin's own parser.
func isJSONObject(b []byte) bool {
	var v map[string]any
	return json.Unmarshal(b, &v) == nil && v != nil
}

// deployFS copies the embedded deploy tree to deployDir of a new in-memory
// file system.
func deployFS() (filesys.FileSystem, error) {
	fsys := filesys.MakeFsInMemory()
	err := fs.WalkDir(deploy.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := deploy.FS.ReadFile(p)
		if err != nil {
			return err
		}
		return fsys.WriteFile(path.Join(deployDir, p), data)
	})
	if err != nil {
		return nil, fmt.Errorf("copy the embedded deploy tree: %w", err)
	}
	return fsys, nil
}

// writeKustomization writes the run's kustomization, and the files its
// ConfigMap generator reads, into renderDir.
func (p Params) writeKustomization(fsys filesys.FileSystem) error {
	img, _ := parseImage(p.Image) // validated
	img.Name = labImage
	k := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: []string{"../deploy/overlays/lab"},
		Images:    []types.Image{img},
		Patches: []types.Patch{{
			Target: &types.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Group: "apps", Version: "v1", Kind: "DaemonSet"},
				Name: DaemonSetName, Namespace: Namespace}},
			Patch: fmt.Sprintf(`[{"op": "replace", "path": "/spec/template/spec/containers/0/args/0", "value": %q}]`, modeFlag+string(p.Mode)),
		}},
	}
	var files []string
	for _, f := range []struct {
		name string
		data []byte
	}{{"eni_conf", p.ENIConf}, {"10-terway.conf", p.CNIConf}} {
		if len(f.data) == 0 {
			continue
		}
		if err := fsys.WriteFile(path.Join(renderDir, f.name), f.data); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
		files = append(files, f.name)
	}
	if len(files) > 0 {
		// merge replaces only the keys given; no name hash, so the
		// ConfigMap keeps Terway's name and the DaemonSet's volume finds it.
		k.ConfigMapGenerator = []types.ConfigMapArgs{{
			GeneratorArgs: types.GeneratorArgs{Name: ConfigMapName, Namespace: Namespace, Behavior: "merge",
				KvPairSources: types.KvPairSources{FileSources: files},
				Options:       &types.GeneratorOptions{DisableNameSuffixHash: true}},
		}}
	}
	data, err := yaml.Marshal(k)
	if err != nil {
		return fmt.Errorf("encode the lab kustomization: %w", err)
	}
	if err := fsys.WriteFile(path.Join(renderDir, "kustomization.yaml"), data); err != nil {
		return fmt.Errorf("write the lab kustomization: %w", err)
	}
	return nil
}

// build runs kustomize on dir and returns its objects.
func build(fsys filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("decode %s: %w", r.CurId(), err)
		}
		objs = append(objs, u)
	}
	return objs, nil
}

var (
	// imageNameRE is a repository name: lower-case path components,
	// optionally behind a registry host[:port].
	imageNameRE = regexp.MustCompile(`^([a-zA-Z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$`)
	imageTagRE  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	digestRE    = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

// parseImage splits "name:tag" or "name@digest" into a kustomize image
// override (Name is left for the caller).
func parseImage(ref string) (types.Image, error) {
	var img types.Image
	name := ref
	if i := strings.Index(ref, "@"); i >= 0 {
		name, img.Digest = ref[:i], ref[i+1:]
		if !digestRE.MatchString(img.Digest) {
			return img, fmt.Errorf("image %q: digest %q is not sha256:<64 hex digits>", ref, img.Digest)
		}
	} else if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, img.NewTag = ref[:i], ref[i+1:]
		if !imageTagRE.MatchString(img.NewTag) {
			return img, fmt.Errorf("image %q: tag %q is not a valid tag", ref, img.NewTag)
		}
	}
	if !imageNameRE.MatchString(name) {
		return img, fmt.Errorf("image %q: want a reference such as lab.local/terway:<tag>", ref)
	}
	if img.NewTag == "" && img.Digest == "" {
		// Pods never pull in the lab: the reference must name exactly the
		// image imported into the nodes, not whatever "latest" is.
		return img, fmt.Errorf("image %q: needs a tag or a digest", ref)
	}
	img.NewName = name
	return img, nil
}
