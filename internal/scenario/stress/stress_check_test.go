package stress

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"miotool/internal/aiheur/builtin"
	"miotool/internal/aiheur/cache"
	"miotool/internal/conv"
	"miotool/internal/hip"
)

// brokenConv is the stress scenario's conv source with every twin passed
// through breakTwin: a convolution kernel with a defect.
func brokenConv(breakTwin func(hip.GoKernel) hip.GoKernel) *hip.KernelSource {
	base := stressConvSource()
	src := &hip.KernelSource{Name: base.Name + "-broken", Text: base.Text, Kernels: base.Kernels,
		Twins: map[string]hip.GoKernel{}, PTX: base.PTX}
	for name, twin := range base.Twins {
		src.Twins[name] = breakTwin(twin)
	}
	return src
}

// withY runs twin with y moved by delta floats.
func withY(twin hip.GoKernel, delta int) hip.GoKernel {
	return func(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
		moved := append([]hip.KernelArg(nil), args...)
		moved[2] = moved[2].(hip.DevPtr) + hip.DevPtr(4*delta)
		return twin(mem, grid, block, moved)
	}
}

// outputSize is a launch's Ho*Wo*N*K from conv's kernel arguments.
func outputSize(args []hip.KernelArg) int {
	return int(args[3].(int32)) * int(args[7].(int32)) * int(args[10].(int32)) * int(args[11].(int32))
}

// A convolution that does not run, runs short, leaves an element
// unwritten, runs without its alpha, or writes the wrong place makes the
// run's result wrong, whatever the parity
// of the iteration count (with an even count the final output lands in the
// buffer that held the input ones), while the same sources unbroken pass.
func TestStressCheckCatchesBrokenConvolutions(t *testing.T) {
	for _, tt := range []struct {
		name  string
		twin  func(hip.GoKernel) hip.GoKernel
		want  string // in WrongDetail
		right bool
	}{
		{"unbroken", func(k hip.GoKernel) hip.GoKernel { return k }, "", true},
		{"no-op", func(hip.GoKernel) hip.GoKernel {
			return func(hip.Memory, hip.Dim3, hip.Dim3, []hip.KernelArg) error { return nil }
		}, "poison", false},
		{"writes one element later", func(k hip.GoKernel) hip.GoKernel { return withY(k, 1) }, "poison", false},
		{"writes into its input", func(k hip.GoKernel) hip.GoKernel {
			return func(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
				into := append([]hip.KernelArg(nil), args...)
				into[2] = into[0]
				return k(mem, grid, block, into)
			}
		}, "poison", false},
		{"writes one element past its output", func(k hip.GoKernel) hip.GoKernel {
			return func(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
				if err := k(mem, grid, block, args); err != nil {
					return err
				}
				n := outputSize(args)
				y, err := mem.Float32s(args[2].(hip.DevPtr), n+1)
				if err == nil {
					y[n] = y[n-1]
				}
				return err
			}
		}, "element after the output was written", false},
		// The per-iteration guards poison a few elements only: an interior
		// element no convolution writes is caught by the trial's poison fill.
		{"leaves an interior element unwritten", func(k hip.GoKernel) hip.GoKernel {
			return func(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
				n := outputSize(args)
				y, err := mem.Float32s(args[2].(hip.DevPtr), n)
				if err != nil {
					return err
				}
				kept := y[n/3]
				if err := k(mem, grid, block, args); err != nil {
					return err
				}
				y[n/3] = kept
				return nil
			}
		}, "poison", false},
		{"computes only the first rows", func(k hip.GoKernel) hip.GoKernel {
			return func(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
				half := append([]hip.KernelArg(nil), args...)
				half[10] = args[10].(int32) / 2 // Ho: the rows it writes
				if half[10].(int32) == 0 {
					return nil
				}
				half[5] = half[10].(int32) + 1 // H to match
				return k(mem, grid, block, half)
			}
		}, "poison", false},
		{"ignores alpha (no division)", func(k hip.GoKernel) hip.GoKernel {
			return func(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
				unscaled := append([]hip.KernelArg(nil), args...)
				unscaled[conv.NumConvArgs-1] = float32(1)
				return k(mem, grid, block, unscaled)
			}
		}, "elements are not 1", false},
	} {
		for _, iters := range []int{6, 7} {
			t.Run(fmt.Sprintf("%s, %d iterations", tt.name, iters), func(t *testing.T) {
				dev := newDevice(t, hip.DialectCUDA)
				o := Options{Threads: 2, Iters: iters, Trials: 2, Size: 40, Policy: cache.Locked, Models: builtin.FS,
					convSource: brokenConv(tt.twin)}
				run, err := RunHere(context.Background(), dev, o)
				if err != nil {
					t.Fatal(err)
				}
				if tt.right {
					if !run.OK() || run.WrongDetail != "" {
						t.Fatalf("%d iterations: wrong %d (%s)", iters, run.Wrong, run.WrongDetail)
					}
					return
				}
				if run.OK() || run.Wrong != 4 || !strings.Contains(run.WrongDetail, tt.want) {
					t.Fatalf("%d iterations: wrong %d of 4, detail %q (want one mentioning %q), sums %v", iters, run.Wrong, run.WrongDetail, tt.want, run.Sums)
				}
				if _, ok := ParseRunLine([]byte(mustLine(t, run))); !ok {
					t.Error("the wrong run's result line does not parse")
				}
			})
		}
	}
}

// mustLine is run's result line: a wrong result must still be printable
// (JSON has no NaN).
func mustLine(t *testing.T, run *RunResult) string {
	t.Helper()
	var b strings.Builder
	if err := WriteRunLine(&b, run); err != nil {
		t.Fatalf("writing a wrong result: %v", err)
	}
	return b.String()
}

// The check itself, on outputs made by hand.
func TestOutputProblem(t *testing.T) {
	const side = 3
	one := float32(1)
	for _, tt := range []struct {
		name  string
		vals  []float32 // side*side values and the one after
		after uint32
		want  []string
	}{
		{"right", []float32{1, 1, 1, 1, 1, 1, 1, 1, 1}, poisonBits, nil},
		{"one element 2, sum still right elsewhere", []float32{1, 1, 1, 1, 2, 0, 1, 1, 1}, poisonBits, []string{"2 elements are not 1", "(1, 1) is 2"}},
		{"the poison left", []float32{poison, 1, 1, 1, 1, 1, 1, 1, 1}, poisonBits, []string{"sum of finite elements 8", "(0, 0) is the poison"}},
		{"written after", []float32{1, 1, 1, 1, 1, 1, 1, 1, 1}, math.Float32bits(one), []string{"element after the output was written (1)"}},
	} {
		raw := make([]byte, 4*(side*side+1))
		for i, v := range tt.vals {
			putFloat(raw[4*i:], math.Float32bits(v))
		}
		putFloat(raw[4*side*side:], tt.after)
		out := checkOutput(raw, side)
		got := out.problem(side * side)
		if (got == "") != (tt.want == nil) {
			t.Errorf("%s: problem %q", tt.name, got)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: problem %q does not say %q", tt.name, got, w)
			}
		}
	}
}

func putFloat(b []byte, bits uint32) {
	b[0], b[1], b[2], b[3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
}

func TestFillAndGuardTwins(t *testing.T) {
	y := make([]float32, 11)
	grid, block, args := fillLaunch(0x10, 10, 1)
	if err := fillTwin(memory{0x10: y}, grid, block, args); err != nil {
		t.Fatal(err)
	}
	// One small block strides over everything; element 10 is past n.
	if err := fillTwin(memory{0x10: y}, hip.D1(1), hip.D1(2), []hip.KernelArg{hip.DevPtr(0x10), uint32(5), float32(3)}); err != nil {
		t.Fatal(err)
	}
	for i, v := range y {
		want := map[bool]float32{true: 3, false: 1}[i < 5]
		if i == 10 {
			want = 0
		}
		if v != want {
			t.Fatalf("after the fills element %d is %v, want %v", i, v, want)
		}
	}
	grid, block, args = guardLaunch(0x10, 9, poison)
	if err := guardTwin(memory{0x10: y}, grid, block, args); err != nil {
		t.Fatal(err)
	}
	for i, v := range y {
		guarded := i == 0 || i == 4 || i == 8 || i == 9
		if (math.Float32bits(v) == poisonBits) != guarded {
			t.Errorf("after the guard element %d is %v; guarded %v", i, v, guarded)
		}
	}
	for _, args := range [][]hip.KernelArg{
		{hip.DevPtr(0x10), int32(3), float32(2)},
		{hip.DevPtr(0x10), uint32(3)},
		{uint64(0x10), uint32(3), float32(2)},
	} {
		for name, twin := range map[string]hip.GoKernel{FillKernel: fillTwin, GuardKernel: guardTwin} {
			if err := twin(memory{0x10: y}, hip.D1(1), hip.D1(256), args); hip.CodeOf(err) != hip.ErrInvalidValue {
				t.Errorf("%s args %v: error %v, want an invalid value", name, args, err)
			}
		}
	}
	if err := guardTwin(memory{0x10: y}, hip.D1(1), hip.D1(32), []hip.KernelArg{hip.DevPtr(0x10), uint32(11), poison}); err == nil {
		t.Error("a guard past the allocation succeeded")
	}
}

// The fused division: alpha 1/4 gives, for every float32, the bits that
// dividing by 4 gives (the reciprocal of a power of two is exact).
func TestStressAlphaIsTheDivision(t *testing.T) {
	if stressAlpha*stressDivisor != 1 {
		t.Fatalf("alpha %v is not 1/%d", stressAlpha, stressDivisor)
	}
	var alpha, div float32 = stressAlpha, stressDivisor
	for bits := uint64(0); bits < 1<<32; bits += 65521 { // every 65521st pattern, subnormals and NaNs among them
		x := math.Float32frombits(uint32(bits))
		a, b := x*alpha, x/div
		if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
			t.Fatalf("%v (%#x): times 1/4 is %v, divided by 4 %v", x, bits, a, b)
		}
	}
}
