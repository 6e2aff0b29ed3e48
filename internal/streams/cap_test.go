package streams

import (
	"os"
	"testing"

	"miotool/internal/hip"
	"miotool/internal/streams/streamtest"
)

// The backlog cap derives from GPU_MAX_HW_QUEUES: two queues stay free, at
// least one stream may drain, and an unset, non-positive or unparseable
// value counts as HIP's default of 4. Negative values once wrapped to huge
// unsigned caps.
func TestTheBacklogCapFromGPUMaxHWQueues(t *testing.T) {
	for _, tc := range []struct {
		raw        string
		set        bool
		wantQueues int
		wantCap    int
		wantNote   bool
	}{
		{"", false, 4, 2, false},
		{"", true, 4, 2, true},
		{"   ", true, 4, 2, true},
		{"abc", true, 4, 2, true},
		{"4abc", true, 4, 2, true},
		{"3.5", true, 4, 2, true},
		{"0x10", true, 4, 2, true},
		{"99999999999999999999", true, 4, 2, true},
		{"0", true, 4, 2, true},
		{"-1", true, 4, 2, true},
		{"-9223372036854775808", true, 4, 2, true},
		{"1", true, 1, 1, false},
		{"2", true, 2, 1, false},
		{"3", true, 3, 1, false},
		{"4", true, 4, 2, false},
		{" 6 ", true, 6, 4, false},
		{"+8", true, 8, 6, false},
		{"16", true, 16, 14, false},
		{"70000", true, 1 << 16, 1<<16 - 2, true},
	} {
		q, note := hip.ParseHWQueues(tc.raw, tc.set)
		if q != tc.wantQueues || (note != "") != tc.wantNote {
			t.Errorf("ParseHWQueues(%q, set=%t) = %d, %q; want %d with a note: %t", tc.raw, tc.set, q, note, tc.wantQueues, tc.wantNote)
		}
		if got := MaxDrainingFor(q); got != tc.wantCap {
			t.Errorf("MaxDrainingFor(%d) (from %q) = %d, want %d", q, tc.raw, got, tc.wantCap)
		}
	}
	for _, q := range []int{0, -1, -1 << 62} {
		if got := MaxDrainingFor(q); got != 2 {
			t.Errorf("MaxDrainingFor(%d) = %d, want the default's 2", q, got)
		}
	}
}

// DefaultMaxDraining and a tracker made with MaxDraining 0 read
// GPU_MAX_HW_QUEUES from the environment.
func TestTheDefaultCapReadsTheEnvironment(t *testing.T) {
	dev := streamtest.NewSim(t, hip.DialectHIP)
	for _, tc := range []struct {
		name  string
		value string
		unset bool
		want  int
	}{
		{"unset", "", true, 2},
		{"three", "3", false, 1},
		{"eight", "8", false, 6},
		{"negative", "-5", false, 2},
		{"garbage", "many", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(hip.EnvHWQueues, tc.value)
			if tc.unset {
				os.Unsetenv(hip.EnvHWQueues) // t.Setenv restores the original afterwards
			}
			if got := DefaultMaxDraining(); got != tc.want {
				t.Errorf("DefaultMaxDraining() = %d, want %d", got, tc.want)
			}
			tr, err := New(dev, Options{})
			streamtest.Must(t, "New", err)
			defer tr.Close()
			if got := tr.MaxDraining(); got != tc.want {
				t.Errorf("tracker cap = %d, want %d", got, tc.want)
			}
			if tr.Policy() != Worker {
				t.Errorf("default policy %s, want worker", tr.Policy())
			}
		})
	}
}

// Bad options are refused with a message naming the value.
func TestNewAndParsePolicyRejectBadInput(t *testing.T) {
	dev := streamtest.NewSim(t, hip.DialectHIP)
	for _, tc := range []struct {
		name string
		dev  hip.Device
		opts Options
	}{
		{"nil device", nil, Options{}},
		{"unknown policy", dev, Options{Policy: "eager"}},
		{"negative cap", dev, Options{MaxDraining: -3}},
	} {
		if tr, err := New(tc.dev, tc.opts); err == nil {
			tr.Close()
			t.Errorf("%s: accepted", tc.name)
		}
	}
	for _, p := range Policies {
		if got, err := ParsePolicy(string(p)); err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %q, %v", p, got, err)
		}
	}
	if _, err := ParsePolicy("Worker"); err == nil {
		t.Error(`ParsePolicy("Worker") accepted a wrongly cased name`)
	}
}
