// Package layout checks the shape of the code base: how long its functions are and
// which way the controller's packages import each other.
package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	module = "github.com/llamastack/llama-stack-controller"
	// maxFunctionLines is the longest a hand-written function in pkg/ may be.
	maxFunctionLines = 80
)

// sources parses the hand-written non-test Go files under dir (generated code left
// out), by package directory relative to the repository, into fset.
func sources(t *testing.T, fset *token.FileSet, dir string) map[string][]*ast.File {
	t.Helper()
	byDir := map[string][]*ast.File{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "generated" {
			return filepath.SkipDir
		}
		name := d.Name()
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "zz_generated") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, err := filepath.Rel("../..", filepath.Dir(path))
		if err != nil {
			return err
		}
		byDir[filepath.ToSlash(rel)] = append(byDir[filepath.ToSlash(rel)], f)
		return nil
	})
	require.NoError(t, err)
	return byDir
}

// No hand-written function in pkg/ is over maxFunctionLines lines.
func TestNoLongFunctions(t *testing.T) {
	fset := token.NewFileSet()
	byDir := sources(t, fset, "../../pkg")
	require.Contains(t, byDir, "pkg/controller")
	lines := func(n ast.Node) int { return fset.Position(n.End()).Line - fset.Position(n.Pos()).Line + 1 }
	for _, files := range byDir {
		for _, f := range files {
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil && lines(fn) > maxFunctionLines {
					t.Errorf("%s: %s is %d lines; split it (at most %d)", fset.Position(fn.Pos()).Filename, fn.Name.Name, lines(fn), maxFunctionLines)
				}
			}
		}
	}
}

// The packages under pkg/controller import one way: a package inside it never imports
// pkg/controller or a package that contains it.
func TestControllerPackagesImportOneWay(t *testing.T) {
	byDir := sources(t, token.NewFileSet(), "../../pkg/controller")
	require.Contains(t, byDir, "pkg/controller")
	for dir, files := range byDir {
		for _, f := range files {
			for _, imp := range f.Imports {
				path, err := strconv.Unquote(imp.Path.Value)
				require.NoError(t, err)
				target, ok := strings.CutPrefix(path, module+"/")
				if !ok || target == dir {
					continue
				}
				assert.False(t, strings.HasPrefix(dir, target+"/"),
					"%s imports %s, a package that contains it: imports point from the controller down to its parts", dir, path)
			}
		}
	}
}
