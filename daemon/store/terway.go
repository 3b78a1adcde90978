package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Terway's records as it writes them to the "relation" bucket (types/daemon
// PodResources, ResourceItem, PodInfo). Go field names without tags are
// matched case-insensitively by encoding/json; unknown fields are ignored,
// so records of every Terway version decode.
type terwayResourceItem struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	ENIID  string `json:"eni_id"`
	ENIMAC string `json:"eni_mac"`
	IPv4   string `json:"ipv4"`
	IPv6   string `json:"ipv6"`
	// extra_eip_info is dropped (EIP is deprecated in Terway too).
}

type terwayPodInfo struct {
	Name           string
	Namespace      string
	PodNetworkType string
	PodUID         string
}

type terwayPodResources struct {
	Resources   []terwayResourceItem
	PodInfo     *terwayPodInfo
	NetNs       *string
	ContainerID *string // Terway main only
	NetConf     string  // Terway main only: JSON of the AllocIP NetConfs
}

// importTerway converts Terway's relation bucket into our schema in one
// transaction; the relation bucket itself is not modified.
func (s *Store) importTerway(now time.Time) error {
	var imported map[string]Attachment
	err := s.db.Update(func(tx *bolt.Tx) error {
		rel := tx.Bucket([]byte(bucketRelation))
		imported = map[string]Attachment{}
		err := rel.ForEach(func(k, v []byte) error {
			if v == nil {
				return fmt.Errorf("%w: Terway bucket %q holds a nested bucket %q; refusing to import it",
					ErrUnknownFormat, bucketRelation, k)
			}
			a, err := convertTerway(string(k), v)
			if err != nil {
				return fmt.Errorf("%w: Terway record %q in bucket %q: %w; refusing to import it",
					ErrUnknownFormat, k, bucketRelation, err)
			}
			imported[string(k)] = a
			return nil
		})
		if err != nil {
			return err
		}
		if err := initSchema(tx); err != nil {
			return err
		}
		meta := tx.Bucket([]byte(bucketMeta))
		for k, v := range map[string]string{
			metaImportedAt:      now.UTC().Format(time.RFC3339),
			metaImportedRecords: strconv.Itoa(len(imported)),
			metaRelationHash:    relationHash(rel),
		} {
			if err := meta.Put([]byte(k), []byte(v)); err != nil {
				return fmt.Errorf("write meta: %w", err)
			}
		}
		b := tx.Bucket([]byte(bucketAttachments))
		for k, a := range imported {
			key, data, back, err := encode(a)
			if err != nil {
				return fmt.Errorf("%w: Terway record %q: %w; refusing to import it", ErrUnknownFormat, k, err)
			}
			if err := b.Put([]byte(key), data); err != nil {
				return fmt.Errorf("write attachment %s: %w", key, err)
			}
			imported[k] = back
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("import Terway database: %w", err)
	}
	s.attachments = imported
	s.warnings = append(s.warnings, fmt.Sprintf(
		"store %s: imported %d record(s) from Terway's %q bucket; that bucket is left untouched and will not be read again",
		s.path, len(imported), bucketRelation))
	return nil
}

// convertTerway turns one Terway relation record into an Attachment.
func convertTerway(key string, value []byte) (Attachment, error) {
	var pr *terwayPodResources
	if err := json.Unmarshal(value, &pr); err != nil {
		return Attachment{}, fmt.Errorf("not a Terway PodResources record: %w", err)
	}
	if pr == nil {
		return Attachment{}, errors.New("null record")
	}
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		return Attachment{}, errors.New(`key is not "namespace/name"`)
	}
	a := Attachment{PodNamespace: ns, PodName: name, IfName: "eth0"}
	if pi := pr.PodInfo; pi != nil {
		if (pi.Namespace != "" && pi.Namespace != ns) || (pi.Name != "" && pi.Name != name) {
			return Attachment{}, fmt.Errorf("PodInfo names pod %s/%s", pi.Namespace, pi.Name)
		}
		a.PodUID = pi.PodUID
		a.IPType = IPType(pi.PodNetworkType)
	}
	if pr.NetNs != nil {
		a.Netns = *pr.NetNs
	}
	if pr.ContainerID != nil {
		a.ContainerID = *pr.ContainerID
	}
	if pr.NetConf != "" {
		if !json.Valid([]byte(pr.NetConf)) {
			return Attachment{}, errors.New("NetConf is not valid JSON")
		}
		a.NetConf = json.RawMessage(pr.NetConf)
	}
	for i, it := range pr.Resources {
		r, err := convertTerwayResource(it)
		if err != nil {
			return Attachment{}, fmt.Errorf("resource %d: %w", i, err)
		}
		a.Resources = append(a.Resources, r)
	}
	if a.IPType == "" {
		a.IPType = inferIPType(a.Resources)
	}
	if !a.IPType.Valid() {
		return Attachment{}, fmt.Errorf("unknown pod network type %q", a.IPType)
	}
	return a, nil
}

func convertTerwayResource(it terwayResourceItem) (Resource, error) {
	r := Resource{Type: ResourceType(it.Type), ID: it.ID, ENIID: it.ENIID, ENIMAC: it.ENIMAC, IPv4: it.IPv4, IPv6: it.IPv6}
	if it.ID == "" {
		return r, fmt.Errorf("type %q: empty id", it.Type)
	}
	switch r.Type {
	case ResourceENI:
		if r.ENIMAC == "" {
			r.ENIMAC = it.ID // an ENI's ID is its MAC
		}
	case ResourceENIIP:
		mac, ips, ok := strings.Cut(it.ID, ".")
		if !ok {
			return r, fmt.Errorf("eniIp id %q is not \"<mac>.<ip>\"", it.ID)
		}
		v4, v6, err := parseTerwayIPSet(ips)
		if err != nil {
			return r, fmt.Errorf("eniIp id %q: %w", it.ID, err)
		}
		if r.ENIMAC == "" {
			r.ENIMAC = mac
		}
		if r.IPv4 == "" {
			r.IPv4 = v4
		}
		if r.IPv6 == "" {
			r.IPv6 = v6
		}
	case ResourceVeth, ResourceEIP:
	default:
		return r, fmt.Errorf("unknown resource type %q", it.Type)
	}
	return r, nil
}

// parseTerwayIPSet parses Terway's IPSet.String(): "v4", "v6" or "v4-v6".
func parseTerwayIPSet(s string) (v4, v6 string, err error) {
	for part := range strings.SplitSeq(s, "-") {
		ip, perr := netip.ParseAddr(part)
		switch {
		case perr != nil:
			return "", "", fmt.Errorf("bad address %q", part)
		case ip.Is4() && v4 == "":
			v4 = ip.String()
		case ip.Is6() && !ip.Is4In6() && v6 == "":
			v6 = ip.String()
		default:
			return "", "", fmt.Errorf("unexpected address %q", part)
		}
	}
	return v4, v6, nil
}

// inferIPType guesses a pod's network type from its resources when Terway
// did not record it.
func inferIPType(rs []Resource) IPType {
	for _, r := range rs {
		switch r.Type {
		case ResourceENIIP:
			return IPTypeENIMultiIP
		case ResourceENI:
			return IPTypeVPCENI
		}
	}
	for _, r := range rs {
		if r.Type == ResourceVeth {
			return IPTypeVPCIP
		}
	}
	return ""
}

// relationHash is a digest of every key and value of Terway's bucket.
func relationHash(b *bolt.Bucket) string {
	h := sha256.New()
	var n [8]byte
	_ = b.ForEach(func(k, v []byte) error {
		for _, p := range [][]byte{k, v} {
			binary.BigEndian.PutUint64(n[:], uint64(len(p)))
			h.Write(n[:])
			h.Write(p)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}
