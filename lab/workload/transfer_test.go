package workload

import (
	"context"
	"strings"
	"testing"
	"time"
)

// scripted answers every Exec with out and records the commands.
type scripted struct {
	out  string
	cmds [][]string
}

func (s *scripted) Exec(_ context.Context, _, _, _ string, cmd []string) (ExecResult, error) {
	s.cmds = append(s.cmds, cmd)
	return ExecResult{Stdout: s.out}, nil
}

func TestDownloadTimesInsideThePod(t *testing.T) {
	r := &scripted{out: "100.00 102.50 3276800\n"}
	to := podOn("server", "n1", "192.168.0.7")
	tr, err := Prober{Runner: r}.Download(context.Background(), podOn("client", "n1", "192.168.0.8"), to, "big")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Bytes != 3276800 || tr.Elapsed != 2500*time.Millisecond {
		t.Errorf("transfer %+v", tr)
	}
	if got := tr.BitsPerSecond(); got < 10.48e6 || got > 10.49e6 {
		t.Errorf("rate %f bit/s", got)
	}
	if cmd := r.cmds[0]; cmd[len(cmd)-1] != "http://192.168.0.7:8080/big" {
		t.Errorf("command %q", cmd)
	}
}

func TestDownloadOutputs(t *testing.T) {
	for out, want := range map[string]string{
		"1.00 1.00 100":  "10ms", // faster than the clock: one step
		"5.0 4.0 100":    "error",
		"garbage":        "error",
		"1.0 2.0 x":      "error",
		"1.0 2.25 65536": "1.25s",
	} {
		tr, err := parseDownload(out)
		got := tr.Elapsed.String()
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("parseDownload(%q) = %s (%v), want %s", out, got, err, want)
		}
	}
}

func TestServeFileChecksTheSize(t *testing.T) {
	p := podOn("server", "n1", "192.168.0.7")
	if err := (Prober{Runner: &scripted{out: "4194304\n"}}).ServeFile(context.Background(), p, "big", 4<<20); err != nil {
		t.Fatal(err)
	}
	err := (Prober{Runner: &scripted{out: "0\n"}}).ServeFile(context.Background(), p, "big", 4<<20)
	if err == nil || !strings.Contains(err.Error(), "0 bytes written") {
		t.Fatalf("short file: %v", err)
	}
}
