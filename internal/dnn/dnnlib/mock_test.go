package dnnlib_test

import (
	"fmt"
	"testing"

	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
	"miotool/internal/dnn/dnnlib/dnntest"
	"miotool/internal/hip/gpulib/gputest"
)

// The tests of the shared core run it against testdata/mockdnn.c, the
// smallest library built on the stand-ins' shared header, so that they
// check the header too. Without gcc they skip.

// testStatus is the stand-in's status type.
type testStatus int32

const (
	statusBad      testStatus = 2
	statusInjected testStatus = 7
	statusInternal testStatus = 9
)

var testStatusNames = map[testStatus]string{0: "TEST_SUCCESS", statusBad: "TEST_BAD_PARAM", statusInjected: "TEST_INJECTED"}

func (s testStatus) String() string {
	if n, ok := testStatusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("TEST_STATUS(%d)", int32(s))
}

const (
	mockName   = "libmockdnn"
	mockSoname = "libmockdnn.so.1"
)

var stand = dnntest.NewStandIn("testdata/mockdnn.c", mockSoname)

func TestMain(m *testing.M) { gputest.Main(m, stand.Remove) }

// mock holds the stand-in's entry points.
var mock struct {
	create, destroy, setStream, getStream                uintptr
	createTensor, destroyTensor, setTensor               uintptr
	createConv, destroyConv, setConv, outputDim, forward uintptr
	scale                                                uintptr
}

func mockTable() []dl.Symbol {
	return []dl.Symbol{
		{Name: "dnnCreate", Addr: &mock.create},
		{Name: "dnnDestroy", Addr: &mock.destroy},
		{Name: "dnnSetStream", Addr: &mock.setStream},
		{Name: "dnnGetStream", Addr: &mock.getStream},
		{Name: "dnnCreateTensor", Addr: &mock.createTensor},
		{Name: "dnnDestroyTensor", Addr: &mock.destroyTensor},
		{Name: "dnnSetTensor", Addr: &mock.setTensor},
		{Name: "dnnCreateConv", Addr: &mock.createConv},
		{Name: "dnnDestroyConv", Addr: &mock.destroyConv},
		{Name: "dnnSetConv", Addr: &mock.setConv},
		{Name: "dnnOutputDim", Addr: &mock.outputDim},
		{Name: "dnnForward", Addr: &mock.forward},
		{Name: "dnnScale", Addr: &mock.scale},
	}
}

// explain is the stand-in's "own text" for a failed status.
func explain(st int32) string { return fmt.Sprintf("the stand-in says %d", st) }

// openMock loads the stand-in with Load, returns its core and clears the
// log.
func openMock(t *testing.T) *dnnlib.Core[testStatus] {
	t.Helper()
	stand.Require(t)
	rec, err := dnnlib.Load(stand.Spec(mockName), mockTable(), "not the stand-in?")
	must(t, err)
	core := dnnlib.NewCore[testStatus](mockName, rec, explain)
	stand.ResetLog()
	return &core
}

var (
	must       = gputest.Must
	wantStatus = dnntest.WantStatus[testStatus]
)
