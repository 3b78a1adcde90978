package rpc

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// updateGolden rewrites the golden files from the compiled descriptors.
// Only for a deliberate, wire-compatible change (a new RPC or message):
// review the diff of the text dump before committing it.
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/wire.golden.{txt,binpb} from the compiled descriptors")

const (
	goldenText = "testdata/wire.golden.txt"
	goldenSet  = "testdata/wire.golden.binpb"
)

// wireFiles are the files whose descriptors are the wire contract with
// Terway's plugin and daemon: their packages, names, numbers and types
// must not change when the Go package moves or is regenerated.
func wireFiles() []protoreflect.FileDescriptor {
	return []protoreflect.FileDescriptor{File_rpc_proto, File_tracing_proto}
}

// wireSet is the descriptors of wireFiles as a FileDescriptorSet with
// the go_package option cleared: the Go import path is the one thing a
// move may change, and it is not on the wire.
func wireSet() *descriptorpb.FileDescriptorSet {
	set := &descriptorpb.FileDescriptorSet{}
	for _, f := range wireFiles() {
		fp := protodesc.ToFileDescriptorProto(f)
		fp.SourceCodeInfo = nil
		if fp.Options != nil {
			fp.Options.GoPackage = nil
			if proto.Size(fp.Options) == 0 {
				fp.Options = nil
			}
		}
		set.File = append(set.File, fp)
	}
	return set
}

// TestWireDescriptorsUnchanged compares the compiled descriptors of
// rpc.proto and tracing.proto with the golden ones recorded from
// daemon/rpc before the package moved to rpc/: every file, message,
// field (name, number, cardinality, type), enum value and service method
// (request and response types, streaming) must be the same; only
// go_package may differ. The text dump makes a failure readable; the
// serialized set catches what the dump does not spell out (options,
// JSON names, reserved ranges).
func TestWireDescriptorsUnchanged(t *testing.T) {
	set := wireSet()
	dump := dumpFiles(wireFiles())
	if *updateGolden {
		bin, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(goldenText), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenText, []byte(dump), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenSet, bin, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s and %s", goldenText, goldenSet)
		return
	}
	wantText, err := os.ReadFile(goldenText)
	if err != nil {
		t.Fatalf("%v (run go test -run TestWireDescriptorsUnchanged -update-golden only for a deliberate, compatible change)", err)
	}
	if got := dump; got != string(wantText) {
		t.Errorf("the wire descriptors differ from %s:\n%s", goldenText, lineDiff(string(wantText), got))
	}
	bin, err := os.ReadFile(goldenSet)
	if err != nil {
		t.Fatal(err)
	}
	want := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(bin, want); err != nil {
		t.Fatalf("%s: %v", goldenSet, err)
	}
	if !proto.Equal(set, want) {
		t.Errorf("the serialized descriptors differ from %s (go_package ignored):\ngot:\n%s\nwant:\n%s",
			goldenSet, prototext.Format(set), prototext.Format(want))
	}
}

// TestGoPackageIsThisPackage: the generated code was regenerated from
// .proto files whose go_package names this package's import path (a
// move that edits the .proto but not the generated code, or the
// reverse, fails here).
func TestGoPackageIsThisPackage(t *testing.T) {
	want := reflect.TypeOf(AllocIPRequest{}).PkgPath() + ";rpc"
	for _, f := range append(wireFiles(), File_details_proto) {
		fp := protodesc.ToFileDescriptorProto(f)
		if got := fp.GetOptions().GetGoPackage(); got != want {
			t.Errorf("%s: go_package %q, want %q (run make proto)", f.Path(), got, want)
		}
	}
}

// dumpFiles renders files canonically: one line per file, message,
// field, enum value and method, in declaration order, with every
// attribute that is on the wire or in the generated API.
func dumpFiles(files []protoreflect.FileDescriptor) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "file %s package=%s syntax=%s\n", f.Path(), f.Package(), f.Syntax())
		imps := f.Imports()
		for i := 0; i < imps.Len(); i++ {
			fmt.Fprintf(&b, "  import %s\n", imps.Get(i).Path())
		}
		dumpEnums(&b, "  ", f.Enums())
		dumpMessages(&b, "  ", f.Messages())
		svcs := f.Services()
		for i := 0; i < svcs.Len(); i++ {
			s := svcs.Get(i)
			fmt.Fprintf(&b, "  service %s\n", s.FullName())
			ms := s.Methods()
			for j := 0; j < ms.Len(); j++ {
				m := ms.Get(j)
				fmt.Fprintf(&b, "    rpc %s(%s%s) returns (%s%s)\n", m.Name(),
					stream(m.IsStreamingClient()), m.Input().FullName(),
					stream(m.IsStreamingServer()), m.Output().FullName())
			}
		}
	}
	return b.String()
}

func stream(on bool) string {
	if on {
		return "stream "
	}
	return ""
}

func dumpEnums(b *strings.Builder, indent string, es protoreflect.EnumDescriptors) {
	for i := 0; i < es.Len(); i++ {
		e := es.Get(i)
		fmt.Fprintf(b, "%senum %s\n", indent, e.FullName())
		vs := e.Values()
		for j := 0; j < vs.Len(); j++ {
			fmt.Fprintf(b, "%s  %s = %d\n", indent, vs.Get(j).Name(), vs.Get(j).Number())
		}
		dumpReserved(b, indent+"  ", e.ReservedNames(), e.ReservedRanges())
	}
}

func dumpMessages(b *strings.Builder, indent string, ms protoreflect.MessageDescriptors) {
	for i := 0; i < ms.Len(); i++ {
		m := ms.Get(i)
		fmt.Fprintf(b, "%smessage %s\n", indent, m.FullName())
		fs := m.Fields()
		for j := 0; j < fs.Len(); j++ {
			f := fs.Get(j)
			typ := f.Kind().String()
			switch f.Kind() {
			case protoreflect.MessageKind, protoreflect.GroupKind:
				typ += " " + string(f.Message().FullName())
			case protoreflect.EnumKind:
				typ += " " + string(f.Enum().FullName())
			}
			var attrs []string
			if f.IsMap() {
				attrs = append(attrs, "map")
			}
			if f.HasPresence() {
				attrs = append(attrs, "presence")
			}
			if o := f.ContainingOneof(); o != nil {
				attrs = append(attrs, "oneof="+string(o.Name()))
			}
			if f.IsPacked() {
				attrs = append(attrs, "packed")
			}
			attrs = append(attrs, "json="+f.JSONName())
			sort.Strings(attrs)
			fmt.Fprintf(b, "%s  %s %s %s = %d [%s]\n", indent, f.Cardinality(), typ, f.Name(), f.Number(), strings.Join(attrs, " "))
		}
		dumpReserved(b, indent+"  ", m.ReservedNames(), m.ReservedRanges())
		dumpEnums(b, indent+"  ", m.Enums())
		dumpMessages(b, indent+"  ", m.Messages())
	}
}

// reservedRanges is what enum and field reserved ranges have in common.
type reservedRanges interface {
	Len() int
}

func dumpReserved(b *strings.Builder, indent string, names protoreflect.Names, ranges reservedRanges) {
	for i := 0; i < names.Len(); i++ {
		fmt.Fprintf(b, "%sreserved %q\n", indent, names.Get(i))
	}
	switch r := ranges.(type) {
	case protoreflect.FieldRanges:
		for i := 0; i < r.Len(); i++ {
			fmt.Fprintf(b, "%sreserved %d to %d\n", indent, r.Get(i)[0], r.Get(i)[1]-1)
		}
	case protoreflect.EnumRanges:
		for i := 0; i < r.Len(); i++ {
			fmt.Fprintf(b, "%sreserved %d to %d\n", indent, r.Get(i)[0], r.Get(i)[1])
		}
	}
}

// lineDiff lists the lines only in want (-) and only in got (+), enough
// to see which name or number moved.
func lineDiff(want, got string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := count(want), count(got)
	var out bytes.Buffer
	for _, l := range strings.Split(want, "\n") {
		if g[l] > 0 {
			g[l]--
			continue
		}
		fmt.Fprintf(&out, "- %s\n", l)
	}
	for _, l := range strings.Split(got, "\n") {
		if w[l] > 0 {
			w[l]--
			continue
		}
		fmt.Fprintf(&out, "+ %s\n", l)
	}
	return out.String()
}
