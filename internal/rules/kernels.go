package rules

import (
	"encoding/binary"
	"fmt"
	"time"

	"miotool/internal/hip"
)

// Kernel entry points.
const (
	SpinKernel = "miotool_spin"
	TinyKernel = "miotool_tiny"
)

// kernelText compiles with NVRTC and hiprtc without any header. The spin
// kernel reads a nanosecond clock: %globaltimer on NVIDIA, wall_clock64()
// (a constant 100 MHz counter) on AMD.
const kernelText = `// miotool capture-rules probe kernels.
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC_RTC__)
__device__ static unsigned long long miotool_now_ns() {
  return wall_clock64() * 10ull;
}
#else
__device__ static unsigned long long miotool_now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

// Keeps its stream busy for at least ns nanoseconds.
extern "C" __global__ void miotool_spin(unsigned long long ns) {
  unsigned long long start = miotool_now_ns();
  while (miotool_now_ns() - start < ns) {
  }
}

// The small piece of work a capture records.
extern "C" __global__ void miotool_tiny(unsigned int* out, unsigned int value) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out[0] = value;
  }
}
`

// kernelPTX is the same two kernels written in PTX for the CUDA backend to
// load where NVRTC is not installed (a driver-only machine). PTX 6.0 for
// sm_50 is accepted by every current driver, which compiles it for the
// device at load time.
const kernelPTX = `//
// miotool capture-rules probe kernels
//
.version 6.0
.target sm_50
.address_size 64

// miotool_spin(unsigned long long ns): spin until ns nanoseconds of
// %globaltimer have passed.
.visible .entry miotool_spin(
	.param .u64 miotool_spin_ns
)
{
	.reg .pred 	%p<2>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [miotool_spin_ns];
	mov.u64 	%rd2, %globaltimer;
$Lspin:
	mov.u64 	%rd3, %globaltimer;
	sub.s64 	%rd4, %rd3, %rd2;
	setp.lt.u64 	%p1, %rd4, %rd1;
	@%p1 bra 	$Lspin;
	ret;
}

// miotool_tiny(unsigned int* out, unsigned int value): out[0] = value in
// thread 0 of block 0.
.visible .entry miotool_tiny(
	.param .u64 miotool_tiny_out,
	.param .u32 miotool_tiny_value
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [miotool_tiny_out];
	ld.param.u32 	%r1, [miotool_tiny_value];
	mov.u32 	%r2, %tid.x;
	mov.u32 	%r3, %ctaid.x;
	or.b32 	%r4, %r2, %r3;
	setp.ne.s32 	%p1, %r4, 0;
	@%p1 bra 	$Ldone;
	cvta.to.global.u64 	%rd2, %rd1;
	st.global.u32 	[%rd2], %r1;
$Ldone:
	ret;
}
`

// Kernels is the probe's kernel source with the simulator's Go twins and
// the CUDA backend's PTX fallback.
func Kernels() *hip.KernelSource {
	return &hip.KernelSource{
		Name:    "miotool-rules",
		Text:    kernelText,
		PTX:     kernelPTX,
		Kernels: []string{SpinKernel, TinyKernel},
		Twins: map[string]hip.GoKernel{
			SpinKernel: spinTwin,
			TinyKernel: tinyTwin,
		},
	}
}

// spinTwin waits the given nanoseconds. A timer, not a busy loop: the
// simulated stream must stay busy without burning a core.
func spinTwin(_ hip.Memory, _, _ hip.Dim3, args []hip.KernelArg) error {
	if len(args) != 1 {
		return fmt.Errorf("%s: want 1 argument, got %d", SpinKernel, len(args))
	}
	ns, ok := args[0].(uint64)
	if !ok {
		return fmt.Errorf("%s: argument is %T, want uint64 nanoseconds", SpinKernel, args[0])
	}
	t := time.NewTimer(time.Duration(ns))
	<-t.C
	return nil
}

// tinyTwin stores value at out[0].
func tinyTwin(mem hip.Memory, _, _ hip.Dim3, args []hip.KernelArg) error {
	if len(args) != 2 {
		return fmt.Errorf("%s: want 2 arguments, got %d", TinyKernel, len(args))
	}
	out, ok1 := args[0].(hip.DevPtr)
	value, ok2 := args[1].(uint32)
	if !ok1 || !ok2 {
		return fmt.Errorf("%s: arguments are %T, %T; want DevPtr, uint32", TinyKernel, args[0], args[1])
	}
	b, err := mem.Bytes(out, 4)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(b, value)
	return nil
}
