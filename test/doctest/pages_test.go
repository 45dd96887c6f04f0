package doctest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/loutres/juneau/test/framework"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestEveryBlockIsMarked: every fenced block of the pages says how it is tested (or
// why it is not), in a marker the package can read; the pages the real-cluster tier
// runs are the ones Pages lists.
func TestEveryBlockIsMarked(t *testing.T) {
	root := repoRoot(t)
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, p := range pages {
		blocks, err := ParseFile(root, p)
		if err != nil {
			t.Error(err)
		}
		for _, b := range blocks {
			counts[b.Directive]++
		}
	}
	t.Logf("blocks by directive: %v", counts)
	if counts[Run]+counts[Expect]+counts[Apply] < 40 {
		t.Errorf("only %d blocks run; the pages' steps are not under test", counts[Run]+counts[Expect]+counts[Apply])
	}
}

// TestFileBlocks: a block that shows a file of the repository shows it as it is.
func TestFileBlocks(t *testing.T) {
	root := repoRoot(t)
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pages {
		blocks, _ := ParseFile(root, p)
		for _, b := range blocks {
			if b.Directive != File {
				continue
			}
			n++
			if err := CheckFile(root, b); err != nil {
				t.Errorf("%s: %v", b.Where(), err)
			}
		}
	}
	if n == 0 {
		t.Error("no file blocks")
	}
}

var printerColumns = regexp.MustCompile("^\\*\\*Printer columns:\\*\\* `([^`]*)`")

// TestPrinterColumns: the printer columns docs/resources.md gives for each kind are
// the CRDs'.
func TestPrinterColumns(t *testing.T) {
	root := repoRoot(t)
	crds := map[string]string{} // kind -> "NAME COL ..."
	files, err := filepath.Glob(filepath.Join(root, "manifests", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Names    struct{ Kind string }
				Versions []struct {
					AdditionalPrinterColumns []struct{ Name string } `json:"additionalPrinterColumns"`
				}
			}
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		cols := []string{"NAME"}
		for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			cols = append(cols, c.Name)
		}
		crds[crd.Spec.Names.Kind] = strings.Join(cols, " ")
	}
	data, err := os.ReadFile(filepath.Join(root, "docs", "resources.md"))
	if err != nil {
		t.Fatal(err)
	}
	kind := ""
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, ok := strings.CutPrefix(line, "## "); ok {
			kind = strings.TrimSpace(k)
		}
		if m := printerColumns.FindStringSubmatch(line); m != nil {
			seen[kind] = true
			if want, ok := crds[kind]; !ok || m[1] != want {
				t.Errorf("docs/resources.md, %s: printer columns %q, the CRD has %q", kind, m[1], want)
			}
		}
	}
	for kind := range crds {
		if !seen[kind] {
			t.Errorf("docs/resources.md gives no printer columns for %s", kind)
		}
	}
}

// logTable finds the rows of the table of log lines in docs/operations.md:
// | `message` | component | -v | ... |
var logRow = regexp.MustCompile("^\\| `([^`]+)` \\| ([a-z ,]+) \\| (\\d) \\|")

// TestQuotedLogLines: every log line docs/operations.md quotes is logged by the code,
// at the verbosity it gives, and the manifests run every component at a verbosity
// that shows it.
func TestQuotedLogLines(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	levels := logCalls(t, root)
	manifestLevel := manifestVerbosity(t, root)
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		m := logRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n++
		msg := m[1]
		want, _ := strconv.Atoi(m[3])
		have, ok := levels[msg]
		switch {
		case !ok:
			t.Errorf("docs/operations.md quotes the log line %q, which no code logs", msg)
		case !have[want]:
			t.Errorf("docs/operations.md says %q is logged at -v=%d; the code logs it at %v", msg, want, levelsOf(have))
		case want > manifestLevel:
			t.Errorf("%q needs -v=%d; the manifests run at -v=%d", msg, want, manifestLevel)
		}
	}
	if n < 8 {
		t.Errorf("found %d quoted log lines in docs/operations.md", n)
	}
}

func levelsOf(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

// logCalls maps each message logged with a constant string to the verbosities it is
// logged at: .Info("msg") and .Error(err, "msg") at 0, .V(n).Info("msg") at n.
func logCalls(t *testing.T, root string) map[string]map[int]bool {
	t.Helper()
	out := map[string]map[int]bool{}
	fset := token.NewFileSet()
	for _, dir := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "/generated/") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				arg := -1
				switch sel.Sel.Name {
				case "Info":
					arg = 0
				case "Error":
					arg = 1
				default:
					return true
				}
				if len(call.Args) <= arg {
					return true
				}
				lit, ok := call.Args[arg].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				msg, _ := strconv.Unquote(lit.Value)
				level := 0
				if v, ok := sel.X.(*ast.CallExpr); ok {
					if vs, ok := v.Fun.(*ast.SelectorExpr); ok && vs.Sel.Name == "V" && len(v.Args) == 1 {
						if l, ok := v.Args[0].(*ast.BasicLit); ok {
							level, _ = strconv.Atoi(l.Value)
						}
					}
				}
				if out[msg] == nil {
					out[msg] = map[int]bool{}
				}
				out[msg][level] = true
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

var verbosityArg = regexp.MustCompile(`^\s*- -v=(\d)\s*$`)

// manifestVerbosity is the -v every juneau container of the manifests runs with (the
// same for all, or the test fails).
func manifestVerbosity(t *testing.T, root string) int {
	t.Helper()
	level := -1
	for _, f := range []string{"20-controller.yaml", "30-node.yaml", "webhook/deployment.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "manifests", f))
		if err != nil {
			t.Fatal(err)
		}
		found := -1
		for _, line := range strings.Split(string(data), "\n") {
			if m := verbosityArg.FindStringSubmatch(line); m != nil {
				found, _ = strconv.Atoi(m[1])
			}
		}
		switch {
		case found < 0:
			t.Errorf("manifests/%s: no -v argument", f)
		case level >= 0 && found != level:
			t.Errorf("manifests/%s runs at -v=%d, others at -v=%d", f, found, level)
		}
		level = max(level, found)
	}
	return level
}

func ExampleBindings_Substitute() {
	b := Bindings{"10.225.51.5": "10.225.51.7"}
	fmt.Println(b.Substitute("curl http://10.225.51.5/"))
	// Output: curl http://10.225.51.7/
}
