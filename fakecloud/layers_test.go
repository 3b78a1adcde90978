package fakecloud_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestWorldStaysTheModel keeps the package's two layers apart. The world
// (world*.go: state, invariants, persistence) may not import the wire
// format or HTTP, nor use anything the API layer (every other file but
// the shared errors.go, admintypes.go and doc.go) declares: requests are
// decoded before they reach it and responses rendered after, so a handler
// stays decode, one world call, render.
func TestWorldStaysTheModel(t *testing.T) {
	fset := token.NewFileSet()
	world, api := map[string]*ast.File{}, map[string]*ast.File{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || slices.Contains([]string{"errors.go", "admintypes.go", "doc.go"}, name) {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(name, "world") {
			world[name] = f
		} else {
			api[name] = f
		}
	}
	if len(world) < 10 || len(api) < 10 {
		t.Fatalf("found %d world and %d API files: run from the package directory", len(world), len(api))
	}
	apiNames := topLevelNames(api)
	for name, f := range world {
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "net/http" || strings.HasSuffix(p, "/fakecloud/wire") {
				t.Errorf("%s imports %s: the world takes decoded requests, not wire ones", name, p)
			}
		}
		for _, id := range packageLevelUses(f) {
			if apiNames[id.Name] {
				t.Errorf("%s: %s is the API layer's", fset.Position(id.Pos()), id.Name)
			}
		}
	}
}

// topLevelNames lists what files declare at package level (methods
// excluded: they are reached through their receiver's type).
func topLevelNames(files map[string]*ast.File) map[string]bool {
	names := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return names
}

// packageLevelUses lists the identifiers of f that the file itself does
// not resolve (package-level and universe names), leaving out selected
// names (x.name) and the field names of composite literals.
func packageLevelUses(f *ast.File) []*ast.Ident {
	skip := map[*ast.Ident]bool{}
	var out []*ast.Ident
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			skip[n.Sel] = true
		case *ast.CompositeLit:
			for _, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if id, ok := kv.Key.(*ast.Ident); ok {
						skip[id] = true
					}
				}
			}
		case *ast.Ident:
			if n.Obj == nil && !skip[n] && n.Name != "_" {
				out = append(out, n)
			}
		}
		return true
	})
	return out
}
