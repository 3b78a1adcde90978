// Package prereq installs and builds everything the lab runs, once, into a
// cache: Debian packages (apt), the Kubernetes binaries and etcd from the
// nested modules lab/prereq/kube and lab/prereq/etcd, containerd, runc and
// crictl from the Go module proxy, our own binaries, and the three images
// (pause, busybox, terway) as docker-save archives.
//
//	ts, err := prereq.Ensure(ctx, prereq.Options{RepoDir: repo, Progress: os.Stderr, Apt: true})
//	exec.Command(ts.Bin("kube-apiserver"), ...)
//	for _, tar := range ts.Images { ctr -n k8s.io images import tar }
//
// # Cache
//
// One directory, <repo>/.lab/cache unless Options.CacheDir says otherwise:
//
//	.gitignore      "*", so the cache stays out of git wherever it lives
//	lock            flock'ed by the Ensure that runs; a second one waits
//	stamp.json      per component and image: the inputs it was built from
//	bin/            every binary (Toolset.BinDir)
//	images/         pause.tar, busybox.tar, terway.tar (Toolset.ImagesDir)
//	.build-*        temporary output of a build in progress
//
// A third-party component (kubernetes, etcd, containerd, runc, crictl) is
// rebuilt only when its stamp changes — pinned version, `go env GOVERSION`,
// build command, or the content of its nested module (go.mod, go.sum,
// sources) — or when one of its binaries is missing. Builds go to a
// temporary directory and are renamed into bin/ only when complete, and the
// stamp is written after that, so an interrupted build is redone, never
// taken for finished. Our own binaries are rebuilt on every run: the Go
// build cache makes that take seconds. An image is rewritten only when its
// content (files, config) changes.
//
// The first run on a 2-core machine takes about 15 minutes, most of it the
// Kubernetes build; later runs reuse the cache and the Go build cache.
package prereq
