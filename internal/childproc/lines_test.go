package childproc

import "testing"

func TestLastLines(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 1, ""},
		{"one", 1, "one"},
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\n  b  \n\n \t\n", 1, "b"},
		{"a\r\nb\r\n", 1, "b"},
		{"a\nb", 5, "a\nb"},
		{"a\nb", 0, ""},
	} {
		if got := LastLines(tt.s, tt.n); got != tt.want {
			t.Errorf("LastLines(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
