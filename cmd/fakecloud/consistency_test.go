package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	openapi "github.com/alibabacloud-go/darabonba-openapi/v2/client"
	teaecs "github.com/alibabacloud-go/ecs-20140526/v7/client"
	"github.com/alibabacloud-go/tea/tea"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/internal/testlog"
)

const (
	cdRegion = "cn-hangzhou"
	cdVSw    = "vsw-bp1lab0000000000001"
	cdSG     = "sg-bp1lab0000000000001"
	cdAK     = "LTAIcreatedescribe"
	cdSecret = "create-describe-secret"
)

// served is "fakecloud serve" running in process (see startServe).
type served struct {
	url     *url.URL        // from its endpoint line: http://127.0.0.1:port
	stderr  *testlog.Buffer // its log
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// startServe runs "fakecloud serve" in process, as other tooling does:
// on a loopback port, with the access key cdAK and extra flags, and waits
// for the one stdout line with its endpoint. It stops with the test.
func startServe(t *testing.T, extra ...string) *served {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{stderr: &testlog.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	root := newRootCommand(pw, s.stderr)
	root.SetArgs(append([]string{"serve", "--listen", "127.0.0.1:0",
		"--access-key-id", cdAK, "--access-key-secret", cdSecret}, extra...))
	go func() { s.done <- root.ExecuteContext(ctx); pw.Close() }()
	t.Cleanup(func() { s.stop(t) })
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no endpoint line: %v (stderr: %s)", err, s.stderr)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	s.url, err = url.Parse(strings.TrimSpace(line))
	if err != nil || s.url.Scheme != "http" || !strings.HasPrefix(s.url.Host, "127.0.0.1:") {
		t.Fatalf("endpoint line %q", line)
	}
	return s
}

// stop stops serve and fails the test unless it returns nil within 15 s.
// Only the first call does anything.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if s.stopped {
		return
	}
	s.stopped = true
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("serve: %v (stderr: %s)", err, s.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// createThenDescribeOldSDK creates an ENI with the unmodified
// alibaba-cloud-sdk-go and describes it at once with both Describe calls,
// as a client following the CreateNetworkInterface documentation does
// (the call is synchronous: the new ENI is Available).
func createThenDescribeOldSDK(t *testing.T, host string) {
	t.Helper()
	cfg := sdk.NewConfig()
	cfg.Scheme = "HTTP"
	cfg.Timeout = 20 * time.Second
	c, err := ecs.NewClientWithOptions(cdRegion, cfg, credentials.NewAccessKeyCredential(cdAK, cdSecret))
	if err != nil {
		t.Fatal(err)
	}
	c.Domain = host
	req := ecs.CreateCreateNetworkInterfaceRequest()
	req.VSwitchId, req.SecurityGroupId = cdVSw, cdSG
	created, err := c.CreateNetworkInterface(req)
	if err != nil {
		t.Fatalf("old SDK create: %v", err)
	}
	id := created.NetworkInterfaceId
	ar := ecs.CreateDescribeNetworkInterfaceAttributeRequest()
	ar.NetworkInterfaceId = id
	attr, err := c.DescribeNetworkInterfaceAttribute(ar)
	if err != nil {
		t.Fatalf("old SDK: DescribeNetworkInterfaceAttribute right after create: %v", err)
	}
	if attr.NetworkInterfaceId != id || attr.Status != "Available" {
		t.Fatalf("old SDK: attribute of the new ENI: %s %s", attr.NetworkInterfaceId, attr.Status)
	}
	lr := ecs.CreateDescribeNetworkInterfacesRequest()
	lr.NetworkInterfaceId = &[]string{id}
	list, err := c.DescribeNetworkInterfaces(lr)
	if err != nil {
		t.Fatalf("old SDK: DescribeNetworkInterfaces right after create: %v", err)
	}
	if s := list.NetworkInterfaceSets.NetworkInterfaceSet; len(s) != 1 || s[0].NetworkInterfaceId != id || s[0].Status != "Available" {
		t.Fatalf("old SDK: DescribeNetworkInterfaces right after create lists %+v, want %s Available", s, id)
	}
}

// createThenDescribeTea does the same with the Tea SDK (ACS3 signing).
func createThenDescribeTea(t *testing.T, host string) {
	t.Helper()
	c, err := teaecs.NewClient(&openapi.Config{
		AccessKeyId: tea.String(cdAK), AccessKeySecret: tea.String(cdSecret), RegionId: tea.String(cdRegion),
		Endpoint: tea.String(host), Protocol: tea.String("http"),
		ReadTimeout: tea.Int(20000), ConnectTimeout: tea.Int(5), // ms and s with tea v1.3.13 (README)
	})
	if err != nil {
		t.Fatal(err)
	}
	created, err := c.CreateNetworkInterface(&teaecs.CreateNetworkInterfaceRequest{RegionId: tea.String(cdRegion),
		VSwitchId: tea.String(cdVSw), SecurityGroupId: tea.String(cdSG)})
	if err != nil {
		t.Fatalf("Tea create: %v", err)
	}
	id := tea.StringValue(created.Body.NetworkInterfaceId)
	attr, err := c.DescribeNetworkInterfaceAttribute(&teaecs.DescribeNetworkInterfaceAttributeRequest{
		RegionId: tea.String(cdRegion), NetworkInterfaceId: tea.String(id)})
	if err != nil {
		t.Fatalf("Tea: DescribeNetworkInterfaceAttribute right after create: %v", err)
	}
	if tea.StringValue(attr.Body.NetworkInterfaceId) != id || tea.StringValue(attr.Body.Status) != "Available" {
		t.Fatalf("Tea: attribute of the new ENI: %s %s", tea.StringValue(attr.Body.NetworkInterfaceId), tea.StringValue(attr.Body.Status))
	}
	list, err := c.DescribeNetworkInterfaces(&teaecs.DescribeNetworkInterfacesRequest{
		RegionId: tea.String(cdRegion), NetworkInterfaceId: []*string{tea.String(id)}})
	if err != nil {
		t.Fatalf("Tea: DescribeNetworkInterfaces right after create: %v", err)
	}
	s := list.Body.NetworkInterfaceSets.NetworkInterfaceSet
	if len(s) != 1 || tea.StringValue(s[0].NetworkInterfaceId) != id || tea.StringValue(s[0].Status) != "Available" {
		t.Fatalf("Tea: DescribeNetworkInterfaces right after create lists %d ENIs, want %s Available", len(s), id)
	}
}

// TestServeDefaultCreateThenDescribe is the acceptance test of issue 10,
// finding 5: against "fakecloud serve" with default settings (time scale
// 1, the built-in world), an ENI is describable the moment
// CreateNetworkInterface answers, through both SDKs. Before the
// consistency window became opt-in, every Describe here answered
// InvalidEniId.NotFound (or an empty list) for 500 ms.
func TestServeDefaultCreateThenDescribe(t *testing.T) {
	host := startServe(t).url.Host
	t.Run("old SDK", func(t *testing.T) { createThenDescribeOldSDK(t, host) })
	t.Run("Tea SDK", func(t *testing.T) { createThenDescribeTea(t, host) })
}

// TestWorldCommandHasNoConsistencyWindow checks that the world "fakecloud
// world" prints keeps eventual consistency off, and that serving it (as a
// user who saved and edited it would) behaves like the default.
func TestWorldCommandHasNoConsistencyWindow(t *testing.T) {
	world, p := savedWorld(t)
	if !bytes.Contains(world, []byte("consistencyWindow: 0s\n")) {
		t.Fatalf("the printed world has a consistency window:\n%s", world)
	}
	if !bytes.Contains(world, []byte("throttleCodes:\n    '*': Throttling.User\n")) {
		t.Fatalf("the printed world does not show the throttling code:\n%s", world)
	}
	host := startServe(t, "--world", p).url.Host
	createThenDescribeOldSDK(t, host)
	createThenDescribeTea(t, host)
}
