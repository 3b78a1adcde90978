// Package deploy holds the Kubernetes manifests that install terwayd and the
// terway CNI plugin on a cluster: the kustomize base in base/ (what a user
// applies with `kubectl apply -k deploy/`) and overlays/lab, the changes the
// local lab needs. It is a Go package only so that lab/manifests can embed
// the tree: go:embed cannot reach a parent directory, so the embedding has
// to live here.
package deploy

import "embed"

// FS is this directory's manifests with paths as they are on disk:
// "kustomization.yaml", "base/daemonset.yaml",
// "overlays/lab/kustomization.yaml", ...
//
//go:embed *.yaml base overlays
var FS embed.FS
