package cluster

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

func TestPKIIssuesVerifiableCerts(t *testing.T) {
	p, err := newPKI(filepath.Join(t.TempDir(), "pki"))
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
	checkValidity(t, p)
	checkFiles(t, p)
	checkServiceAccountKey(t, p)
}

// checkValidity: the CA signs certificates; the leaves are no CA, carry
// the SANs and usages kube-apiserver and the kubelet need, and are valid
// now, from an hour back (clock skew) to no later than the CA.
func checkValidity(t *testing.T, p *pki) {
	t.Helper()
	ca := mustCert(t, p.path("ca.crt"))
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 || ca.Subject.CommonName != "terway-lab-ca" {
		t.Errorf("CA: IsCA %v, key usage %b, CN %q", ca.IsCA, ca.KeyUsage, ca.Subject.CommonName)
	}
	now := time.Now()
	for _, c := range []struct {
		name  string
		usage []x509.ExtKeyUsage
		dns   []string
		ips   []string
	}{
		{"apiserver", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			[]string{"127.0.0.1", "10.96.0.1"}},
		{"scheduler", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil},
		{"node-lab-1", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			[]string{"lab-1"}, []string{"127.0.0.1", "192.168.0.10"}},
	} {
		l := mustCert(t, p.path(c.name+".crt"))
		var ips []string
		for _, ip := range l.IPAddresses {
			ips = append(ips, ip.String())
		}
		if l.IsCA || !slices.Equal(l.ExtKeyUsage, c.usage) || !slices.Equal(l.DNSNames, c.dns) || !slices.Equal(ips, c.ips) {
			t.Errorf("%s: IsCA %v, usages %v, DNS %v, IPs %v; want usages %v, DNS %v, IPs %v",
				c.name, l.IsCA, l.ExtKeyUsage, l.DNSNames, ips, c.usage, c.dns, c.ips)
		}
		if l.NotBefore.After(now.Add(-50*time.Minute)) || l.NotAfter.After(ca.NotAfter) || l.NotAfter.Before(now.AddDate(9, 0, 0)) {
			t.Errorf("%s valid %v to %v (CA until %v)", c.name, l.NotBefore, l.NotAfter, ca.NotAfter)
		}
	}
}

// checkFiles: keys are root's alone (0600); certificates and the public
// key are 0644 in a 0700 directory.
func checkFiles(t *testing.T, p *pki) {
	t.Helper()
	want := map[string]os.FileMode{".": 0o700 | os.ModeDir, "ca.key": 0o600, "sa.key": 0o600, "apiserver.key": 0o600,
		"node-lab-1.key": 0o600, "ca.crt": 0o644, "node-lab-1.crt": 0o644, "sa.pub": 0o644}
	for f, mode := range want {
		fi, err := os.Stat(p.path(f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s has mode %v, want %v", f, fi.Mode(), mode)
		}
	}
}

// checkServiceAccountKey: sa.pub is sa.key's public half.
func checkServiceAccountKey(t *testing.T, p *pki) {
	t.Helper()
	key, err := keyutil.PrivateKeyFromFile(p.path("sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	pubs, err := keyutil.PublicKeysFromFile(p.path("sa.pub"))
	if err != nil || len(pubs) != 1 {
		t.Fatalf("sa.pub: %v, %d keys", err, len(pubs))
	}
	if !key.(*ecdsa.PrivateKey).PublicKey.Equal(pubs[0]) {
		t.Error("sa.pub is not sa.key's public key")
	}
}

func mustCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	certs, err := cert.ParseCertsPEM(mustRead(t, path))
	if err != nil || len(certs) != 1 {
		t.Fatalf("%s: %v, %d certificates", path, err, len(certs))
	}
	return certs[0]
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
