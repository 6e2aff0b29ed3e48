package trace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Executables lists the commands a shell would run for a word starting
// with prefix: the executable files in the folders of env's $PATH, each
// name once (the first folder's), sorted.
func Executables(env []string, prefix string) []string {
	seen := map[string]bool{}
	var names []string
	for _, dir := range filepath.SplitList(lookupEnv(env, "PATH")) {
		if dir == "" {
			dir = "."
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if seen[name] || !strings.HasPrefix(name, prefix) {
				continue
			}
			info, err := os.Stat(filepath.Join(dir, name)) // follows links, as exec does
			if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
				continue
			}
			seen[name] = true
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
