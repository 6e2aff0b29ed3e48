package report

import (
	"testing"
)

// pinnedSuite is a host's suite run whose one check ran once on each of
// the devices given, as report --devices pins them.
func pinnedSuite(host string, ids ...string) *SuiteResult {
	s := hostSuite(host, h200)
	for i, id := range ids {
		r := run(host, i+1, Pass, "", 1)
		r.PinnedDevice = id
		s.Checks[0].Runs = append(s.Checks[0].Runs, r)
	}
	return s
}

// The Devices cell of a check lists the devices its runs used: a pinned
// run (report --devices) with the id it was pinned to, each id once, an
// index before a UUID and by number; a pinned run that reported no device
// by its id alone; a device two hosts share with its host. The run's id
// goes through the JSON, and a merge keeps it.
func TestDevicesCellNamesPinnedDevices(t *testing.T) {
	errored := func(s *SuiteResult) *SuiteResult {
		r := &s.Checks[0].Runs[len(s.Checks[0].Runs)-1]
		r.Verdict, r.ExitCode, r.Device = Error, -1, Device{}
		return s
	}
	unpinned := hostSuite("node1", h200, Pass)
	unpinned.Checks[0].Runs[0].Iteration, unpinned.Checks[0].Runs[0].Order = 2, 2
	mixed := pinnedSuite("node1", "1")
	mixed.Checks[0].Runs = append(mixed.Checks[0].Runs, unpinned.Checks[0].Runs[0])
	merged := func(parts ...*SuiteResult) *SuiteResult {
		sources := []string{"a.json", "b.json", "c.json"}[:len(parts)]
		m, err := MergeSuites(parts, sources)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		name string
		s    *SuiteResult
		want string
	}{
		{"not pinned", hostSuite("node1", h200, Pass, Pass), "NVIDIA H200 (sm_90)"},
		{"one device", pinnedSuite("node1", "2", "2"), "NVIDIA H200 (sm_90) on device 2"},
		{"by number, then UUIDs", pinnedSuite("node1", "GPU-77", "10", "2", "GPU-5e", "0", "2"), "NVIDIA H200 (sm_90) on devices 0, 2, 10, GPU-5e, GPU-77"},
		{"a pinned run with no device reported", errored(pinnedSuite("node1", "0", "3")), "NVIDIA H200 (sm_90) on device 0; device 3"},
		{"pinned and not", mixed, "NVIDIA H200 (sm_90) on device 1; NVIDIA H200 (sm_90)"},
		{"two hosts", merged(pinnedSuite("node1", "0", "1"), pinnedSuite("node2", "1")),
			"NVIDIA H200 (sm_90) on devices 0, 1 of node1; NVIDIA H200 (sm_90) on device 1 of node2"},
		{"no device", errored(hostSuite("node1", h200, Pass)), "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range []*SuiteResult{tc.s, roundTrip(t, tc.s)} {
				if got := s.Checklist().Rows[0].Cells[2]; got != tc.want {
					t.Errorf("Devices cell %q, want %q", got, tc.want)
				}
			}
		})
	}
	back := roundTrip(t, pinnedSuite("node1", "GPU-5e6f7a8b"))
	if got := back.Checks[0].Runs[0].PinnedDevice; got != "GPU-5e6f7a8b" {
		t.Errorf("read back, the run was pinned to %q", got)
	}
}
