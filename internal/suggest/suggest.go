// Package suggest finds the known word a mistyped one was meant to be, for
// "did you mean" hints in suite files, configuration files and flags.
package suggest

// MaxEdits is how far a word may be from a known one to be suggested.
const MaxEdits = 2

// Closest is the known word fewest edits (insertions, deletions,
// substitutions) from word, when it is at most MaxEdits away; the first of
// equally close ones wins. ok is false when none is that close.
func Closest(word string, known []string) (best string, ok bool) {
	bestEdits := MaxEdits + 1
	for _, k := range known {
		if d := Edits(word, k); d < bestEdits {
			best, bestEdits = k, d
		}
	}
	return best, bestEdits <= MaxEdits
}

// Edits is the Levenshtein distance between a and b, byte-wise.
func Edits(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
