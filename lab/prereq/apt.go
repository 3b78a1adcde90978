package prereq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// debPackage is a Debian package the lab needs, and why.
type debPackage struct {
	name, why string
}

// groupPackages are the Debian packages each group needs, on bookworm.
// Deliberately absent: conntrack (kube-proxy clears conntrack entries over
// netlink since 1.32), containerd/runc/CNI plugins (built or ours),
// iproute2/util-linux/kmod (the lab uses netlink and setns from Go; no
// kernel module is loaded by hand).
var groupPackages = map[Group][]debPackage{
	Kubernetes: {
		{"iptables", "kube-proxy (iptables mode) and the kubelet run iptables, ip6tables, iptables-save and iptables-restore"},
		{"ebtables", "terway-lab demo and test compare the machine's ebtables (ebtables-save) before up and after down"},
		{"mount", "the kubelet mounts tmpfs for Secret and projected (service account token) volumes with /bin/mount"},
	},
	Runtime: {
		{"gcc", "runc is built with cgo (seccomp)"},
		{"libc6-dev", "runc is built with cgo (seccomp)"},
		{"libseccomp-dev", "runc is built with -tags seccomp and links libseccomp"},
		{"pkg-config", "runc's seccomp binding finds libseccomp through pkg-config"},
	},
	Terway: {
		{"busybox-static", "the test image lab.local/busybox:1 is /bin/busybox (static) plus its applets"},
	},
}

// packagesFor lists the packages the selected groups need, sorted, without
// duplicates.
func packagesFor(o Options) []debPackage {
	var pkgs []debPackage
	for _, g := range o.Groups {
		for _, p := range groupPackages[g] {
			if p.name == "busybox-static" && o.Busybox != "" {
				continue // the caller brings its own busybox
			}
			if !slices.ContainsFunc(pkgs, func(q debPackage) bool { return q.name == p.name }) {
				pkgs = append(pkgs, p)
			}
		}
	}
	slices.SortFunc(pkgs, func(a, b debPackage) int { return strings.Compare(a.name, b.name) })
	return pkgs
}

// dpkgFormat makes dpkg-query print "<name> <status abbreviation>" lines.
const dpkgFormat = "${Package} ${db:Status-Abbrev}\n"

// missingPackages returns the packages of want that dpkgOut (dpkg-query -W
// with dpkgFormat) does not show as installed. The abbreviation's second
// letter is the state: i installed; t and W are installed with triggers
// pending; anything else (n not installed, c only config files, U, F, h
// half-done) needs an install. Packages dpkg does not know at all are not
// listed by it, so they count as missing too.
func missingPackages(want []string, dpkgOut string) []string {
	installed := map[string]bool{}
	for _, line := range strings.Split(dpkgOut, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || len(f[1]) < 2 {
			continue
		}
		name, _, _ := strings.Cut(f[0], ":") // libseccomp-dev:amd64
		if strings.ContainsRune("itW", rune(f[1][1])) {
			installed[name] = true
		}
	}
	var missing []string
	for _, p := range want {
		if !installed[p] {
			missing = append(missing, p)
		}
	}
	return missing
}

// ensurePackages installs what is missing (with Apt) or says what to run.
func ensurePackages(ctx context.Context, o Options, p *progress) error {
	pkgs := packagesFor(o)
	if len(pkgs) == 0 {
		return nil
	}
	names := make([]string, len(pkgs))
	for i, pk := range pkgs {
		names[i] = pk.name
	}
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		p.printf("no dpkg-query (not Debian?): cannot check packages; make sure these or their equivalents are installed: %s", strings.Join(names, " "))
		return nil
	}
	out, err := dpkgQuery(ctx, names)
	if err != nil {
		return err
	}
	missing := missingPackages(names, out)
	if len(missing) == 0 {
		return nil
	}
	if !o.Apt {
		return fmt.Errorf("missing Debian packages:\n%s\ninstall them (as root) with: apt-get install -y --no-install-recommends %s\nor let prereq do it (Options.Apt)",
			describe(pkgs, missing), strings.Join(missing, " "))
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing Debian packages %s: installing them needs root", strings.Join(missing, " "))
	}
	return p.step("installing", "Debian packages "+strings.Join(missing, " "), "apt-get", func() error {
		return aptInstall(ctx, missing)
	})
}

// describe lists missing packages with the reason for each.
func describe(pkgs []debPackage, missing []string) string {
	var b strings.Builder
	for _, pk := range pkgs {
		if slices.Contains(missing, pk.name) {
			fmt.Fprintf(&b, "  %s: %s\n", pk.name, pk.why)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// dpkgQuery asks dpkg for the state of names. It exits 1 when one of them
// is unknown, yet prints the known ones: that is not a failure here.
func dpkgQuery(ctx context.Context, names []string) (string, error) {
	cmd := exec.CommandContext(ctx, "dpkg-query", append([]string{"-W", "-f=" + dpkgFormat}, names...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return "", fmt.Errorf("dpkg-query: %w\n%s", err, stderr.String())
	}
	return string(out), nil
}

// aptInstall refreshes the package lists (a fresh machine has none) and
// installs names without recommends.
func aptInstall(ctx context.Context, names []string) error {
	runs := [][]string{
		{"update"},
		append([]string{"install", "-y", "--no-install-recommends"}, names...),
	}
	for _, args := range runs {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out := &tailBuffer{max: 16 << 10}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	return nil
}
