package cloud

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"k8s.io/utils/clock"
)

// CredentialSource says where cloud credentials come from, in Terway's
// order of preference: an AccessKey pair, a credential file, or the
// instance's RAM role through the metadata service.
type CredentialSource struct {
	AccessKeyID     string
	AccessKeySecret string
	// CredentialPath is a Terway credential file (JSON keys
	// access.key.id, access.key.secret, security.token, expiration, and
	// keyring when the values are AES-CBC encrypted).
	CredentialPath string
}

// refreshBefore is how long before expiry STS credentials are renewed.
const refreshBefore = 15 * time.Minute

// NewCredentials returns the SDK credentials provider for src. Secrets
// never appear in errors or logs.
func NewCredentials(src CredentialSource, md *Metadata, c clock.Clock) (credentials.CredentialsProvider, string, error) {
	if c == nil {
		c = clock.RealClock{}
	}
	switch {
	case src.AccessKeyID != "" || src.AccessKeySecret != "":
		if src.AccessKeyID == "" || src.AccessKeySecret == "" {
			return nil, "", errors.New("credentials: access_key and access_secret must be set together")
		}
		return credentials.NewStaticAKCredentialsProvider(src.AccessKeyID, src.AccessKeySecret), "access key", nil
	case src.CredentialPath != "":
		p := &refreshing{clock: c, name: "credential file", fetch: func(context.Context) (*credentials.Credentials, time.Time, error) {
			return readCredentialFile(src.CredentialPath)
		}}
		return p, "credential file " + src.CredentialPath, nil
	case md != nil:
		var (
			mu   sync.Mutex
			role string
		)
		p := &refreshing{clock: c, name: "ecs_ram_role", fetch: func(ctx context.Context) (*credentials.Credentials, time.Time, error) {
			mu.Lock()
			r := role
			mu.Unlock()
			if r == "" {
				var err error
				if r, err = md.RAMRole(ctx); err != nil {
					return nil, time.Time{}, fmt.Errorf("instance RAM role: %w (no access key configured and the instance has no RAM role)", err)
				}
				mu.Lock()
				role = r
				mu.Unlock()
			}
			rc, exp, err := md.Credentials(ctx, r)
			if err != nil {
				return nil, time.Time{}, err
			}
			return &credentials.Credentials{AccessKeyId: rc.AccessKeyID, AccessKeySecret: rc.AccessKeySecret,
				SecurityToken: rc.SecurityToken, ProviderName: "ecs_ram_role"}, exp, nil
		}}
		return p, "instance RAM role", nil
	}
	return nil, "", errors.New("credentials: no access key, credential file or metadata service")
}

// refreshing caches credentials and fetches new ones before they expire.
type refreshing struct {
	clock clock.Clock
	name  string
	fetch func(context.Context) (*credentials.Credentials, time.Time, error)

	mu      sync.Mutex
	cur     *credentials.Credentials
	expires time.Time
}

// GetCredentials implements credentials.CredentialsProvider; the SDK
// calls it for every request.
func (r *refreshing) GetCredentials() (*credentials.Credentials, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if r.cur != nil && (r.expires.IsZero() || now.Before(r.expires.Add(-refreshBefore))) {
		return r.cur, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, exp, err := r.fetch(ctx)
	if err != nil {
		if r.cur != nil && now.Before(r.expires) {
			return r.cur, nil // keep using what still works; retry next call
		}
		return nil, fmt.Errorf("refresh %s credentials: %w", r.name, err)
	}
	r.cur, r.expires = c, exp
	return c, nil
}

// GetProviderName implements credentials.CredentialsProvider.
func (r *refreshing) GetProviderName() string { return r.name }

// credentialFile is Terway's credential file format.
type credentialFile struct {
	AccessKeyID     string `json:"access.key.id"`
	AccessKeySecret string `json:"access.key.secret"`
	SecurityToken   string `json:"security.token"`
	Expiration      string `json:"expiration"`
	Keyring         string `json:"keyring"`
}

func readCredentialFile(path string) (*credentials.Credentials, time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("credential file: %w", err)
	}
	var f credentialFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, time.Time{}, fmt.Errorf("credential file %s: %w", path, err)
	}
	if f.Keyring != "" {
		for _, v := range []*string{&f.AccessKeyID, &f.AccessKeySecret, &f.SecurityToken} {
			if *v, err = decryptCredential(*v, f.Keyring); err != nil {
				return nil, time.Time{}, fmt.Errorf("credential file %s: decrypt: %w", path, err)
			}
		}
	}
	if f.AccessKeyID == "" || f.AccessKeySecret == "" {
		return nil, time.Time{}, fmt.Errorf("credential file %s: access.key.id and access.key.secret are required", path)
	}
	var exp time.Time
	if f.Expiration != "" {
		if exp, err = time.Parse("2006-01-02T15:04:05Z", f.Expiration); err != nil {
			return nil, time.Time{}, fmt.Errorf("credential file %s: expiration %q: %w", path, f.Expiration, err)
		}
	}
	c := &credentials.Credentials{AccessKeyId: f.AccessKeyID, AccessKeySecret: f.AccessKeySecret,
		SecurityToken: f.SecurityToken, ProviderName: "credential_file"}
	return c, exp, nil
}

// decryptCredential undoes Terway's encryption: base64 of AES-CBC with the
// IV in the first block and PKCS#5 padding, keyed by the keyring.
func decryptCredential(s, keyring string) (string, error) {
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", err
	}
	block, err := aes.NewCipher([]byte(keyring))
	if err != nil {
		return "", err
	}
	if len(data) < 2*aes.BlockSize || len(data)%aes.BlockSize != 0 {
		return "", errors.New("ciphertext is not whole blocks")
	}
	iv, data := data[:aes.BlockSize], data[aes.BlockSize:]
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(data, data)
	pad := int(data[len(data)-1])
	if pad < 1 || pad > aes.BlockSize || pad > len(data) {
		return "", errors.New("bad padding")
	}
	return string(data[:len(data)-pad]), nil
}
