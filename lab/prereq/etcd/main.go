// Command etcd is the etcd server of the lab's control plane, built from
// the pinned go.etcd.io/etcd/server/v3 release.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
