package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/fakecloud/admin"
)

func TestClient(t *testing.T) {
	c, err := fakecloud.New(fakecloud.Options{AdminToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx := context.Background()
	a := &admin.Client{URL: srv.URL, Token: "tok"}
	w, err := a.World(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w.RegionID != fakecloud.DefaultRegion || len(w.Instances) == 0 {
		t.Fatalf("world: region %q, %d instances", w.RegionID, len(w.Instances))
	}
	name, err := a.AddFault(ctx, admin.Fault{Kind: "error", Action: "DescribeVSwitches", Probability: 1})
	if err != nil || name == "" {
		t.Fatalf("AddFault: %q, %v", name, err)
	}
	if fs, err := a.Faults(ctx); err != nil || len(fs) != 1 || fs[0].Name != name || fs[0].Action != "DescribeVSwitches" {
		t.Fatalf("Faults: %+v, %v", fs, err)
	}
	if err := a.RemoveFault(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveFault(ctx, name); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("removing a fault twice: %v, want a 404 error", err)
	}
	if _, err := a.AddFault(ctx, admin.Fault{Kind: "error"}); err != nil {
		t.Fatal(err)
	}
	if err := a.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	// A metadata read from an address no instance has is refused and
	// counted apart from API calls.
	resp, err := http.Get(srv.URL + "/latest/meta-data/instance-id")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	md, err := a.MetadataCalls(ctx)
	if err != nil || len(md) != 1 || md[0].Service != admin.ServiceMetadata || md[0].Action != "meta-data/instance-id" || md[0].Outcome != "Http403" {
		t.Fatalf("metadata calls: %+v, %v", md, err)
	}
	if calls, err := a.Calls(ctx); err != nil || len(calls) != 0 {
		t.Fatalf("API calls after a metadata read: %+v, %v", calls, err)
	}
	if err := a.ResetCalls(ctx); err != nil {
		t.Fatal(err)
	}
	if md, err := a.MetadataCalls(ctx); err != nil || len(md) != 0 {
		t.Fatalf("metadata calls after reset: %v, %v", md, err)
	}
	bad := &admin.Client{URL: srv.URL, Token: "wrong"}
	if _, err := bad.World(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v, want a 401 error", err)
	}
}
