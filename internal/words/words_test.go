package words

import (
	"testing"
	"time"
)

func TestPluralAndCount(t *testing.T) {
	for _, tt := range []struct {
		n           int
		plural, cnt string
	}{{0, "entries", "0 entries"}, {1, "entry", "1 entry"}, {2, "entries", "2 entries"}} {
		if got := Plural(tt.n, "entry", "entries"); got != tt.plural {
			t.Errorf("Plural(%d) = %q, want %q", tt.n, got, tt.plural)
		}
		if got := Count(tt.n, "entry", "entries"); got != tt.cnt {
			t.Errorf("Count(%d) = %q, want %q", tt.n, got, tt.cnt)
		}
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"as  it is":               "as  it is",
		"two\nlines":              "two lines",
		"  a\r\n  windows line\n": "a windows line",
		"":                        "",
	} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLastLines(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\n\n  c\n\n", 2, "b\n  c"},
		{"a\r\nb\r\n", 5, "a\nb"},
		{"only\n", 1, "only"},
		{"\n \n", 3, ""},
		{"no end", 1, "no end"},
	} {
		if got := LastLines(tt.in, tt.n); got != tt.want {
			t.Errorf("LastLines(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestMedian(t *testing.T) {
	if got := Median([]float64{1, 2, 10}); got != 2 {
		t.Errorf("odd count: %v", got)
	}
	if got := Median([]float64{1, 2, 4, 10}); got != 3 {
		t.Errorf("even count: %v", got)
	}
	if got := Median([]time.Duration{time.Second, 3 * time.Second}); got != 2*time.Second {
		t.Errorf("durations: %v", got)
	}
}
