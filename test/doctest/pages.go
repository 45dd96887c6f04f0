package doctest

import (
	"path/filepath"
	"sort"
	"strings"
	"unicode"
)

// Pages are the Markdown files whose blocks are tested, relative to the clone: the
// README, every page of docs/, and the manifests' README.
func Pages(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	out := []string{"README.md", "manifests/README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	sort.Strings(out[2:])
	return out, nil
}

// Slug is the anchor GitHub gives a heading: lower case, spaces as hyphens, every
// character but letters, digits, hyphens and underscores dropped.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
