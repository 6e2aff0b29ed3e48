package conv

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

func TestKeyExamples(t *testing.T) {
	cases := []struct {
		name   string
		p      Problem
		dir    Direction
		dtype  string
		layout string
		want   string
	}{
		{"forward fp32 3x3 pad 1", Problem{N: 1, C: 3, H: 32, W: 32, K: 64, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
			Forward, "FP32", "NCHW", "3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP32-F"},
		{"forward fp16 1x1", Problem{N: 16, C: 512, H: 13, W: 13, K: 1000, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
			Forward, "FP16", "NCHW", "512-13-13-1x1-1000-13-13-16-0x0-1x1-1x1-0-NCHW-FP16-F"},
		{"backward data starts with K", Problem{N: 16, C: 512, H: 13, W: 13, K: 1000, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
			BackwardData, "FP16", "NCHW", "1000-13-13-1x1-512-13-13-16-0x0-1x1-1x1-0-NCHW-FP16-B"},
		{"grouped has _g suffix", Problem{N: 16, C: 1024, H: 14, W: 14, K: 1024, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 32},
			BackwardData, "FP16", "NCHW", "1024-14-14-3x3-1024-14-14-16-1x1-1x1-1x1-0-NCHW-FP16-B_g32"},
		{"strided backward weights swaps spatial dims", Problem{N: 16, C: 1024, H: 14, W: 14, K: 2048, R: 1, S: 1, StrideH: 2, StrideW: 2, DilH: 1, DilW: 1, Groups: 1},
			BackwardWeights, "FP32", "NCHW", "2048-7-7-1x1-1024-14-14-16-0x0-2x2-1x1-0-NCHW-FP32-W"},
		{"three layouts", Problem{N: 8, C: 640, H: 16, W: 16, K: 1280, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
			BackwardData, "FP32", "NHWC-NHWC-NHWC", "1280-16-16-1x1-640-16-16-8-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP32-B"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := FormatKey(tc.p, tc.dir, tc.dtype, tc.layout); got != tc.want {
				t.Errorf("FormatKey = %q, want %q", got, tc.want)
			}
			if tc.dir == Forward && tc.dtype == "FP32" && tc.layout == "NCHW" {
				if got := tc.p.Key(); got != tc.want {
					t.Errorf("Key = %q, want %q", got, tc.want)
				}
			}
			p, dir, dtype, layout, err := ParseKey(tc.want)
			if err != nil {
				t.Fatalf("ParseKey: %v", err)
			}
			if p != tc.p || dir != tc.dir || dtype != tc.dtype || layout != tc.layout {
				t.Errorf("ParseKey = %+v %s %s %s, want %+v %s %s %s", p, dir, dtype, layout, tc.p, tc.dir, tc.dtype, tc.layout)
			}
		})
	}
}

func TestNetworkConfig(t *testing.T) {
	p := Problem{N: 1, C: 3, H: 32, W: 32, K: 64, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	if got, want := p.NetworkConfig(), "3x32x32x3x3x64x32x32x1xNCHWxFP32x1x1x1x1x1x1x1xFxDefault"; got != want {
		t.Errorf("NetworkConfig = %q, want %q", got, want)
	}
	p.Groups, p.C, p.K, p.StrideH = 3, 6, 9, 2
	if got, want := p.NetworkConfig(), "6x32x32x3x3x9x16x32x1xNCHWxFP32x1x1x2x1x1x1x3xFxDefault"; got != want {
		t.Errorf("NetworkConfig = %q, want %q", got, want)
	}
}

func TestParseKeyRejects(t *testing.T) {
	cases := []struct{ key, want string }{
		{"3-32-32-32-3x3x3-64-32-32-32-1-1x1x1-1x1x1-1x1x1-0-NCDHW-FP32-F", "3-D"},
		{"3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP32-X", "direction"},
		{"3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-1-NCHW-FP32-F", "bias"},
		{"3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP8-F_ciFP8", "suffix"},
		{"3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP32-F_g1", "group suffix"},
		{"3-32-32-3x3-64-32-32-1-1x1-1x1-0-NCHW-FP32-F", "fields"},
		{"3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NHWC-NHWC-FP32-F", "fields"},
		{"3-32-32-3x3-64-32-32-one-1x1-1x1-1x1-0-NCHW-FP32-F", "batch"},
		{"03-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP32-F", "in channels"},
		{"3-32-32-3x3-64-32-32-1-1x1-1-1x1-0-NCHW-FP32-F", "stride"},
		{"3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-nchw-FP32-F", "token"},
		// Output size inconsistent with the rest (4x4 with pad 1, stride 2, dilation 3 from 4x4 is 3x3).
		{"576-4-4-1x1-192-4-4-8-1x1-2x2-3x3-0-NCHW-FP32-F", "does not follow"},
		{"3-32-32-3x3-64-32-32-1-1x1-0x1-1x1-0-NCHW-FP32-F", "stride_h must be >= 1"},
		{"6-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP32-F_g4", "divisible by group_count"},
	}
	for _, tc := range cases {
		_, _, _, _, err := ParseKey(tc.key)
		if err == nil {
			t.Errorf("ParseKey(%q) accepted it", tc.key)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseKey(%q) error %q, want one line mentioning %q", tc.key, err, tc.want)
		}
	}
}

// Every key of MIOpen's real gfx942 system find-db must parse and
// re-serialize to itself, since the find-db reader relies on ParseKey.
func TestParseKeySystemFindDb(t *testing.T) {
	path := sharedFile(t, "miopen-db/gfx942130.HIP.fdb.txt")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	keys, dirs, groups := 0, map[Direction]int{}, 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		key, _, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("line %d has no '=': %.80q", keys+1, line)
		}
		keys++
		p, dir, dtype, layout, err := ParseKey(key)
		if err != nil {
			t.Errorf("line %d: %v", keys, err)
			continue
		}
		if back := FormatKey(p, dir, dtype, layout); back != key {
			t.Errorf("line %d: round trip %q -> %q", keys, key, back)
		}
		dirs[dir]++
		if p.Groups > 1 {
			groups++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if keys != 9600 {
		t.Errorf("read %d keys, the file has 9600 records", keys)
	}
	if dirs[Forward] == 0 || dirs[BackwardData] == 0 || dirs[BackwardWeights] == 0 || groups == 0 {
		t.Errorf("expected F, B, W and grouped keys; got %v and %d grouped", dirs, groups)
	}
}
