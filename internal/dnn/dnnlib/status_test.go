package dnnlib_test

import (
	"errors"
	"fmt"
	"testing"

	"miotool/internal/dnn/dnnlib"
)

func TestErrorText(t *testing.T) {
	for _, tt := range []struct {
		e    dnnlib.Error[testStatus]
		want string
	}{
		{dnnlib.Error[testStatus]{Op: "dnnForward", Status: statusBad}, "dnnForward: TEST_BAD_PARAM (2)"},
		{dnnlib.Error[testStatus]{Op: "dnnForward", Status: statusBad, Message: "  x is gone \n"}, "dnnForward: TEST_BAD_PARAM (2): x is gone"},
		{dnnlib.Error[testStatus]{Op: "dnnForward", Status: statusBad, Message: "TEST_BAD_PARAM"}, "dnnForward: TEST_BAD_PARAM (2)"},
		{dnnlib.Error[testStatus]{Op: "dnnScale", Status: 1234, Message: "odd"}, "dnnScale: TEST_STATUS(1234) (1234): odd"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.e, got, tt.want)
		}
	}
}

// otherStatus is a second library's status type: its errors are foreign
// to the first's.
type otherStatus int32

func (s otherStatus) String() string { return fmt.Sprintf("OTHER(%d)", int32(s)) }

func TestStatusOf(t *testing.T) {
	ours := fmt.Errorf("while finding: %w", &dnnlib.Error[testStatus]{Op: "dnnForward", Status: statusInjected})
	theirs := &dnnlib.Error[otherStatus]{Op: "otherCall", Status: 7}
	for _, tt := range []struct {
		name string
		err  error
		want testStatus
	}{
		{"nil", nil, 0},
		{"wrapped", ours, statusInjected},
		{"plain", errors.New("x"), statusInternal},
		{"another library's", theirs, statusInternal},
	} {
		if got := dnnlib.StatusOf(tt.err, statusInternal); got != tt.want {
			t.Errorf("%s: StatusOf = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSizesAndGeometryAreCheckedBeforeTheCall(t *testing.T) {
	ok := dnnlib.Conv2d{StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	for _, tt := range []struct {
		name string
		err  error
		want string // "" for no error
	}{
		{"sizes", dnnlib.Positive("dnnSetTensor", statusBad, "n c h w", 1, 2, 3, 1<<31-1), ""},
		{"zero", dnnlib.Positive("dnnSetTensor", statusBad, "n c h w", 1, 0, 3, 4), "c=0: want a positive size"},
		{"negative", dnnlib.Positive("dnnSetTensor", statusBad, "n c h w", 1, 2, 3, -4), "w=-4: want a positive size"},
		{"huge", dnnlib.Positive("dnnSetTensor", statusBad, "n c h w", 1<<31, 2, 3, 4), "n=2147483648: larger than a C int"},
		{"unnamed", dnnlib.Positive("dnnSetTensor", statusBad, "n", 1, 0), "size 1=0: want a positive size"},
		{"geometry", dnnlib.CheckConv2d("dnnSetConv", statusBad, ok), ""},
		{"padding", dnnlib.CheckConv2d("dnnSetConv", statusBad, dnnlib.Conv2d{PadW: -1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}), "padding 0x-1 is negative"},
		{"stride", dnnlib.CheckConv2d("dnnSetConv", statusBad, dnnlib.Conv2d{StrideH: 1, DilH: 1, DilW: 1}), "stride_w=0: want a positive size"},
		{"dilation", dnnlib.CheckConv2d("dnnSetConv", statusBad, dnnlib.Conv2d{StrideH: 1, StrideW: 1, DilH: 1, DilW: 1 << 32}), "dilation_w=4294967296: larger than a C int"},
	} {
		if tt.want == "" {
			if tt.err != nil {
				t.Errorf("%s: %v", tt.name, tt.err)
			}
			continue
		}
		e := wantStatus(t, tt.err, statusBad, tt.name)
		if e.Message != tt.want || (e.Op != "dnnSetTensor" && e.Op != "dnnSetConv") {
			t.Errorf("%s: %+v, want message %q", tt.name, e, tt.want)
		}
	}
}
