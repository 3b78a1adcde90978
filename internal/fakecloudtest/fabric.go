package fakecloudtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/lab/fabric"
)

// Lab is a fakecloud whose instances are the node namespaces of a VPC
// fabric: attached ENIs are real interfaces, and each node reaches the
// metadata service at its VPC address.
type Lab struct {
	Cloud  *fakecloud.Cloud
	Fabric *fabric.Fabric
	// API serves ECS and VPC on loopback.
	API *httptest.Server
}

// StartLab builds a fabric named prefix plus a random suffix, and a
// fakecloud with o whose hypervisor it is, and returns once every running
// instance is a node. All of it is closed when t ends.
func StartLab(t testing.TB, prefix string, o fakecloud.Options) *Lab {
	t.Helper()
	f, err := fabric.NewFabric(fabric.FabricOptions{Name: fmt.Sprintf("%s%04x", prefix, rand.IntN(1<<16)), NetNSDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close fabric: %v", err)
		}
	})
	o.Hypervisor = f
	fc, err := fakecloud.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	if err := f.Serve(fc.MetadataBySourceHandler(), fc); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(fc)
	t.Cleanup(api.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := fc.WaitHypervisor(ctx); err != nil {
		t.Fatal(err)
	}
	return &Lab{Cloud: fc, Fabric: f, API: api}
}
