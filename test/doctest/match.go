package doctest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Bindings map values a page shows to the values of this run, for what differs from
// run to run: the Node the scheduler picked, a Pod IP, the address of two ElasticIPs
// created at once. A vary= column binds them; later commands and outputs of the page
// are read with the bound values in place (Substitute).
type Bindings map[string]string

// Substitute replaces every bound value of s, as a whole token (not inside a longer
// address or name), by its value in this run, in one pass: a replaced value is not read
// again, so swapped bindings (node-a for node-b and node-b for node-a) hold.
func (b Bindings) Substitute(s string) string {
	keys := make([]string, 0, len(b))
	for k := range b {
		if k != "" {
			keys = append(keys, k)
		}
	}
	// Longest first, so that 10.244.1.5/32 goes before 10.244.1.5.
	slices.SortFunc(keys, func(x, y string) int { return len(y) - len(x) })
	var out strings.Builder
	for i := 0; i < len(s); {
		k := tokenAt(s, i, keys)
		if k == "" {
			out.WriteByte(s[i])
			i++
			continue
		}
		out.WriteString(b[k])
		i += len(k)
	}
	return out.String()
}

// tokenChar is a character that continues an address or a name; an underscore joins
// an address to a prefix (the nftables chain bw_in_10.225.51.5) and does not.
func tokenChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '-'
}

// tokenAt returns the first of keys that stands alone at s[i:]: not preceded or
// followed by a character of a name or an address (a trailing dot ends a sentence, not
// a token); "" if none does.
func tokenAt(s string, i int, keys []string) string {
	if i > 0 && tokenChar(s[i-1]) {
		return ""
	}
	for _, k := range keys {
		if !strings.HasPrefix(s[i:], k) {
			continue
		}
		end := i + len(k)
		if end == len(s) || !tokenChar(s[end]) || s[end] == '.' && (end+1 == len(s) || !tokenChar(s[end+1])) {
			return k
		}
	}
	return ""
}

// Match compares what a command printed with the output a page promises for it.
//
// Output whose first line is a kubectl table header (every word upper case) is read
// as tables, one per blank-line-separated section: the headers must be equal; every
// row the page shows must be printed (found by its first column), every cell equal,
// except AGE-like columns, which are not compared, and the vary columns, whose value
// must have the page's shape (empty or not, an address, a number) and is then bound.
// Rows the page leaves out may be printed.
//
// Any other output is read as lines: each line the page shows, with its words in
// order, must appear in a printed line, the lines in the page's order, so that a page
// may abridge (kubectl describe without its Age column, an ip address listing without
// its lifetimes). A line "..." stands for lines left out. Here vary names kinds of
// words (mac, number, address) that stand for whatever word of that kind is printed
// in their place, and are then bound; time (a date or a time of day) stands for any
// each time, unbound.
//
// On a match the new bindings are returned, for the caller to keep.
func Match(want []string, got string, vary []string, bound Bindings) (Bindings, error) {
	if len(want) == 0 {
		return nil, nil
	}
	if isHeader(want[0]) {
		return matchTables(want, got, vary, bound)
	}
	return matchLines(want, got, vary, bound)
}

var upperWord = regexp.MustCompile(`^[A-Z][A-Z0-9-]*$`)

// isHeader: a kubectl table header is upper-case words only (NAME, LAST SEEN, PEER-ASN).
func isHeader(line string) bool {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "NAME" && f[0] != "LAST" && f[0] != "NAMESPACE" {
		return false
	}
	for _, w := range f {
		if !upperWord.MatchString(w) {
			return false
		}
	}
	return true
}

// notCompared are columns whose values change with time.
var notCompared = map[string]bool{"AGE": true, "LAST SEEN": true, "FIRST SEEN": true, "COUNT": true, "RESTARTS": true}

type table struct {
	header []column
	rows   [][]string // cells by column
}

type column struct {
	name  string
	start int
}

var fieldSep = regexp.MustCompile(`\S+(?: \S+)*`)

// parseTable reads a kubectl table: columns start where the header's words (or words
// joined by one space, LAST SEEN) start; each cell of a row is given to the column it
// starts under, so empty cells stay empty.
func parseTable(lines []string) table {
	var t table
	for _, loc := range fieldSep.FindAllStringIndex(lines[0], -1) {
		t.header = append(t.header, column{name: lines[0][loc[0]:loc[1]], start: loc[0]})
	}
	for _, line := range lines[1:] {
		row := make([]string, len(t.header))
		for _, loc := range fieldSep.FindAllStringIndex(line, -1) {
			col := 0
			for j, c := range t.header {
				if c.start <= loc[0]+1 {
					col = j
				}
			}
			if row[col] != "" {
				row[col] += " "
			}
			row[col] += line[loc[0]:loc[1]]
		}
		t.rows = append(t.rows, row)
	}
	return t
}

func (t table) names() []string {
	out := make([]string, len(t.header))
	for i, c := range t.header {
		out[i] = c.name
	}
	return out
}

// sections splits output into blank-line-separated parts.
func sections(lines []string) [][]string {
	var out [][]string
	var cur []string
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func matchTables(want []string, got string, vary []string, bound Bindings) (Bindings, error) {
	ws := sections(want)
	gs := sections(strings.Split(got, "\n"))
	if len(gs) != len(ws) {
		return nil, fmt.Errorf("%d tables printed, the page shows %d", len(gs), len(ws))
	}
	fresh := Bindings{}
	for i := range ws {
		wt, gt := parseTable(ws[i]), parseTable(gs[i])
		if !slices.Equal(wt.names(), gt.names()) {
			return nil, fmt.Errorf("columns %v, the page shows %v", gt.names(), wt.names())
		}
		for _, wr := range wt.rows {
			// The first printed row that matches the page's row; if none does, the error
			// of the one with the same first column says why.
			var why error
			matched := false
			for _, gr := range gt.rows {
				b, err := matchRow(wt.header, wr, gr, vary, mergeBindings(fresh, bound))
				if err == nil {
					for k, v := range b {
						fresh[k] = v
					}
					matched = true
					break
				}
				if why == nil || gr[0] == bound.Substitute(wr[0]) {
					why = err
				}
			}
			if !matched {
				if why == nil {
					why = errors.New("nothing printed")
				}
				return nil, fmt.Errorf("no printed row is the page's %q: %v", strings.Join(wr, "  "), why)
			}
		}
	}
	return fresh, nil
}

// matchRow compares one printed row with one of the page's, as Match says, and returns
// what its vary columns bind.
func matchRow(header []column, wr, gr []string, vary []string, bound Bindings) (Bindings, error) {
	fresh := Bindings{}
	for j, c := range header {
		// raw is the page's value; w the value of this run it stands for, when a
		// binding says so.
		raw, g := wr[j], gr[j]
		w := mergeBindings(fresh, bound).Substitute(raw)
		switch {
		case notCompared[c.name]:
		case slices.Contains(vary, c.name) && w == raw:
			if err := sameShape(raw, g); err != nil {
				return nil, fmt.Errorf("column %s: %v", c.name, err)
			}
			if err := bind(fresh, bound, raw, g); err != nil {
				return nil, fmt.Errorf("column %s: %v", c.name, err)
			}
		case w != g:
			return nil, fmt.Errorf("column %s: %q printed, the page shows %q", c.name, g, w)
		}
	}
	return fresh, nil
}

// bind records page value w as g, and for an address with a prefix length
// (10.244.1.5/32), the bare address too.
func bind(fresh, bound Bindings, w, g string) error {
	if w == "" || w == g {
		return nil
	}
	for _, b := range []Bindings{fresh, bound} {
		if have, ok := b[w]; ok && have != g {
			return fmt.Errorf("%q stands for %q elsewhere on the page, here for %q", w, have, g)
		}
	}
	fresh[w] = g
	wp, err1 := netip.ParsePrefix(w)
	gp, err2 := netip.ParsePrefix(g)
	if err1 == nil && err2 == nil {
		fresh[wp.Addr().String()] = gp.Addr().String()
	}
	return nil
}

// sameShape: a varying value printed must be of the kind the page shows.
func sameShape(w, g string) error {
	if kind(w) != kind(g) {
		return fmt.Errorf("%q printed, the page shows %q (a %s, not a %s)", g, w, kind(w), kind(g))
	}
	return nil
}

func kind(s string) string {
	switch {
	case s == "":
		return "blank"
	case isAddr(s):
		return "address"
	case isPrefix(s):
		return "prefix"
	case isNumber(s):
		return "number"
	case isMAC(s):
		return "mac"
	case isTime(s):
		return "time"
	}
	return "word"
}

func isMAC(s string) bool { hw, err := net.ParseMAC(s); return err == nil && len(hw) == 6 }

func isAddr(s string) bool { _, err := netip.ParseAddr(s); return err == nil }

func isPrefix(s string) bool { _, err := netip.ParsePrefix(s); return err == nil }

func isNumber(s string) bool { _, err := strconv.Atoi(s); return err == nil }

// timeWord is a date (2030-01-02) or a time of day (03:04:05, 03:04:05.123), as a
// router prints when a route changed; a closing bracket may end it (BIRD's
// "[node_a 2030-01-02 03:04:05.123]").
var timeWord = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2}|\d{2}:\d{2}:\d{2}(\.\d+)?)\]?$`)

func isTime(s string) bool { return timeWord.MatchString(s) }

// matchLines: every page line's words, in order, in some printed line, in order.
func matchLines(want []string, got string, vary []string, bound Bindings) (Bindings, error) {
	lines := strings.Split(got, "\n")
	fresh := Bindings{}
	at := 0
	for _, w := range want {
		words := strings.Fields(w)
		if len(words) == 0 || strings.TrimSpace(w) == "..." {
			continue
		}
		for i, raw := range words {
			if sub := mergeBindings(fresh, bound).Substitute(raw); sub != raw {
				words[i] = literal + sub // stands for a value bound before
			}
		}
		found := false
		for ; at < len(lines); at++ {
			if b, ok := subsequence(words, strings.Fields(lines[at]), vary, fresh, bound); ok {
				for k, v := range b {
					fresh[k] = v
				}
				found = true
				at++
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("no printed line (after the ones matched before) has %q", strings.TrimSpace(w))
		}
	}
	return fresh, nil
}

// subsequence: the words of want appear in have, in order; a word of a varying kind
// stands for a printed word of that kind, bound consistently.
func subsequence(want, have []string, vary []string, fresh, bound Bindings) (Bindings, bool) {
	b := Bindings{}
	i := 0
	for _, h := range have {
		if i == len(want) {
			break
		}
		w := want[i]
		if lit, ok := strings.CutPrefix(w, literal); ok {
			if h == lit {
				i++
			}
			continue
		}
		switch {
		case h == w:
			i++
		case slices.Contains(vary, kind(w)) && kind(h) == kind(w):
			// A time is not bound: each listing shows its own.
			if kind(w) == "time" || bind(b, mergeBindings(fresh, bound), w, h) == nil {
				i++
			}
		}
	}
	return b, i == len(want)
}

// literal marks a word of the page already replaced by its bound value.
const literal = "\x00"

// Forget drops the bindings of the values the page's tables show in columns cols, so
// that a block binds them afresh (rebind=).
func (b Bindings) Forget(want []string, cols []string) {
	if len(want) == 0 || !isHeader(want[0]) {
		return
	}
	for _, sec := range sections(want) {
		t := parseTable(sec)
		for j, c := range t.header {
			if !slices.Contains(cols, c.name) {
				continue
			}
			for _, row := range t.rows {
				delete(b, row[j])
			}
		}
	}
}

func mergeBindings(a, b Bindings) Bindings {
	out := Bindings{}
	for _, m := range []Bindings{a, b} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
