package config

import (
	"go/ast"
	"go/types"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/go/packages"
)

// derivedFields are fields that validate turns into others: the source
// counts as read when one of those is.
var derivedFields = map[string][]string{
	"ServiceCIDR": {"ServiceCIDRv4", "ServiceCIDRv6"},
}

// knownUnread are keys documented as implemented that nothing reads yet,
// each with where it is tracked. An entry must go when the key gets a
// reader (the test fails to say so).
var knownUnread = map[string]string{}

// notReaders are methods of Config whose use outside the package does not
// make the fields they touch read: Redacted copies all of them for a log
// line.
var notReaders = map[string]bool{"Redacted": true}

// implementedKeys parses the package documentation's lists of implemented
// keys: the bullets of "# Terway keys implemented" and of "# Extensions".
// A bullet's keys are what comes before the first ':' outside parentheses
// and quotes, parenthesised parts removed, split at commas:
//
//	//   - kube_client_qps (number >= 0, 0), kube_client_burst (int >= 0, 0): ...
//
// A key whose bullet calls it "informational" needs no reader.
func implementedKeys(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var bullets []string
	in := false
	for _, line := range strings.Split(string(doc), "\n") {
		line, ok := strings.CutPrefix(line, "//")
		if !ok {
			continue
		}
		if h, ok := strings.CutPrefix(line, " # "); ok {
			in = strings.HasPrefix(h, "Terway keys implemented") || strings.HasPrefix(h, "Extensions")
			continue
		}
		if !in {
			continue
		}
		switch {
		case strings.HasPrefix(line, "   - "):
			bullets = append(bullets, strings.TrimPrefix(line, "   - "))
		case strings.HasPrefix(line, "     ") && len(bullets) > 0:
			bullets[len(bullets)-1] += " " + strings.TrimSpace(line)
		case strings.TrimSpace(line) == "" || !strings.HasPrefix(line, "   "):
			// a paragraph, a table or a blank line ends a bullet; the
			// next "   - " starts another.
			bullets = append(bullets, "")
		}
	}
	keys := map[string]string{}
	for _, b := range bullets {
		if b == "" {
			continue
		}
		var head strings.Builder
		depth, quoted := 0, false
	scan:
		for _, r := range b {
			switch {
			case r == '"':
				quoted = !quoted
			case quoted:
			case r == '(':
				depth++
			case r == ')':
				depth--
			case r == ':' && depth == 0:
				break scan
			case depth == 0:
				head.WriteRune(r)
			}
		}
		for _, k := range strings.Split(head.String(), ",") {
			if k = strings.TrimSpace(k); k != "" {
				keys[k] = b
			}
		}
	}
	return keys
}

// TestImplementedKeysHaveReaders: every key that doc.go lists as
// implemented is read by the daemon, not only parsed. A key counts as
// read when its Config field is used in a non-test file of another
// package of the module, or inside a method of Config (or a function it
// calls) that another package uses. It type-checks the whole module with
// go/packages (about half a minute on two cores, the first time longer).
func TestImplementedKeysHaveReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and type-checks the whole module")
	}
	keys := implementedKeys(t)
	fields := keyFields()
	typ := reflect.TypeFor[Config]()
	fieldOf := map[string]string{} // Go field name → key
	for k, bullet := range keys {
		i, ok := fields[k]
		if !ok {
			t.Errorf("doc.go lists %q as implemented, but Config has no such key", k)
			continue
		}
		if strings.Contains(bullet, "informational") {
			continue
		}
		fieldOf[typ.Field(i).Name] = k
	}
	if len(fieldOf) < 40 {
		t.Fatalf("found only %d implemented keys in doc.go (%v); has its layout changed?", len(fieldOf), keys)
	}
	for k := range fields {
		if _, ok := keys[k]; !ok {
			t.Errorf("key %q is a Config field but doc.go does not list it as implemented", k)
		}
	}

	start := time.Now()
	pkgs, err := packages.Load(&packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes |
			packages.NeedTypesInfo | packages.NeedImports,
		Dir: "../..",
	}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	if n := packages.PrintErrors(pkgs); n > 0 {
		t.Fatalf("%d errors loading the module", n)
	}
	t.Logf("loaded %d packages in %v", len(pkgs), time.Since(start).Round(time.Millisecond))

	self := reflect.TypeFor[Config]().PkgPath()
	var cfgPkg *packages.Package
	for _, p := range pkgs {
		if p.PkgPath == self {
			cfgPkg = p
		}
	}
	if cfgPkg == nil {
		t.Fatalf("package %s not loaded", self)
	}
	st := cfgPkg.Types.Scope().Lookup("Config").Type().Underlying().(*types.Struct)
	isField := map[*types.Var]string{}
	for i := range st.NumFields() {
		isField[st.Field(i)] = st.Field(i).Name()
	}
	named := cfgPkg.Types.Scope().Lookup("Config").Type().(*types.Named)
	methods := map[*types.Func]bool{}
	for i := range named.NumMethods() {
		methods[named.Method(i)] = true
	}

	read := map[string][]string{}   // field → where
	roots := map[*types.Func]bool{} // methods of Config used outside
	for _, p := range pkgs {
		if p.PkgPath == self {
			continue
		}
		for id, obj := range p.TypesInfo.Uses {
			switch o := obj.(type) {
			case *types.Var:
				if f, ok := isField[o.Origin()]; ok {
					read[f] = append(read[f], p.Fset.Position(id.Pos()).String())
				}
			case *types.Func:
				if methods[o.Origin()] && !notReaders[o.Name()] {
					roots[o.Origin()] = true
				}
			}
		}
	}

	// Within the package: the fields each function uses and the functions
	// it calls, for the methods other packages use.
	uses := map[*types.Func][]string{}
	calls := map[*types.Func][]*types.Func{}
	for _, f := range cfgPkg.Syntax {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn := cfgPkg.TypesInfo.Defs[fd.Name].(*types.Func)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				switch o := cfgPkg.TypesInfo.Uses[id].(type) {
				case *types.Var:
					if name, ok := isField[o.Origin()]; ok {
						uses[fn] = append(uses[fn], name)
					}
				case *types.Func:
					if o.Pkg() == cfgPkg.Types {
						calls[fn] = append(calls[fn], o.Origin())
					}
				}
				return true
			})
		}
	}
	seen := map[*types.Func]bool{}
	var visit func(fn *types.Func)
	visit = func(fn *types.Func) {
		if seen[fn] {
			return
		}
		seen[fn] = true
		for _, name := range uses[fn] {
			read[name] = append(read[name], "Config."+fn.Name())
		}
		for _, c := range calls[fn] {
			visit(c)
		}
	}
	for fn := range roots {
		visit(fn)
	}
	for src, derived := range derivedFields {
		for _, d := range derived {
			if len(read[d]) > 0 {
				read[src] = append(read[src], "via "+d)
			}
		}
	}

	var unread []string
	for field, key := range fieldOf {
		why, known := knownUnread[key]
		switch {
		case len(read[field]) == 0 && known:
			t.Logf("known: %s is not read (%s)", key, why)
		case len(read[field]) == 0:
			unread = append(unread, key+" ("+field+")")
		case known:
			t.Errorf("%s is read now (%s); take it off knownUnread", key, read[field][0])
		}
	}
	slices.Sort(unread)
	for _, u := range unread {
		t.Errorf("doc.go lists %s as implemented, but nothing outside daemon/config reads it", u)
	}
}
