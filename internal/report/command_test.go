package report

import (
	"slices"
	"testing"
)

func TestSplitCommandLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`capture --mode=global  --reclaim=lazy`, []string{"capture", "--mode=global", "--reclaim=lazy"}},
		{`find --problems 'my file.yaml'`, []string{"find", "--problems", "my file.yaml"}},
		{`a "b \"c\" \$d \\ \x" e`, []string{"a", `b "c" $d \ \x`, "e"}},
		{`a\ b c`, []string{"a b", "c"}},
		{`'' x`, []string{"", "x"}},
		{`'it'\''s'`, []string{"it's"}},
		// Backslash-newline continues the line, in and out of a word and
		// inside double quotes; it is not a newline in the word.
		{"stress-threads \\\n  --runs 5", []string{"stress-threads", "--runs", "5"}},
		{"ab\\\ncd", []string{"abcd"}},
		{"\"ab\\\ncd\"", []string{"abcd"}},
		{"''\\\n x", []string{"", "x"}},
		{"a\\\n", []string{"a"}},
	} {
		got, err := SplitCommandLine(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("SplitCommandLine(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`'open`, `"open`, `trailing\`} {
		if _, err := SplitCommandLine(bad); err == nil {
			t.Errorf("SplitCommandLine(%q) accepted", bad)
		}
	}
}

// JoinCommandLine's output splits back into the same words.
func TestJoinSplitsBack(t *testing.T) {
	words := []string{"plain", "", "two words", "it's", `"quoted"`, `back\slash`, "$HOME", "*.yaml", "tab\there", "new\nline", "--env=A=1,B=2", "ünïcode"}
	line := JoinCommandLine(words)
	got, err := SplitCommandLine(line)
	if err != nil || !slices.Equal(got, words) {
		t.Errorf("JoinCommandLine gave %s, which splits into %q (%v)", line, got, err)
	}
	if JoinCommandLine([]string{"capture", "--mode=global", "--reclaim=lazy,worker"}) != "capture --mode=global --reclaim=lazy,worker" {
		t.Error("plain words are quoted")
	}
}
