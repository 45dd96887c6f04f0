package main

import (
	"bufio"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// operationsPage is the page whose tables list every flag of every role.
const operationsPage = "../../docs/operations.md"

// flagTables are the flag tables of docs/operations.md by role: "" for the flags every
// command accepts (the table after that sentence), a role's name for the table of its
// "### juneau <role>" section.
func flagTables(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(operationsPage)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flagName := regexp.MustCompile("`(--[a-z0-9-]+)`")
	tables := map[string][]string{}
	section, inTable := "", false
	for s := bufio.NewScanner(f); s.Scan(); {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			section, inTable = "", false
			if role, ok := strings.CutPrefix(line, "### juneau "); ok {
				section = strings.TrimSpace(role)
			}
			continue
		case strings.HasPrefix(line, "Flags every command accepts"):
			section = "common"
			continue
		}
		if section == "" {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				section, inTable = "", false // only the first table of the section
			}
			continue
		}
		cells := strings.Split(line, "|")
		if !inTable {
			inTable = strings.TrimSpace(cells[1]) == "flag"
			continue
		}
		for _, m := range flagName.FindAllStringSubmatch(cells[1], -1) {
			tables[section] = append(tables[section], m[1])
		}
	}
	return tables
}

// names are the "--name"s of the flags of fs not in skip.
func names(fs *pflag.FlagSet, skip func(string) bool) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" && !skip(f.Name) {
			out = append(out, "--"+f.Name)
		}
	})
	slices.Sort(out)
	return out
}

// TestFlagTables: every flag of every role is in its table of docs/operations.md, and
// the tables name no flag that does not exist.
func TestFlagTables(t *testing.T) {
	tables := flagTables(t)
	root := newRootCommand()
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	isKlog := func(name string) bool { return klogFlags.Lookup(name) != nil }
	none := func(string) bool { return false }

	roles := map[string][]string{
		// The klog flags are one row of the table ("-v and the other klog flags").
		"common": names(root.PersistentFlags(), isKlog),
	}
	for _, role := range []string{"controller", "webhook", "node"} {
		cmd, _, err := root.Find([]string{role})
		if err != nil || cmd == root {
			t.Fatalf("no command %q: %v", role, err)
		}
		roles[role] = names(cmd.LocalNonPersistentFlags(), none)
	}
	for role, have := range roles {
		if len(have) == 0 {
			t.Errorf("role %q has no flags; the test reads the wrong flag sets", role)
		}
		documented := tables[role]
		for _, f := range have {
			if !slices.Contains(documented, f) {
				t.Errorf("%s: %s (role %q) is missing from its flag table", operationsPage, f, role)
			}
		}
		for _, f := range documented {
			if !slices.Contains(have, f) {
				t.Errorf("%s: the flag table of role %q names %s, which the command does not have", operationsPage, role, f)
			}
		}
	}
	for section := range tables {
		if _, ok := roles[section]; !ok {
			t.Errorf("%s: a flag table for %q, which is no role", operationsPage, section)
		}
	}
}
