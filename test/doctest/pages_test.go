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

func repoRoot(t *testing.T) string { return framework.RepoRootOf(t) }

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

// logRow is a row of the table of log lines in docs/operations.md:
// | `message` | component | -v | ... |
var logRow = regexp.MustCompile("^\\| `([^`]+)` \\| ([a-z ,]+) \\| (\\d) \\|")

// installedAt is the sentence of docs/operations.md giving the manifests' verbosity.
var installedAt = regexp.MustCompile("as\\s+installed,\\s+every\\s+component\\s+runs\\s+at\\s+`-v=(\\d)`")

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
	if m := installedAt.FindStringSubmatch(string(data)); m == nil || m[1] != strconv.Itoa(manifestLevel) {
		t.Errorf("docs/operations.md says the manifests run at %v; they run at -v=%d", m, manifestLevel)
	}
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
			// Loggers kept in a variable: v := logger.V(4); v.Info("...").
			leveled := map[string]int{}
			ast.Inspect(f, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
					return true
				}
				id, ok1 := as.Lhs[0].(*ast.Ident)
				if l, ok2 := verbosity(as.Rhs[0]); ok1 && ok2 {
					leveled[id.Name] = l
				}
				return true
			})
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
				level, _ := verbosity(sel.X)
				if id, ok := sel.X.(*ast.Ident); ok {
					level = leveled[id.Name]
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

// verbosity reads x.V(n) with a constant n.
func verbosity(e ast.Expr) (int, bool) {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return 0, false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "V" || len(call.Args) != 1 {
		return 0, false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok {
		return 0, false
	}
	l, err := strconv.Atoi(lit.Value)
	return l, err == nil
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

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLinks: every relative link of the pages names a file of the repository and, with
// a #fragment, a heading of that page (as GitHub makes anchors of headings).
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		data, _ := os.ReadFile(path)
		inFence := false
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if m := headingLine.FindStringSubmatch(line); m != nil && !inFence {
				slug := Slug(m[1])
				for i := 0; a[slug]; i++ {
					slug = fmt.Sprintf("%s-%d", Slug(m[1]), i+1)
				}
				a[slug] = true
			}
		}
		anchors[path] = a
		return a
	}
	n := 0
	for _, p := range pages {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			file, frag, _ := strings.Cut(target, "#")
			path := filepath.Join(root, p)
			if file != "" {
				path = filepath.Join(filepath.Dir(path), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", p, target)
				continue
			}
			if frag != "" && !anchorsOf(path)[frag] {
				t.Errorf("%s links to %s: no heading of that page has the anchor #%s", p, target, frag)
			}
		}
	}
	if n < 50 {
		t.Errorf("only %d links found", n)
	}
}

var headingLine = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*$`)
