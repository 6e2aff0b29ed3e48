package trace

import (
	"sort"

	"miotool/internal/hip"
)

// FirstRefused is the capture's first culprit: its earliest refused call,
// made before its end, that does not only report an earlier refusal (901);
// where it has none, its earliest refused call of any kind; nil when none
// was refused.
func (c *Capture) FirstRefused() *Call {
	var first, any *Call
	for _, call := range c.Refused {
		if any == nil || call.Time < any.Time {
			any = call
		}
		if call.Consequence() || (c.End != nil && call.Time > c.End.Time) {
			continue
		}
		if first == nil || call.Time < first.Time {
			first = call
		}
	}
	if first == nil {
		return any
	}
	return first
}

// Consequence is what followed a capture's first refused call, folded:
// the calls one thread made that returned one result.
type Consequence struct {
	PID, TID   int
	ThreadName string
	Python     PyStack
	Result     hip.Code
	// Calls counts them and ByName by base name; First is the earliest.
	Calls  int
	ByName map[string]int
	First  int64
}

// Consequences folds the capture's refused calls other than first by
// thread and result, in the order each first happened.
func (c *Capture) Consequences(first *Call) []Consequence {
	type key struct {
		pid, tid int
		result   hip.Code
	}
	index := map[key]int{}
	var out []Consequence
	for _, call := range c.Refused {
		if call == first {
			continue
		}
		k := key{call.PID, call.TID, call.Result}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, Consequence{PID: call.PID, TID: call.TID, Result: call.Result, ByName: map[string]int{}, First: call.Time})
		}
		q := &out[i]
		q.Calls++
		q.ByName[BaseName(call.Name)]++
		if call.Time <= q.First {
			q.First = call.Time
		}
		if q.ThreadName == "" {
			q.ThreadName = call.ThreadName
		}
		if q.Python.State == PyNone {
			q.Python = call.Python
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].First < out[j].First })
	return out
}
