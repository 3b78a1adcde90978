package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certSpec is one certificate the CA signs: its file stem (<name>.crt,
// <name>.key) and client-go's description of it (subject, SANs, extended
// usages).
type certSpec struct {
	name string
	cert.Config
}

var (
	serverAuth      = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	clientAuth      = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	serverAndClient = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
)

// issueCerts creates every certificate of the control plane and of nodes:
// the API server's serving one (for its loopback address, the kubernetes
// Service's ClusterIP and names), the clients' (their CN and O are their
// RBAC user and groups) and each kubelet's, for serving and as a client.
func issueCerts(p *pki, nodes []NodeState) error {
	client := func(name, cn string, orgs ...string) certSpec {
		return certSpec{name: name, Config: cert.Config{CommonName: cn, Organization: orgs, Usages: clientAuth}}
	}
	specs := []certSpec{
		{name: "apiserver", Config: cert.Config{CommonName: "kube-apiserver", Usages: serverAuth,
			AltNames: cert.AltNames{IPs: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
				DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
					"kubernetes.default.svc.cluster.local"}}}},
		client("admin", "terway-lab-admin", "system:masters"),
		client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"),
		client("controller-manager", "system:kube-controller-manager"),
		client("scheduler", "system:kube-scheduler"),
		client("kube-proxy", "system:kube-proxy"),
	}
	for _, n := range nodes {
		specs = append(specs, nodeCertSpec(n))
	}
	for _, s := range specs {
		if err := p.issue(s); err != nil {
			return err
		}
	}
	return nil
}

// nodeCertSpec is node n's kubelet certificate, client and server.
func nodeCertSpec(n NodeState) certSpec {
	return certSpec{name: "node-" + n.Name, Config: cert.Config{CommonName: "system:node:" + n.Name,
		Organization: []string{"system:nodes"}, Usages: serverAndClient,
		AltNames: cert.AltNames{DNSNames: []string{n.Name}, IPs: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(n.PrimaryIP)}}}}
}

// pki is the lab's certificate authority, on client-go's cert and keyutil
// (the CA, PEM encoding, file modes: keys 0600, certificates 0644, in a
// 0700 directory). ECDSA P-256 keys are used throughout because they take
// milliseconds to generate where RSA keys took most of the recipe's nine
// seconds of openssl.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
}

// newPKI creates the CA (valid from an hour ago, against clock skew, for
// ten years) and the service-account signing key in dir.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	ca, err := cert.NewSelfSignedCACert(cert.Config{CommonName: "terway-lab-ca", NotBefore: time.Now().Add(-time.Hour)}, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	p := &pki{dir: dir, caCert: ca, caKey: key}
	if err := p.write("ca", ca, key); err != nil {
		return nil, err
	}
	return p, p.writeServiceAccountKey()
}

// writeServiceAccountKey writes sa.key, with which kube-controller-manager
// signs service-account tokens, and sa.pub, with which kube-apiserver
// verifies them.
func (p *pki) writeServiceAccountKey() error {
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	if err := writeKey(p.path("sa.key"), sa); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return fmt.Errorf("encode service-account public key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: keyutil.PublicKeyBlockType, Bytes: pub})
	if err := cert.WriteCert(p.path("sa.pub"), data); err != nil {
		return fmt.Errorf("write sa.pub: %w", err)
	}
	return nil
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// issue signs a certificate for s, valid from an hour ago until the CA
// expires, and writes <name>.crt and <name>.key. (client-go signs only
// self-signed certificates; this is the CA-signed counterpart.)
func (p *pki) issue(s certSpec) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key for %s: %w", s.name, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return fmt.Errorf("serial for %s: %w", s.name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.CommonName, Organization: s.Organization},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     p.caCert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  s.Usages,
		DNSNames:     s.AltNames.DNSNames,
		IPAddresses:  s.AltNames.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return fmt.Errorf("sign certificate %s: %w", s.name, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("parse certificate %s: %w", s.name, err)
	}
	return p.write(s.name, c, key)
}

// write writes <name>.crt and <name>.key.
func (p *pki) write(name string, c *x509.Certificate, key *ecdsa.PrivateKey) error {
	data, err := cert.EncodeCertificates(c)
	if err != nil {
		return fmt.Errorf("encode %s.crt: %w", name, err)
	}
	if err := cert.WriteCert(p.path(name+".crt"), data); err != nil {
		return fmt.Errorf("write %s.crt: %w", name, err)
	}
	return writeKey(p.path(name+".key"), key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	data, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("encode key %s: %w", path, err)
	}
	if err := keyutil.WriteKey(path, data); err != nil {
		return fmt.Errorf("write key %s: %w", path, err)
	}
	return nil
}
