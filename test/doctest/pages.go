package doctest

import (
	"path/filepath"
	"sort"
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
