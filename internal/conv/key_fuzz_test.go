package conv

import (
	"os"
	"strings"
	"testing"
)

// ParseKey never panics, and every key it accepts is written back by
// FormatKey exactly as it was read. Seeds: every key of MIOpen's real
// gfx942 find-db, and near misses.
func FuzzParseKey(f *testing.F) {
	data, err := os.ReadFile(sharedFile(f, "miopen-db/gfx942130.HIP.fdb.txt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		key, _, _ := strings.Cut(l, "=")
		f.Add(key)
	}
	for _, k := range []string{
		"", "-", "x", "3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP32-F_g",
		"3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP32-F_g01",
		"3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NHWC-NHWC-NHWC-FP16-B_g2",
		"03-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP32-F",
		"3-32-32-3x3-64-32-32-1-+1x1-1x1-1x1-0-NCHW-FP32-F",
		"3-32-32-3x3-64-99999999999999999999-32-1-1x1-1x1-1x1-0-NCHW-FP32-F",
		"3-4-32-32-3x3x3-64-4-32-32-1-1x1x1-1x1x1-1x1x1-0-NCDHW-FP32-F",
	} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		p, dir, dtype, layout, err := ParseKey(key)
		if err != nil {
			return
		}
		if back := FormatKey(p, dir, dtype, layout); back != key {
			t.Fatalf("ParseKey accepted %q, FormatKey wrote %q", key, back)
		}
	})
}
