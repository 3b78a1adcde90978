package fakecloud_test

import (
	"errors"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/noproxy"
)

const (
	testAK     = "LTAItestKey0001"
	testSecret = "test-secret-0001"
	adminToken = "admin-token-for-tests"
)

func TestMain(m *testing.M) { noproxy.Main(m) }

// env is one fakecloud behind an httptest server.
type env struct {
	t     *testing.T
	cloud *fakecloud.Cloud
	srv   *httptest.Server
}

type envOption func(*fakecloud.Options, *fakecloud.Spec)

func withSettings(f func(*fakecloud.Settings)) envOption {
	return func(_ *fakecloud.Options, s *fakecloud.Spec) { f(&s.Settings) }
}

func withOptions(f func(*fakecloud.Options)) envOption {
	return func(o *fakecloud.Options, _ *fakecloud.Spec) { f(o) }
}

func withSpec(f func(*fakecloud.Spec)) envOption {
	return func(_ *fakecloud.Options, s *fakecloud.Spec) { f(s) }
}

// fastSettings makes every delay short but keeps them non-zero so the
// transitional states are observable.
func fastSettings(s *fakecloud.Settings) {
	s.AttachDelay = fakecloud.Duration(50 * time.Millisecond)
	s.DetachDelay = fakecloud.Duration(50 * time.Millisecond)
	s.DeleteDelay = fakecloud.Duration(20 * time.Millisecond)
	s.RouteEntryDelay = fakecloud.Duration(20 * time.Millisecond)
	s.EIPDelay = fakecloud.Duration(20 * time.Millisecond)
	s.MetadataLag = 0
	s.ConsistencyWindow = 0
}

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSecret}}
	fastSettings(&spec.Settings)
	o := fakecloud.Options{Seed: 42, AdminToken: adminToken}
	for _, f := range opts {
		f(&o, &spec)
	}
	o.Spec = &spec
	c, err := fakecloud.New(o)
	if err != nil {
		t.Fatalf("fakecloud.New: %v", err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(func() {
		srv.Close()
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &env{t: t, cloud: c, srv: srv}
}

func (e *env) host() string {
	u, _ := url.Parse(e.srv.URL)
	return u.Host
}

func sdkConfig() *sdk.Config {
	cfg := sdk.NewConfig()
	cfg.Scheme = "HTTP"
	cfg.Timeout = 10 * time.Second
	return cfg
}

// ecs returns a new old-SDK ECS client (one per goroutine: the SDK client
// is not safe for concurrent use).
func (e *env) ecs() *ecs.Client {
	return e.ecsWith(credentials.NewAccessKeyCredential(testAK, testSecret))
}

// sdkMu serialises client construction: the old SDK's constructors fill
// a package-level endpoint map lazily and race with each other.
var sdkMu sync.Mutex

func (e *env) ecsWith(cred auth.Credential) *ecs.Client {
	e.t.Helper()
	sdkMu.Lock()
	c, err := ecs.NewClientWithOptions(fakecloud.DefaultRegion, sdkConfig(), cred)
	sdkMu.Unlock()
	if err != nil {
		e.t.Fatalf("ecs client: %v", err)
	}
	c.Domain = e.host()
	return c
}

func (e *env) vpc() *vpc.Client {
	e.t.Helper()
	sdkMu.Lock()
	c, err := vpc.NewClientWithOptions(fakecloud.DefaultRegion, sdkConfig(), credentials.NewAccessKeyCredential(testAK, testSecret))
	sdkMu.Unlock()
	if err != nil {
		e.t.Fatalf("vpc client: %v", err)
	}
	c.Domain = e.host()
	return c
}

// code returns the API error code of err ("" for nil), failing on
// anything that is not a server error.
func code(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var se *sdkerrors.ServerError
	if !errors.As(err, &se) {
		t.Fatalf("not a server error: %v", err)
	}
	return se.ErrorCode()
}

func status(t *testing.T, err error) int {
	t.Helper()
	var se *sdkerrors.ServerError
	if !errors.As(err, &se) {
		t.Fatalf("not a server error: %v", err)
	}
	return se.HttpStatus()
}

// result carries a call's two results so that tests can write
// try(c.Call(req)).must(t).
type result[T any] struct {
	v   T
	err error
}

func try[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) must(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatalf("unexpected error: %v", r.err)
	}
	return r.v
}
