package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

func TestPKIIssuesVerifiableCerts(t *testing.T) {
	dir := t.TempDir()
	p, err := newPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	nodes := []NodeState{{Name: "lab-1", PrimaryIP: "192.168.0.10"}}
	if err := issueCerts(p, nodes); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, p.path("ca.crt")))
	check := func(name string, usage x509.ExtKeyUsage, host string) *x509.Certificate {
		t.Helper()
		pair, err := tls.LoadX509KeyPair(p.path(name+".crt"), p.path(name+".key"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("%s does not verify for %q: %v", name, host, err)
		}
		return c
	}
	check("apiserver", x509.ExtKeyUsageServerAuth, "127.0.0.1")
	check("apiserver", x509.ExtKeyUsageServerAuth, "kubernetes.default.svc")
	if c := check("admin", x509.ExtKeyUsageClientAuth, ""); len(c.Subject.Organization) != 1 || c.Subject.Organization[0] != "system:masters" {
		t.Errorf("admin organisation %v, want system:masters", c.Subject.Organization)
	}
	n := check("node-lab-1", x509.ExtKeyUsageClientAuth, "")
	if n.Subject.CommonName != "system:node:lab-1" {
		t.Errorf("node CN %q", n.Subject.CommonName)
	}
	check("node-lab-1", x509.ExtKeyUsageServerAuth, "lab-1")
	for _, f := range []string{"ca.key", "sa.key", "apiserver.key", "node-lab-1.key"} {
		fi, err := os.Stat(p.path(f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v; keys must not be readable by others", f, fi.Mode())
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestPidFileSurvivesOnlyItsProcess(t *testing.T) {
	path := t.TempDir() + "/self.pid"
	if err := writePidFile(path, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if pid, ok := pidFileAlive(path); !ok || pid != os.Getpid() {
		t.Fatalf("pidFileAlive = %d, %v; want this process", pid, ok)
	}
	// Same pid, another start time: a reused number is not our process.
	if err := os.WriteFile(path, []byte("1 12345\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := pidFileAlive(path); ok {
		t.Fatal("a pid file whose start time does not match was taken as alive")
	}
}
