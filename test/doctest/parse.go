// Package doctest runs the steps of the repository's Markdown documentation as tests,
// taking them from the Markdown itself, so that a change of a page that breaks a step,
// or a change of the product that breaks a page, fails CI.
//
// Every fenced code block of README.md, docs/*.md and manifests/README.md is preceded
// by a marker, an HTML comment that GitHub does not render:
//
//	<!-- doctest: DIRECTIVE [key=value ...] -->
//	```sh
//	kubectl apply -f manifests/examples/
//	```
//
// The directives (docs/README.md#how-the-pages-are-tested):
//
//	run     the shell block runs (sh -e), and must succeed
//	expect  each "$ command" line of the block runs until its output matches the lines
//	        that follow it (see Match), within a timeout
//	apply   the YAML block is applied with kubectl apply -f -
//	write   the block is written to the file path= (relative to the clone), as a user
//	        writes a file the page shows
//	file    the YAML block shows (part of) the repository file path=: each of its
//	        documents must equal one of the file's
//	skip    not executed; the rest of the marker says why (an illustration, a router's
//	        configuration, a command that runs for long)
//
// Keys: stage= (install, guide, uninstall; default guide), in= (client: the external
// client's network namespace; a Node's name: on that Node), dir= (the working
// directory, relative to the clone), vary= (table columns whose values differ from run
// to run), rebind= (vary columns whose page values are bound afresh by this block: a
// Pod the scheduler placed on its own, whose Node the page shows with a name it used
// for another Pod before), fails (the command must fail), timeout= (a Go duration), and <placeholder>=
// value pairs that replace a placeholder of the block (kubectl describe eip <name>).
package doctest

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Directives.
const (
	Run    = "run"
	Expect = "expect"
	Apply  = "apply"
	Write  = "write"
	File   = "file"
	Skip   = "skip"
)

// Stages: the install runs first, the uninstall last, the guides between.
const (
	StageInstall   = "install"
	StageGuide     = "guide"
	StageUninstall = "uninstall"
)

// Block is one fenced code block and its marker.
type Block struct {
	Page      string // the Markdown file, relative to the clone
	Line      int    // line of the opening fence (1-based)
	Section   string // the last heading before the block
	Lang      string // the fence's info string (sh, yaml, console, ...)
	Body      string // the block's content, with the fence's indentation removed
	Directive string
	Args      map[string]string // key=value pairs of the marker; bare keys map to ""
	// Placeholders are the marker's <name>=value pairs.
	Placeholders map[string]string
	// Reason is the text after skip.
	Reason string
}

// Where names a block in messages: page:line (section).
func (b Block) Where() string { return fmt.Sprintf("%s:%d (%s)", b.Page, b.Line, b.Section) }

// Stage is the block's stage= key, guide by default.
func (b Block) Stage() string {
	if s := b.Args["stage"]; s != "" {
		return s
	}
	return StageGuide
}

// Timeout is the block's timeout= key, or def.
func (b Block) Timeout(def time.Duration) time.Duration {
	if d, err := time.ParseDuration(b.Args["timeout"]); err == nil {
		return d
	}
	return def
}

// Vary lists the columns of the vary= and rebind= keys.
func (b Block) Vary() []string {
	return append(b.list("vary"), b.Rebind()...)
}

// Rebind lists the columns of the rebind= key.
func (b Block) Rebind() []string { return b.list("rebind") }

// list reads a comma-separated key.
func (b Block) list(key string) []string {
	if b.Args[key] == "" {
		return nil
	}
	return strings.Split(b.Args[key], ",")
}

var (
	fence   = regexp.MustCompile("^( *)(```+|~~~+)\\s*([^`\\s]*)")
	heading = regexp.MustCompile(`^#{1,6}\s+(.*)`)
	marker  = regexp.MustCompile(`^\s*<!--\s*doctest:\s*(.*?)\s*-->\s*$`)
	keys    = map[string]bool{"stage": true, "in": true, "dir": true, "vary": true, "rebind": true, "fails": true, "timeout": true, "path": true}
)

// ParseFile reads the Markdown file root/page.
func ParseFile(root, page string) ([]Block, error) {
	f, err := os.Open(root + "/" + page)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return Parse(page, lines)
}

// Parse finds the fenced blocks of a page and their markers. A block without a marker,
// or with a marker it cannot read, is an error naming the line: every block of a page
// says how it is tested, or why not.
func Parse(page string, lines []string) ([]Block, error) {
	var blocks []Block
	var errs []string
	section := ""
	for i := 0; i < len(lines); i++ {
		if m := heading.FindStringSubmatch(lines[i]); m != nil {
			section = strings.TrimSpace(m[1])
			continue
		}
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, ticks, lang := len(m[1]), m[2], m[3]
		b := Block{Page: page, Line: i + 1, Section: section, Lang: lang}
		var body []string
		j := i + 1
		for ; j < len(lines); j++ {
			if strings.HasPrefix(strings.TrimLeft(lines[j], " "), ticks) && strings.TrimSpace(lines[j]) == ticks {
				break
			}
			body = append(body, dedent(lines[j], indent))
		}
		if j == len(lines) {
			errs = append(errs, fmt.Sprintf("%s:%d: the block is never closed", page, i+1))
			break
		}
		b.Body = strings.Join(body, "\n") + "\n"
		// The marker is the nearest non-blank line above the fence.
		k := i - 1
		for k >= 0 && strings.TrimSpace(lines[k]) == "" {
			k--
		}
		if k < 0 || !marker.MatchString(lines[k]) {
			errs = append(errs, fmt.Sprintf("%s:%d: a fenced block without a <!-- doctest: ... --> marker above it", page, i+1))
		} else if err := b.readMarker(marker.FindStringSubmatch(lines[k])[1]); err != nil {
			errs = append(errs, fmt.Sprintf("%s:%d: %v", page, k+1, err))
		}
		blocks = append(blocks, b)
		i = j
	}
	if len(errs) > 0 {
		return blocks, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return blocks, nil
}

func dedent(line string, n int) string {
	for n > 0 && strings.HasPrefix(line, " ") {
		line, n = line[1:], n-1
	}
	return line
}

// readMarker reads "DIRECTIVE key=value ...".
func (b *Block) readMarker(text string) error {
	fields, err := splitFields(text)
	if err != nil {
		return err
	}
	if len(fields) == 0 {
		return fmt.Errorf("an empty doctest marker")
	}
	b.Directive = fields[0]
	b.Args, b.Placeholders = map[string]string{}, map[string]string{}
	switch b.Directive {
	case Skip:
		b.Reason = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), Skip))
		if b.Reason == "" {
			return fmt.Errorf("skip needs a reason")
		}
		return nil
	case Run, Expect, Apply, Write, File:
	default:
		return fmt.Errorf("unknown doctest directive %q", b.Directive)
	}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		switch {
		case strings.HasPrefix(k, "<") && strings.HasSuffix(k, ">"):
			b.Placeholders[k] = v
		case keys[k]:
			b.Args[k] = v
		default:
			return fmt.Errorf("unknown doctest key %q", k)
		}
	}
	if s := b.Args["stage"]; s != "" && !slices.Contains([]string{StageInstall, StageGuide, StageUninstall}, s) {
		return fmt.Errorf("unknown stage %q", s)
	}
	if (b.Directive == Write || b.Directive == File) && b.Args["path"] == "" {
		return fmt.Errorf("%s needs path=", b.Directive)
	}
	if _, ok := b.Args["timeout"]; ok {
		if _, err := time.ParseDuration(b.Args["timeout"]); err != nil {
			return fmt.Errorf("timeout: %v", err)
		}
	}
	return nil
}

// splitFields splits on spaces, keeping "double-quoted values" whole.
func splitFields(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if any {
				out = append(out, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if any {
		out = append(out, cur.String())
	}
	return out, nil
}

// Commands splits an expect block into its commands and the output each promises.
// A command starts with "$ " and continues on lines ending in a backslash.
func Commands(body string) []Command {
	var out []Command
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if !strings.HasPrefix(line, "$ ") {
			if len(out) > 0 {
				out[len(out)-1].Output = append(out[len(out)-1].Output, line)
			}
			continue
		}
		cmd := strings.TrimPrefix(line, "$ ")
		for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, "\\") + "\n" + lines[i]
		}
		out = append(out, Command{Line: cmd})
	}
	for i := range out {
		// A blank line between one command's output and the next "$" separates them.
		for len(out[i].Output) > 0 && strings.TrimSpace(out[i].Output[len(out[i].Output)-1]) == "" {
			out[i].Output = out[i].Output[:len(out[i].Output)-1]
		}
	}
	return out
}

// Command is one "$ command" of an expect block and the output lines it promises.
type Command struct {
	Line   string
	Output []string
}
