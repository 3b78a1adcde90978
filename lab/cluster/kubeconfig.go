package cluster

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for server that authenticates with
// the certificate pair <cert>.crt/<cert>.key of p, everything embedded so
// the file can be copied elsewhere.
func writeKubeconfig(path, server string, p *pki, cert string) error {
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(p.path(cert + ".crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.path(cert + ".key"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["terway-lab"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[cert] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["terway-lab"] = &clientcmdapi.Context{Cluster: "terway-lab", AuthInfo: cert}
	cfg.CurrentContext = "terway-lab"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
