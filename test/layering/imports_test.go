// Package layering checks the direction of the dependencies between juneau's packages
// (docs/design.md#packages-and-layers) with `go list`, so a wrong import fails a test
// rather than waiting for a reviewer.
package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// module is juneau's module path.
const module = "github.com/loutres/juneau"

// pkg is what `go list -json` says about one package.
type pkg struct {
	ImportPath string
	Imports    []string // direct, without tests
	Deps       []string // transitive, without tests
}

// rule: packages under from never depend, even indirectly, on a package under one of
// never (except those under allow).
type rule struct {
	from  string
	never []string
	allow []string
	why   string
}

var rules = []rule{
	{
		from:  "pkg/apis/",
		never: []string{"k8s.io/client-go/", "pkg/"},
		allow: []string{"pkg/apis/"},
		why:   "the API packages (types, validation, annotations) are pure functions of API objects, shared by every component",
	},
	{
		from:  "pkg/controllers/ipam",
		never: []string{"k8s.io/client-go/", "pkg/controllers/", "pkg/generated/"},
		allow: []string{"pkg/controllers/ipam"},
		why:   "the allocator is pure: it knows addresses, not API clients",
	},
	{
		from:  "pkg/admission",
		never: []string{"pkg/controllers/", "pkg/node/"},
		why:   "the webhook checks objects with the pure API packages and its own informers; it shares no code with the controllers",
	},
	{
		from:  "pkg/controllers/",
		never: []string{"pkg/admission", "pkg/node/"},
		why:   "controllers, webhook and node agent are separate roles that meet only in the API",
	},
	{
		from:  "pkg/node/",
		never: []string{"pkg/controllers/", "pkg/admission"},
		why:   "controllers, webhook and node agent are separate roles that meet only in the API",
	},
	{
		from:  "pkg/status",
		never: []string{"pkg/controllers/", "pkg/node/", "pkg/admission"},
		why:   "the status and event helper serves every controller and the node agent alike",
	},
	{
		from:  "pkg/workloop",
		never: []string{"pkg/controllers/", "pkg/node/", "pkg/admission", "pkg/generated/"},
		why:   "the work loop serves every controller and the node agent alike",
	},
	{
		from:  "pkg/generated/",
		never: []string{"pkg/"},
		allow: []string{"pkg/generated/", "pkg/apis/"},
		why:   "generated clients depend on the API types only",
	},
	{
		from:  "pkg/",
		never: []string{"cmd/", "test/", "bench"},
		why:   "production code never depends on the binaries, the tests or the benchmarks",
	},
	{
		from:  "cmd/",
		never: []string{"test/", "bench"},
		why:   "the binary never carries test code",
	},
}

func TestImportRules(t *testing.T) {
	pkgs := list(t, "./pkg/...", "./cmd/...")
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, r := range rules {
		matched := 0
		for _, p := range pkgs {
			from := strings.TrimPrefix(p.ImportPath, module+"/")
			if !under(from, r.from) {
				continue
			}
			matched++
			for _, dep := range p.Deps {
				if bad := r.forbids(dep); bad {
					t.Errorf("%s depends on %s (through %s): %s", from, short(dep), via(pkgs, p, dep), r.why)
				}
			}
		}
		if matched == 0 {
			t.Errorf("rule for %q matches no package: update the rule", r.from)
		}
	}
}

// TestControllersDoNotImportEachOther: one controller per package; controllers share
// only the helper packages below pkg/controllers. The manager, which holds the one list
// of controllers, imports them all, and none imports it.
func TestControllersDoNotImportEachOther(t *testing.T) {
	helpers := map[string]bool{"indexes": true, "ipam": true}
	for _, p := range list(t, "./pkg/controllers/...") {
		from := controllerOf(p.ImportPath)
		if from == "manager" {
			continue
		}
		for _, imp := range p.Imports {
			to := controllerOf(imp)
			if to != "" && to != from && !helpers[to] && !helpers[from] {
				t.Errorf("controller %s imports controller %s: controllers meet only in the API", from, to)
			}
		}
	}
}

// controllerOf is the first path element below pkg/controllers, or "".
func controllerOf(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/pkg/controllers/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// forbids reports whether dep is outside what the rule allows.
func (r rule) forbids(dep string) bool {
	local, own := strings.CutPrefix(dep, module+"/")
	for _, a := range r.allow {
		if own && under(local, a) {
			return false
		}
	}
	for _, n := range r.never {
		if own && under(local, n) || !own && under(dep, n) {
			return true
		}
	}
	return false
}

// under reports whether path is prefix itself or lies below it; a prefix ending in "/"
// matches only below it.
func under(path, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(path, prefix)
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func short(path string) string { return strings.TrimPrefix(path, module+"/") }

// via names the direct import of p through which dep comes in.
func via(pkgs map[string]pkg, p pkg, dep string) string {
	for _, imp := range p.Imports {
		if imp == dep {
			return "a direct import"
		}
	}
	for _, imp := range p.Imports {
		if q, ok := pkgs[imp]; ok {
			for _, d := range q.Deps {
				if d == dep {
					return short(imp)
				}
			}
		}
	}
	return "an indirect import"
}

// list runs go list in the module and decodes its packages by import path.
func list(t *testing.T, patterns ...string) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports,Deps"}, patterns...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}
