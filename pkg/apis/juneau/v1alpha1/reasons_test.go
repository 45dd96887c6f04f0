package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// TestEveryReasonHasASeverity: each Reason and Event constant of the package is
// declared in severities, so no Event gets its type by accident.
func TestEveryReasonHasASeverity(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, pkg := range pkgs {
		for _, file := range pkg.Files {
			for _, decl := range file.Decls {
				gen, ok := decl.(*ast.GenDecl)
				if !ok || gen.Tok != token.CONST {
					continue
				}
				for _, spec := range gen.Specs {
					for i, name := range spec.(*ast.ValueSpec).Names {
						if !strings.HasPrefix(name.Name, "Reason") && !strings.HasPrefix(name.Name, "Event") {
							continue
						}
						lit, ok := spec.(*ast.ValueSpec).Values[i].(*ast.BasicLit)
						if !ok {
							t.Errorf("%s is not a string literal", name.Name)
							continue
						}
						seen++
						if _, ok := severities[strings.Trim(lit.Value, `"`)]; !ok {
							t.Errorf("%s has no severity: declare it in severities", name.Name)
						}
					}
				}
			}
		}
	}
	if seen < 20 {
		t.Errorf("found only %d reasons", seen)
	}
	if EventType("NeverDeclared") != "Warning" || EventType(ReasonReady) != "Normal" || EventType(ReasonConflict) != "Warning" {
		t.Error("EventType does not follow severities")
	}
}
