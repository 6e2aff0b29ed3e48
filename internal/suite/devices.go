package suite

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// DeviceVariables are the variables a run is pinned to one device with:
// CUDA's runtime reads CUDA_VISIBLE_DEVICES and HIP's HIP_VISIBLE_DEVICES
// (HIP also reads CUDA_VISIBLE_DEVICES). Each is set to the device's id as
// the host's runtimes name it (an index, or an NVIDIA GPU-... UUID), so in
// the run that device is the only one, and device 0.
var DeviceVariables = []string{"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"}

// ParseDevices reads a list of device ids, "0,1,2,3": each as the
// runtimes' visible-device variables take one, each once.
func ParseDevices(s string) ([]string, error) {
	var out []string
	for id := range strings.SplitSeq(s, ",") {
		id = strings.TrimSpace(id)
		switch {
		case id == "":
			return nil, fmt.Errorf("%q: want device ids separated by commas, e.g. 0,1,2,3", s)
		case strings.ContainsAny(id, " \t=;"):
			return nil, fmt.Errorf("%q: %q is not a device id (an index such as 0, or a GPU-... UUID)", s, id)
		case slices.Contains(out, id):
			return nil, fmt.Errorf("%q: device %s is given twice", s, id)
		}
		out = append(out, id)
	}
	return out, nil
}

// pinEnv is what a run pinned to device id adds to its environment.
func pinEnv(id string) []string {
	out := make([]string, len(DeviceVariables))
	for i, v := range DeviceVariables {
		out[i] = v + "=" + id
	}
	return out
}

// CheckPinnable says whether f's checks can be pinned to devices: no
// env of the suite, of a check or of a variant may choose the visible
// devices, which pinning sets for every run.
func CheckPinnable(f *File, variants []Variant) error {
	sets := func(env []string) string {
		for _, kv := range env {
			name, _, _ := strings.Cut(kv, "=")
			if slices.Contains(DeviceVariables, name) {
				return kv
			}
		}
		return ""
	}
	if kv := sets(f.Env); kv != "" {
		return &Error{File: f.Path, Line: f.EnvLine, Msg: fmt.Sprintf("env sets %s, which pinning each check to one device sets for every run", kv)}
	}
	for _, c := range f.Checks {
		if kv := sets(c.Env); kv != "" {
			return &Error{File: f.Path, Line: c.Line, Msg: fmt.Sprintf("check %q: env sets %s, which pinning each check to one device sets for every run", c.Name, kv)}
		}
	}
	for _, v := range variants {
		if kv := sets(v.Env); kv != "" {
			return fmt.Errorf("the environment %s sets %s, which pinning each check to one device sets for every run", v.Label, kv)
		}
	}
	return nil
}

// lanes hand out the places runs start in: at most jobs runs at once
// over the devices, an exclusive run alone on its device. With one device
// it is the single-device rule: an exclusive run waits for every run
// before it to end, and nothing starts beside it.
type lanes struct {
	ctx     context.Context
	mu      sync.Mutex
	cond    *sync.Cond
	free    int    // runs that may still start
	running []int  // runs going, by device
	alone   []bool // an exclusive run holds the device
	stop    func() bool
}

func newLanes(ctx context.Context, jobs, devices int) *lanes {
	l := &lanes{ctx: ctx, free: max(jobs, 1), running: make([]int, max(devices, 1)), alone: make([]bool, max(devices, 1))}
	l.cond = sync.NewCond(&l.mu)
	// An ended ctx wakes whoever waits for a lane.
	l.stop = context.AfterFunc(ctx, func() {
		l.mu.Lock()
		l.cond.Broadcast()
		l.mu.Unlock()
	})
	return l
}

func (l *lanes) close() { l.stop() }

// acquire waits until a run may start and takes its place: for a run
// that may have others beside it, the device with the fewest runs going
// (the first among equals) that no exclusive run holds; for an exclusive
// run, the first device with nothing going. It returns the device's
// index, or false when ctx ended first.
func (l *lanes) acquire(exclusive bool) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if l.ctx.Err() != nil {
			return -1, false
		}
		if d := l.pick(exclusive); d >= 0 {
			l.free--
			l.running[d]++
			l.alone[d] = exclusive
			return d, true
		}
		l.cond.Wait()
	}
}

func (l *lanes) pick(exclusive bool) int {
	if l.free == 0 {
		return -1
	}
	best := -1
	for d, n := range l.running {
		if l.alone[d] || exclusive && n > 0 {
			continue
		}
		if best < 0 || n < l.running[best] {
			best = d
		}
	}
	return best
}

// release gives back the place a run took on device d.
func (l *lanes) release(d int) {
	l.mu.Lock()
	l.free++
	l.running[d]--
	if l.running[d] == 0 {
		l.alone[d] = false
	}
	l.cond.Broadcast()
	l.mu.Unlock()
}
