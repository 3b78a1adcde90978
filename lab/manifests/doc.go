// Package manifests renders the deploy/ manifests for a lab and applies
// them to its API server.
//
// Render builds deploy/overlays/lab with kustomize (krusty, on an in-memory
// file system holding the embedded deploy tree) under a kustomization
// generated for the run, which sets what only the lab knows when it starts:
//
//	images:             lab.local/terway → Params.Image
//	patches:            args/0 of container terwayd → --daemon-mode=<Params.Mode>
//	configMapGenerator: eni-config, behavior merge, eni_conf ← Params.ENIConf
//
// and checks the result (image, mode, eni_conf), so an edit of deploy/ that
// breaks these assumptions fails Render instead of starting a wrong daemon.
//
// Apply sends the objects by server-side apply (field manager "terway-lab",
// conflicts forced), cluster-scoped objects before namespaced ones; Delete
// removes them in the opposite order.
//
//	objs, err := manifests.Render(manifests.Params{Image: "lab.local/terway:3f2a", Mode: mode.ENIMultiIP, ENIConf: conf})
//	err = manifests.Apply(ctx, restConfig, objs)
package manifests
