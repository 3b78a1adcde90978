package cloud

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// sdkConnectTimeout is the SDK's own connect timeout, which it sets only
// on a transport it made itself.
const sdkConnectTimeout = 5 * time.Second

// callTransport gives an SDK client's requests the context of the call
// that borrowed the client. The SDK builds its requests without a
// context, so without it a cancelled call (a daemon stopping, a deadline
// passed) would go on until the SDK's timeout; with it the request ends
// when either the SDK's timeout or the call's context does.
type callTransport struct {
	base http.RoundTripper

	mu  sync.Mutex
	ctx context.Context // the borrower's; nil while the client is idle
}

func newCallTransport() *callTransport {
	return &callTransport{base: &http.Transport{
		Proxy:       http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{Timeout: sdkConnectTimeout}).DialContext,
	}}
}

// bind makes ctx the context of the client's requests until unbind.
func (t *callTransport) bind(ctx context.Context) {
	t.mu.Lock()
	t.ctx = ctx
	t.mu.Unlock()
}

// unbind leaves the client's requests only their own context.
func (t *callTransport) unbind() {
	t.mu.Lock()
	t.ctx = nil
	t.mu.Unlock()
}

// RoundTrip sends r under a context that also ends with the bound one,
// until the response body is closed.
func (t *callTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	call := t.ctx
	t.mu.Unlock()
	if call == nil {
		return t.base.RoundTrip(r)
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(call, cancel)
	done := func() { stop(); cancel() }
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		done()
		return nil, err
	}
	resp.Body = &callBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

// callBody ends a request's context when its body is closed.
type callBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *callBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}
