package doctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// Exec runs a shell script (sh -e) where a step says: in is "" (the user's shell),
// "client" (the external client) or a Node's name; dir is the working directory. It
// returns stdout and stderr together.
type Exec func(ctx context.Context, in, dir, script string) (string, error)

// Runner runs the blocks of pages.
type Runner struct {
	// Root is the clone the pages belong to; Home is the user's directory, where the
	// clone is Home/<base of Root> (a link) and files of write blocks go.
	Root, Home string
	Exec       Exec
	// Timeout bounds an expect block (default 3 minutes) and a run block (2 minutes).
	Timeout time.Duration
	// Before, if set, is called before each block runs (to log it).
	Before func(Block)
}

// NewHome makes the user's directory: a link to the clone under its own name, so that
// paths like ../juneau/manifests of the pages resolve.
func NewHome(root, home string) error {
	return os.Symlink(root, filepath.Join(home, "juneau"))
}

// Clone is the clone as the user sees it.
func (r *Runner) Clone() string { return filepath.Join(r.Home, "juneau") }

// RunStage runs the blocks of the stage of every page, in the pages' order, each as a
// subtest named after its page and line. Bindings are per page.
func (r *Runner) RunStage(t *testing.T, stage string, pages []string) {
	for _, page := range pages {
		blocks, err := ParseFile(r.Root, page)
		if err != nil {
			t.Fatal(err)
		}
		bound := Bindings{}
		for _, b := range blocks {
			if b.Stage() != stage || b.Directive == Skip {
				continue
			}
			ok := t.Run(fmt.Sprintf("%s:%d", page, b.Line), func(t *testing.T) {
				if r.Before != nil {
					r.Before(b)
				}
				if err := r.run(t, b, bound); err != nil {
					t.Fatalf("%s, %s block:\n%s\n%v", b.Where(), b.Directive, indent(b.Body), err)
				}
			})
			if !ok {
				// The page's next steps build on this one.
				t.Errorf("%s: the page's steps after line %d were not run", page, b.Line)
				break
			}
		}
	}
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// script is the block's text with its placeholders and the page's bindings in place.
func script(b Block, bound Bindings) string {
	s := b.Body
	for k, v := range b.Placeholders {
		s = strings.ReplaceAll(s, k, v)
	}
	return bound.Substitute(s)
}

func (r *Runner) where(b Block, bound Bindings) (in, dir string) {
	dir = filepath.Join(r.Clone(), b.Args["dir"])
	return bound.Substitute(b.Args["in"]), dir
}

func (r *Runner) run(t *testing.T, b Block, bound Bindings) error {
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout(timeout))
	defer cancel()
	in, dir := r.where(b, bound)
	switch b.Directive {
	case Run:
		out, err := r.Exec(ctx, in, dir, script(b, bound))
		t.Logf("%s", out)
		if _, fails := b.Args["fails"]; fails {
			if err == nil {
				return errors.New("the step succeeded; the page says it fails")
			}
			return nil
		}
		return err
	case Apply:
		return r.apply(ctx, dir, script(b, bound))
	case Write:
		return r.write(b, script(b, bound))
	case File:
		return CheckFile(r.Root, b)
	case Expect:
		return r.expect(ctx, t, b, bound, in, dir)
	}
	return fmt.Errorf("directive %q cannot run", b.Directive)
}

func (r *Runner) apply(ctx context.Context, dir, yamlText string) error {
	heredoc := "kubectl apply -f - <<'JUNEAU_DOCTEST_EOF'\n" + yamlText + "JUNEAU_DOCTEST_EOF\n"
	out, err := r.Exec(ctx, "", dir, heredoc)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// write puts the block into path (relative to the clone), never inside the clone.
func (r *Runner) write(b Block, text string) error {
	path := filepath.Clean(filepath.Join(r.Clone(), b.Args["path"]))
	if rel, err := filepath.Rel(r.Clone(), path); err != nil || !strings.HasPrefix(rel, "..") {
		return fmt.Errorf("write path %q lies inside the clone; pages write files of the user's own", b.Args["path"])
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

// expect runs each command of the block until its output matches, and keeps what the
// match bound.
func (r *Runner) expect(ctx context.Context, t *testing.T, b Block, bound Bindings, in, dir string) error {
	_, fails := b.Args["fails"]
	if cols := b.Rebind(); len(cols) > 0 {
		for _, c := range Commands(b.Body) {
			bound.Forget(c.Output, cols)
		}
	}
	for _, c := range Commands(b.Body) {
		cmd := script(Block{Body: c.Line, Placeholders: b.Placeholders}, bound)
		var last string
		var lastErr error
		err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			out, err := r.Exec(ctx, in, dir, cmd)
			if ctx.Err() != nil {
				return false, nil // cut off by the timeout: keep what the last full run said
			}
			last = out
			if fails != (err != nil) {
				lastErr = fmt.Errorf("exit: %v", err)
				return false, nil
			}
			fresh, err := Match(c.Output, out, b.Vary(), bound)
			if err != nil {
				lastErr = err
				return false, nil
			}
			for k, v := range fresh {
				bound[k] = v
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("$ %s\nprinted:\n%s\nnot what the page shows: %v", cmd, indent(last), lastErr)
		}
		t.Logf("$ %s\n%s", cmd, last)
	}
	return nil
}

// CheckFile checks a file block: each YAML document it shows is one of the file's.
func CheckFile(root string, b Block) error {
	data, err := os.ReadFile(filepath.Join(root, b.Args["path"]))
	if err != nil {
		return err
	}
	have, err := documents(string(data))
	if err != nil {
		return fmt.Errorf("%s: %w", b.Args["path"], err)
	}
	shown, err := documents(b.Body)
	if err != nil {
		return fmt.Errorf("the block: %w", err)
	}
	for _, s := range shown {
		found := false
		for _, h := range have {
			if s == h {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("this document is not in %s:\n%s", b.Args["path"], indent(s))
		}
	}
	return nil
}

// documents returns each YAML document of text in a canonical form.
func documents(text string) ([]string, error) {
	var out []string
	for _, doc := range strings.Split("\n"+text, "\n---") {
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		canon, err := yaml.Marshal(v)
		if err != nil {
			return nil, err
		}
		out = append(out, string(canon))
	}
	return out, nil
}
