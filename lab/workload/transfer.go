package workload

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Transfer is one timed download from a pod's httpd.
type Transfer struct {
	Bytes int64
	// Elapsed is measured inside the downloading pod (its /proc/uptime,
	// 10 ms steps), so the exec round trip does not count.
	Elapsed time.Duration
}

// BitsPerSecond is the transfer's rate.
func (t Transfer) BitsPerSecond() float64 {
	if t.Elapsed <= 0 {
		return 0
	}
	return float64(t.Bytes) * 8 / t.Elapsed.Seconds()
}

func (t Transfer) String() string {
	return fmt.Sprintf("%d bytes in %s: %.1f Mbit/s", t.Bytes, t.Elapsed.Round(time.Millisecond), t.BitsPerSecond()/1e6)
}

// ServeFile writes a file of size bytes (zeros, a multiple of 1 KiB) as
// name into the document root of pod's httpd, for Download.
func (p Prober) ServeFile(ctx context.Context, pod corev1.Pod, name string, size int64) error {
	cmd := fmt.Sprintf("dd if=/dev/zero of=/tmp/%s bs=1024 count=%d 2>/dev/null && wc -c < /tmp/%s", name, size/1024, name)
	res, err := p.Runner.Exec(ctx, pod.Namespace, pod.Name, "", []string{"sh", "-c", cmd})
	if err != nil {
		return fmt.Errorf("write /tmp/%s in %s/%s: %w: %s", name, pod.Namespace, pod.Name, err, res.Stderr)
	}
	if got := strings.TrimSpace(res.Stdout); got != strconv.FormatInt(size/1024*1024, 10) {
		return fmt.Errorf("write /tmp/%s in %s/%s: %s bytes written", name, pod.Namespace, pod.Name, got)
	}
	return nil
}

// downloadScript times a wget of its first argument inside the pod and
// prints "<uptime before> <uptime after> <bytes>".
const downloadScript = `read s _ < /proc/uptime; n=$(wget -q -O - "$1" | wc -c); read e _ < /proc/uptime; echo "$s $e $n"`

// Download fetches file name from to's httpd (pod IP, DefaultPort) in
// from, and times it. ctx bounds it (busybox wget has no timeout).
func (p Prober) Download(ctx context.Context, from, to corev1.Pod, name string) (Transfer, error) {
	url := "http://" + net.JoinHostPort(to.Status.PodIP, strconv.Itoa(DefaultPort)) + "/" + name
	res, err := p.Runner.Exec(ctx, from.Namespace, from.Name, "", []string{"sh", "-c", downloadScript, "sh", url})
	if err != nil {
		return Transfer{}, fmt.Errorf("download %s in %s/%s: %w: %s", url, from.Namespace, from.Name, err, res.Stderr)
	}
	t, err := parseDownload(res.Stdout)
	if err != nil {
		return Transfer{}, fmt.Errorf("download %s in %s/%s: %w", url, from.Namespace, from.Name, err)
	}
	return t, nil
}

// parseDownload reads downloadScript's output.
func parseDownload(out string) (Transfer, error) {
	f := strings.Fields(out)
	if len(f) != 3 {
		return Transfer{}, fmt.Errorf("output %q is not \"<start> <end> <bytes>\"", out)
	}
	start, err1 := strconv.ParseFloat(f[0], 64)
	end, err2 := strconv.ParseFloat(f[1], 64)
	n, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || end < start {
		return Transfer{}, fmt.Errorf("output %q is not \"<start> <end> <bytes>\"", out)
	}
	// A transfer faster than the clock's step counts as one step.
	elapsed := max(time.Duration((end-start)*float64(time.Second)), 10*time.Millisecond)
	return Transfer{Bytes: n, Elapsed: elapsed.Round(time.Millisecond)}, nil
}
