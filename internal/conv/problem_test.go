package conv

import (
	"math"
	"strings"
	"testing"
)

// base is a small valid problem the invalid cases modify.
func base() Problem {
	return Problem{N: 1, C: 3, H: 32, W: 32, K: 64, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*Problem)
		want   string
	}{
		{"zero batch", func(p *Problem) { p.N = 0 }, "batchsize (N) must be >= 1, got 0"},
		{"zero channels", func(p *Problem) { p.C = 0 }, "in_channels (C) must be >= 1"},
		{"negative height", func(p *Problem) { p.H = -4 }, "in_h (H) must be >= 1, got -4"},
		{"zero width", func(p *Problem) { p.W = 0 }, "in_w (W)"},
		{"zero out channels", func(p *Problem) { p.K = 0 }, "out_channels (K)"},
		{"zero filter height", func(p *Problem) { p.R = 0 }, "fil_h (R)"},
		{"zero filter width", func(p *Problem) { p.S = 0 }, "fil_w (S)"},
		{"zero stride h", func(p *Problem) { p.StrideH = 0 }, "invalid problem: stride_h must be >= 1, got 0"},
		{"zero stride w", func(p *Problem) { p.StrideW = 0 }, "stride_w must be >= 1"},
		{"zero dilation h", func(p *Problem) { p.DilH = 0 }, "dilation_h must be >= 1"},
		{"zero dilation w", func(p *Problem) { p.DilW = 0 }, "dilation_w must be >= 1"},
		{"negative pad", func(p *Problem) { p.PadH = -1 }, "pad_h must be >= 0, got -1"},
		{"negative pad w", func(p *Problem) { p.PadW = -2 }, "pad_w must be >= 0, got -2"},
		{"zero groups", func(p *Problem) { p.Groups = 0 }, "group_count must be >= 1, got 0"},
		{"C not divisible", func(p *Problem) { p.Groups = 2 }, "invalid problem: in_channels (C=3) must be divisible by group_count (2)"},
		{"K not divisible", func(p *Problem) { p.C, p.K, p.Groups = 4, 6, 4 }, "out_channels (K=6) must be divisible by group_count (4)"},
		{"filter taller than input", func(p *Problem) { p.H, p.PadH, p.R = 2, 0, 5 }, "output height"},
		{"dilated filter wider than input", func(p *Problem) { p.PadW, p.DilW = 0, 20 }, "output width"},
		{"input past int32", func(p *Problem) { p.N, p.C, p.H, p.W = 1024, 1024, 64, 64 }, "input x (N*C*H*W) has 4294967296 elements"},
		{"weights past int32", func(p *Problem) { p.C, p.K, p.R, p.S, p.PadH, p.PadW = 65536, 65536, 1, 1, 0, 0 }, "weights w"},
		{"output past int32", func(p *Problem) { p.H, p.W, p.PadH, p.PadW, p.K = 1, 1, 40000, 40000, 1<<10 }, "output y"},
		{"huge field", func(p *Problem) { p.N = math.MaxInt32 + 1 }, "batchsize (N) must be <= 2147483647"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.modify(&p)
			err := p.Validate()
			if err == nil {
				t.Fatalf("Validate accepted %v", p)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.HasPrefix(msg, "invalid problem: ") || strings.Contains(msg, "\n") {
				t.Errorf("Validate() = %q, want one line containing %q", msg, tc.want)
			}
		})
	}
}

func TestProblemGeometry(t *testing.T) {
	cases := []struct {
		p              Problem
		outH, outW     int
		flops          int64
		read, written  int64
		driverArgument string
	}{
		{base(), 32, 32, 2 * 3 * 9 * 64 * 32 * 32, 4 * (3*32*32 + 64*3*9), 4 * 64 * 32 * 32,
			"-n 1 -c 3 -H 32 -W 32 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1"},
		{Problem{N: 2, C: 8, H: 17, W: 9, K: 4, R: 3, S: 2, PadH: 2, PadW: 0, StrideH: 2, StrideW: 3, DilH: 2, DilW: 1, Groups: 2},
			// (17+4-4-1)/2+1 = 9, (9+0-1-1)/3+1 = 3
			9, 3, 2 * 2 * 4 * 3 * 2 * 4 * 9 * 3, 4 * (2*8*17*9 + 4*4*3*2), 4 * 2 * 4 * 9 * 3,
			"-n 2 -c 8 -H 17 -W 9 -k 4 -y 3 -x 2 -p 2 -q 0 -u 2 -v 3 -l 2 -j 1 -g 2"},
	}
	for _, tc := range cases {
		p := tc.p
		if err := p.Validate(); err != nil {
			t.Fatalf("%v: %v", p, err)
		}
		if p.OutH() != tc.outH || p.OutW() != tc.outW {
			t.Errorf("%v: out %dx%d, want %dx%d", p, p.OutH(), p.OutW(), tc.outH, tc.outW)
		}
		if p.Flops() != tc.flops || p.BytesRead() != tc.read || p.BytesWritten() != tc.written {
			t.Errorf("%v: flops %d read %d written %d, want %d %d %d", p, p.Flops(), p.BytesRead(), p.BytesWritten(), tc.flops, tc.read, tc.written)
		}
		if p.String() != tc.driverArgument {
			t.Errorf("String = %q, want %q", p.String(), tc.driverArgument)
		}
		back, err := ParseDriverArgs("MIOpenDriver conv " + p.String() + " -F 1")
		if err != nil || back != p {
			t.Errorf("ParseDriverArgs(String()) = %v, %v; want %v", back, err, p)
		}
	}
}

func TestParseDriverArgs(t *testing.T) {
	p, err := ParseDriverArgs("conv -n 4 --in_channels=16 -k 8 -g 2")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultDriverProblem
	want.N, want.C, want.K, want.Groups = 4, 16, 8, 2
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	for in, msg := range map[string]string{
		"-n":              "has no value",
		"-n x":            "not an integer",
		"-z same":         "not an integer",
		"-Z 1":            "unknown or unsupported driver flag",
		"-F 2":            "only forward",
		"-u 0":            "stride_h must be >= 1",
		"conv -c 3 -g 2":  "divisible by group_count",
		"--batchsize= -3": "not an integer",
	} {
		if _, err := ParseDriverArgs(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseDriverArgs(%q) error %v, want one containing %q", in, err, msg)
		}
	}
}

func TestStatsLine(t *testing.T) {
	// A MIOpenDriver run of this problem printed flopCnt 309237645312 and
	// 121792 GFLOPs at 2.539060 ms (its byte counts were fp16; these are fp32).
	p := Problem{N: 1, C: 256, H: 512, W: 512, K: 256, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	want := "stats: fwd-conv3x3u1, 1, 256, 512, 512, 3, 3, 256,  309237645312, 270794752, 268435456, 121792, 212, 2.539060"
	if got := p.StatsLine(2.539060); got != want {
		t.Errorf("StatsLine =\n %s\nwant\n %s", got, want)
	}
	if !strings.HasPrefix(StatsHeader, "stats: name, n, c, ho, wo") {
		t.Errorf("header %q", StatsHeader)
	}
	if got := base().StatsLine(0); !strings.HasSuffix(got, ", 0, 0, 0.000000") {
		t.Errorf("zero time: %q", got)
	}
}
