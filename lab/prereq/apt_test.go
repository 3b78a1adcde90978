package prereq

import (
	"reflect"
	"testing"
)

func TestMissingPackages(t *testing.T) {
	// dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' output; unknown
	// packages (here conntrack) are not listed at all.
	out := "busybox-static ii \n" +
		"iptables un \n" +
		"ebtables rc \n" +
		"libseccomp-dev:amd64 ii \n" +
		"pkg-config iU \n" +
		"gcc it \n" +
		"\n"
	want := []string{"busybox-static", "iptables", "ebtables", "libseccomp-dev", "pkg-config", "gcc", "conntrack"}
	got := missingPackages(want, out)
	if exp := []string{"iptables", "ebtables", "pkg-config", "conntrack"}; !reflect.DeepEqual(got, exp) {
		t.Fatalf("missing = %v, want %v", got, exp)
	}
	if got := missingPackages([]string{"gcc"}, ""); !reflect.DeepEqual(got, []string{"gcc"}) {
		t.Fatalf("with no dpkg output: %v", got)
	}
}

func TestPackagesFor(t *testing.T) {
	names := func(o Options) []string {
		var n []string
		for _, p := range packagesFor(o) {
			n = append(n, p.name)
		}
		return n
	}
	all := names(Options{Groups: AllGroups})
	if exp := []string{"busybox-static", "ebtables", "gcc", "iptables", "libc6-dev", "libseccomp-dev", "mount", "pkg-config"}; !reflect.DeepEqual(all, exp) {
		t.Fatalf("all groups: %v, want %v", all, exp)
	}
	if got := names(Options{Groups: []Group{Terway}}); !reflect.DeepEqual(got, []string{"busybox-static"}) {
		t.Fatalf("terway: %v", got)
	}
	if got := names(Options{Groups: []Group{Terway, Etcd}, Busybox: "/opt/busybox"}); len(got) != 0 {
		t.Fatalf("terway with own busybox, etcd: %v, want none", got)
	}
	for _, p := range packagesFor(Options{Groups: AllGroups}) {
		if p.why == "" {
			t.Errorf("package %s has no reason", p.name)
		}
	}
}
