package suggest

import "testing"

func TestEdits(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"runs", "runs", 0}, {"rns", "runs", 1}, {"rnus", "runs", 2},
		{"", "abc", 3}, {"kitten", "sitting", 3}, {"expect", "expcet", 2},
	} {
		if got := Edits(tc.a, tc.b); got != tc.want {
			t.Errorf("Edits(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Edits(tc.b, tc.a); got != tc.want {
			t.Errorf("Edits(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	known := []string{"format", "timeout", "stress-threads.runs", "stress-threads.iters"}
	for _, tc := range []struct {
		word string
		want string
		ok   bool
	}{
		{"fromat", "format", true},
		{"timeot", "timeout", true},
		{"stress-threads.rnus", "stress-threads.runs", true},
		{"stress-threads.iter", "stress-threads.iters", true}, // closer than runs
		{"colour", "", false},
	} {
		got, ok := Closest(tc.word, known)
		if got != tc.want && tc.ok || ok != tc.ok {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.word, got, ok, tc.want, tc.ok)
		}
	}
}
