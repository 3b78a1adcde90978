package config

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/daemon/backoff"
)

// TestDocCoversEveryKey keeps the package documentation honest: every key
// Parse knows, and every key it ignores on purpose, is documented.
func TestDocCoversEveryKey(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range append(Keys(), UnimplementedKeys()...) {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(k) + `\b`).Match(doc) {
			t.Errorf("doc.go does not mention key %s", k)
		}
	}
}

// TestDocBackoffTable checks the documented backoff table against the
// built-in schedules.
func TestDocBackoffTable(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	dur := func(s string) time.Duration {
		if s == "-" || s == "0" {
			return 0
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("table duration %q: %v", s, err)
		}
		return d
	}
	num := func(s string) float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("table number %q: %v", s, err)
		}
		return f
	}
	rows := 0
	in := false
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimPrefix(line, "//")
		if strings.Contains(line, "key") && strings.Contains(line, "InitialDelay") && strings.Contains(line, "Cap") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if strings.TrimSpace(line) == "" {
			break
		}
		f := strings.Fields(line)
		key := f[0]
		if key == `""` {
			key, f = "", append([]string{`""`}, f[3:]...) // `"" (everything else)`
		}
		if len(f) != 7 {
			t.Fatalf("table row %q: want 7 columns", line)
		}
		got := backoff.Policy{InitialDelay: dur(f[1]), Duration: dur(f[2]), Factor: num(f[3]), Jitter: num(f[4]),
			Steps: int(num(f[5])), Cap: dur(f[6])}
		want, ok := backoff.Defaults()[key]
		if !ok {
			t.Errorf("documented backoff key %q has no built-in schedule", key)
		} else if got != want {
			t.Errorf("doc for %q = %+v, built-in %+v", key, got, want)
		}
		rows++
	}
	if rows != len(backoff.Defaults()) {
		t.Errorf("doc table has %d rows, built-in schedules %d", rows, len(backoff.Defaults()))
	}
}
