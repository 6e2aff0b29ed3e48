package dl

import "testing"

func TestGoStringBytes(t *testing.T) {
	for _, tt := range []struct {
		in   []byte
		want string
	}{{[]byte("gfx942\x00junk"), "gfx942"}, {[]byte("\x00"), ""}, {[]byte("no end"), ""}, {nil, ""}} {
		if got := GoStringBytes(tt.in); got != tt.want {
			t.Errorf("GoStringBytes(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
