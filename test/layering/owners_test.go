package layering

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// handWritten calls fn for every hand-written non-test Go file of the repository
// (generated code, test files and build output left out), by its path from the root.
func handWritten(t *testing.T, fn func(path string, src []byte)) {
	t.Helper()
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if path == root {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || rel == filepath.Join("pkg", "generated") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(filepath.ToSlash(rel), src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoLongFiles: no hand-written non-test file grows over 500 lines but the kernel
// (TCX) program of the ARP responder, which is one long list of instructions.
func TestNoLongFiles(t *testing.T) {
	const limit = 500
	allowed := map[string]bool{"pkg/node/arp/kernel.go": true}
	n := 0
	handWritten(t, func(path string, src []byte) {
		n++
		if lines := bytes.Count(src, []byte("\n")); lines > limit && !allowed[path] {
			t.Errorf("%s has %d lines, over %d: split it along a seam, one job per file", path, lines, limit)
		}
	})
	if n < 100 {
		t.Fatalf("found only %d Go files", n)
	}
}

// TestStatusWritesGoThroughTheWriter: status reaches the API server only through
// pkg/status's Writer (always with the UID, Events by one policy;
// docs/design.md#status-and-events), and the one ElasticIP status update that has its
// own reason (pkg/controllers/elasticip/status.go). A copied write tail fails here.
func TestStatusWritesGoThroughTheWriter(t *testing.T) {
	allowed := map[string]bool{"pkg/status/writer.go": true, "pkg/controllers/elasticip/status.go": true}
	seen := 0
	handWritten(t, func(path string, src []byte) {
		// Production code only: test harnesses play the kubelet and write Pod status.
		if !strings.HasPrefix(path, "pkg/") && !strings.HasPrefix(path, "cmd/") {
			return
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, 0)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "ApplyStatus" && sel.Sel.Name != "UpdateStatus" {
				return true
			}
			seen++
			if !allowed[path] {
				t.Errorf("%s calls %s: write status through a status.Writer (pkg/status/kinds.go)", path, sel.Sel.Name)
			}
			return true
		})
	})
	if seen < 2 {
		t.Fatalf("found %d status writes, expected the Writer's and the ElasticIP controller's", seen)
	}
}
