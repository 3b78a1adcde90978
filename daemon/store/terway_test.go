package store

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Two records as Terway writes them to ResRelation.db, bucket "relation".
var terwayRecords = map[string]string{
	// Terway main: ENIMultiIP, full ResourceItem, ContainerID and NetConf
	// (the JSON of the AllocIP NetConfs), PodInfo with fields we ignore.
	"default/nginx-7d9c8b": `{"Resources":[{"type":"eniIp","id":"00:16:3e:0a:1b:2c.192.168.0.5",` +
		`"extra_eip_info":null,"eni_id":"eni-2zeabc123","eni_mac":"00:16:3e:0a:1b:2c","ipv4":"192.168.0.5","ipv6":""}],` +
		`"PodInfo":{"Name":"nginx-7d9c8b","Namespace":"default","TcIngress":0,"TcEgress":0,` +
		`"PodNetworkType":"ENIMultiIP","PodIP":"","PodIPs":{"IPv4":"192.168.0.5","IPv6":null},"SandboxExited":false,` +
		`"EipInfo":{"PodEip":false,"PodEipID":"","PodEipIP":"","PodEipBandWidth":0,"PodEipChargeType":"",` +
		`"PodEipISP":"","PodEipPoolID":"","PodEipBandwidthPackageID":""},"IPStickTime":0,"PodENI":false,` +
		`"PodUID":"6f1c0e3a-1b2c-4d5e-8f90-0123456789ab","NetworkPriority":"","ERdma":false},` +
		`"NetNs":"/var/run/netns/cni-1a2b3c4d","ContainerID":"4f0e9a7c2b1d",` +
		`"NetConf":"[{\"BasicInfo\":{\"PodIP\":{\"IPv4\":\"192.168.0.5\"}},\"ENIInfo\":{\"MAC\":\"00:16:3e:0a:1b:2c\"},\"IfName\":\"eth0\",\"DefaultRoute\":true}]"}`,
	// Terway v1.2.5: a StatefulSet pod, dual stack; ResourceItem with only
	// type/id (MAC and IPs live in the id), no ContainerID/NetConf.
	"db/mysql-0": `{"Resources":[{"type":"eniIp","id":"00:16:3e:0d:0e:0f.192.168.1.20-fd00:192:168:1::14","extra_eip_info":null}],` +
		`"PodInfo":{"Name":"mysql-0","Namespace":"db","TcIngress":1048576,"TcEgress":0,"PodNetworkType":"ENIMultiIP",` +
		`"PodIPs":{"IPv4":"","IPv6":""},"SandboxExited":false,"IPStickTime":300000000000,"PodENI":false,"PodUID":"9a8b7c6d"},` +
		`"NetNs":"/proc/4242/ns/net"}`,
}

// writeBolt creates a bbolt file with the given buckets and records.
func writeBolt(t *testing.T, path string, buckets map[string]map[string]string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		for name, recs := range buckets {
			b, err := tx.CreateBucketIfNotExists([]byte(name))
			if err != nil {
				return err
			}
			for k, v := range recs {
				if err := b.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func readBucket(t *testing.T, path, bucket string) map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	if err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return errors.New("no bucket " + bucket)
		}
		return b.ForEach(func(k, v []byte) error { out[string(k)] = string(v); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTerwayDB(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "terway")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ResRelation.db")
	writeBolt(t, path, map[string]map[string]string{"relation": terwayRecords})
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	// Refused without the import, and left untouched.
	_, err = Open(path, Options{NoSync: true})
	if !errors.Is(err, ErrTerwayDB) {
		t.Fatalf("Open of a Terway DB: err = %v, want ErrTerwayDB", err)
	}
	for _, want := range []string{path, "Terway", "relation", "ImportTerway", "move the file away"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not mention %q", err, want)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a refused Terway DB was modified")
	}

	// Imported with it.
	s, err := Open(path, Options{NoSync: true, ImportTerway: true, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatalf("Open with ImportTerway: %v", err)
	}
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], "imported 2 record(s)") {
		t.Errorf("warnings = %q, want one about the import", w)
	}
	want := []Attachment{
		{
			PodNamespace: "db", PodName: "mysql-0", PodUID: "9a8b7c6d", Netns: "/proc/4242/ns/net", IfName: "eth0",
			IPType: IPTypeENIMultiIP,
			Resources: []Resource{{Type: ResourceENIIP, ID: "00:16:3e:0d:0e:0f.192.168.1.20-fd00:192:168:1::14",
				ENIMAC: "00:16:3e:0d:0e:0f", IPv4: "192.168.1.20", IPv6: "fd00:192:168:1::14"}},
		},
		{
			PodNamespace: "default", PodName: "nginx-7d9c8b", PodUID: "6f1c0e3a-1b2c-4d5e-8f90-0123456789ab",
			ContainerID: "4f0e9a7c2b1d", Netns: "/var/run/netns/cni-1a2b3c4d", IfName: "eth0", IPType: IPTypeENIMultiIP,
			Resources: []Resource{{Type: ResourceENIIP, ID: "00:16:3e:0a:1b:2c.192.168.0.5",
				ENIID: "eni-2zeabc123", ENIMAC: "00:16:3e:0a:1b:2c", IPv4: "192.168.0.5"}},
			NetConf: json.RawMessage(`[{"BasicInfo":{"PodIP":{"IPv4":"192.168.0.5"}},"ENIInfo":{"MAC":"00:16:3e:0a:1b:2c"},"IfName":"eth0","DefaultRoute":true}]`),
		},
	}
	got, err := s.List()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("imported attachments:\n got %+v (%v)\nwant %+v", got, err, want)
	}
	// The imported store is an ordinary store.
	if err := s.Delete("db", "mysql-0"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Terway's bucket is still there, byte for byte.
	if rel := readBucket(t, path, "relation"); !reflect.DeepEqual(rel, terwayRecords) {
		t.Errorf("relation bucket changed by the import: %v", rel)
	}
	if meta := readBucket(t, path, "meta"); meta["schema"] != "2" || meta["writer"] != "terway-sim" ||
		meta["terway_imported_records"] != "2" || meta["terway_imported_at"] != "2026-03-04T05:06:07Z" {
		t.Errorf("meta after import = %v", meta)
	}

	// Reopened (import flag or not): read as our own schema, not imported
	// again — the deleted record stays deleted.
	s = openT(t, path, Options{NoSync: true})
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("warnings on reopen: %v", w)
	}
	if got, _ := s.List(); len(got) != 1 || got[0].PodName != "nginx-7d9c8b" {
		t.Errorf("after reopen: %+v", got)
	}
	_ = s.Close()

	// Terway writing to the file afterwards is noticed.
	writeBolt(t, path, map[string]map[string]string{"relation": {"default/new": `{"Resources":[]}`}})
	s = openT(t, path, Options{NoSync: true})
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], "changed since it was imported") {
		t.Errorf("warnings after Terway wrote to the file: %q", w)
	}
	if _, err := s.Get("default", "new"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a relation record written after the import was read: %v", err)
	}
}

func TestConvertTerway(t *testing.T) {
	a, err := convertTerway("kube-system/coredns-1", []byte(
		`{"Resources":[{"type":"eni","id":"00:16:3e:aa:bb:cc","eni_id":"eni-1"}],"NetNs":"/var/run/netns/x","Future":{"a":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.IPType != IPTypeVPCENI || a.Resources[0].ENIMAC != "00:16:3e:aa:bb:cc" || a.IfName != "eth0" {
		t.Errorf("exclusive ENI without PodInfo: %+v", a)
	}
	a, err = convertTerway("default/vpc", []byte(`{"Resources":[{"type":"veth","id":"cali1234567890a"}]}`))
	if err != nil || a.IPType != IPTypeVPCIP {
		t.Errorf("veth-only record: %+v, %v", a, err)
	}

	bad := map[string][2]string{
		"no slash in key":    {"nokey", `{"Resources":[]}`},
		"not JSON":           {"a/b", `{"Resources":`},
		"not an object":      {"a/b", `[1,2]`},
		"null":               {"a/b", `null`},
		"unknown type":       {"a/b", `{"Resources":[{"type":"trunk","id":"x"}],"PodInfo":{"PodNetworkType":"VPCENI"}}`},
		"bad eniIp id":       {"a/b", `{"Resources":[{"type":"eniIp","id":"00:16:3e:aa:bb:cc"}]}`},
		"bad eniIp address":  {"a/b", `{"Resources":[{"type":"eniIp","id":"00:16:3e:aa:bb:cc.300.1.1.1"}]}`},
		"unknown net type":   {"a/b", `{"Resources":[],"PodInfo":{"PodNetworkType":"Trunk"}}`},
		"nothing to infer":   {"a/b", `{"Resources":[]}`},
		"PodInfo other pod":  {"a/b", `{"Resources":[],"PodInfo":{"Namespace":"a","Name":"c","PodNetworkType":"VPCIP"}}`},
		"NetConf not JSON":   {"a/b", `{"Resources":[],"PodInfo":{"PodNetworkType":"VPCIP"},"NetConf":"{"}`},
		"empty resource id":  {"a/b", `{"Resources":[{"type":"eni","id":""}]}`},
		"two IPv4 in eni id": {"a/b", `{"Resources":[{"type":"eniIp","id":"00:16:3e:aa:bb:cc.1.1.1.1-2.2.2.2"}]}`},
	}
	for name, c := range bad {
		if a, err := convertTerway(c[0], []byte(c[1])); err == nil {
			t.Errorf("%s: converted to %+v", name, a)
		}
	}

	// One bad record refuses the whole import, naming the record, and
	// writes nothing.
	path := filepath.Join(t.TempDir(), "ResRelation.db")
	writeBolt(t, path, map[string]map[string]string{"relation": {
		"default/ok":  terwayRecords["db/mysql-0"],
		"default/bad": `{"Resources":[{"type":"trunk","id":"x"}]}`,
	}})
	_, err = Open(path, Options{NoSync: true, ImportTerway: true})
	if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), `"default/bad"`) || !strings.Contains(err.Error(), path) {
		t.Fatalf("import of a bad record: %v", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("meta")) != nil || tx.Bucket([]byte("attachments")) != nil {
			t.Error("a failed import left buckets behind")
		}
		return nil
	})
	_ = db.Close()
}

func TestRefusals(t *testing.T) {
	good := func(t *testing.T, path string) {
		s, err := Open(path, Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Put(sampleAttachment("ns", "a")); err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
	}
	patch := func(bucket, key, value string) func(*testing.T, string) {
		return func(t *testing.T, path string) {
			good(t, path)
			writeBolt(t, path, map[string]map[string]string{bucket: {key: value}})
		}
	}
	cases := []struct {
		name    string
		prepare func(t *testing.T, path string)
		is      error
		says    []string
	}{
		{"newer schema", patch("meta", "schema", "3"), ErrNewerSchema,
			[]string{"written by a newer daemon (schema 3 > 2); refusing to read it"}},
		{"unreadable schema", patch("meta", "schema", "one"), ErrUnknownFormat, []string{`schema version "one"`}},
		{"other writer", patch("meta", "writer", "someone-else"), ErrUnknownFormat, []string{`"someone-else"`}},
		{"unknown bucket in our schema", patch("extra", "k", "v"), ErrUnknownFormat, []string{`"extra"`}},
		{"corrupt record", patch("attachments", "ns/a", `{"podNamespace":`), ErrUnknownFormat,
			[]string{`"attachments"`, `"ns/a"`}},
		{"record with unknown field", patch("attachments", "ns/b",
			`{"podNamespace":"ns","podName":"b","ipType":"VPCIP","color":"red"}`), ErrUnknownFormat, []string{`"ns/b"`, "color"}},
		{"record under the wrong key", patch("intents", "k1", `{"key":"k2","kind":"CreateENI"}`), ErrUnknownFormat,
			[]string{`"k1"`, `"k2"`}},
		{"text file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("hello, this is not a database\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrUnknownFormat, []string{"not a bbolt database"}},
		{"random bytes", func(t *testing.T, path string) {
			garbage := make([]byte, 64<<10)
			_, _ = rand.Read(garbage)
			if err := os.WriteFile(path, garbage, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrUnknownFormat, []string{"not a bbolt database"}},
		{"unknown buckets", func(t *testing.T, path string) {
			writeBolt(t, path, map[string]map[string]string{"widgets": {"a": "b"}, "gadgets": {}})
		}, ErrUnknownFormat, []string{`"widgets"`, `"gadgets"`}},
		{"Terway pod.db", func(t *testing.T, path string) {
			writeBolt(t, path, map[string]map[string]string{"pods": {"default/a": `{"Name":"a"}`}})
		}, ErrUnknownFormat, []string{"pod.db"}},
		{"Terway relation plus more", func(t *testing.T, path string) {
			writeBolt(t, path, map[string]map[string]string{"relation": terwayRecords, "pods": {}})
		}, ErrUnknownFormat, []string{`"relation"`, `"pods"`}},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, ErrUnknownFormat, []string{"not a regular file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			c.prepare(t, path)
			var before []byte
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
				before, _ = os.ReadFile(path)
				if err := os.Chmod(path, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Open(path, Options{NoSync: true, ImportTerway: true, Timeout: time.Second})
			if err == nil {
				_ = s.Close()
				t.Fatal("Open accepted it")
			}
			if !errors.Is(err, c.is) {
				t.Errorf("err = %v, want %v", err, c.is)
			}
			for _, w := range append(c.says, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q does not say %q", err, w)
				}
			}
			if before != nil {
				after, _ := os.ReadFile(path)
				fi, _ := os.Stat(path)
				if !bytes.Equal(before, after) || fi.Mode().Perm() != 0o644 {
					t.Error("a refused file was modified")
				}
			}
			t.Logf("%v", err)
		})
	}
}
