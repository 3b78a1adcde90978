package deviceplugin_test

import (
	"log/slog"
	"testing"
)

// testLogger sends the plugin's logs to the test's output, so a failure
// shows what the plugin did.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(b))
	return len(b), nil
}
