package trace

import (
	"strings"
	"testing"

	"miotool/internal/hip"
)

// replayed is a PyTorch-like stream: the main thread captures in global
// mode, allocates under its own relaxed guard, launches into a side
// stream that is not capturing, and another thread's synchronize breaks
// the capture; then graphs are instantiated and launched.
const replayed = `# a comment, then a blank line

MT1	hello	7	7	100	1	/usr/bin/python3.12
{"Kind":"begin","PID":7,"TID":7,"Time":200,"API":"cuda","Name":"cuStreamBeginCapture_v2","Stream":10,"Mode":0,"Device":0,"ThreadName":"python3","Python":{"State":"frames","ThreadName":"MainThread","Frames":[{"File":"/v/lib/python3.12/site-packages/torch/cuda/graphs.py","Line":72,"Function":"CUDAGraph.capture_begin"},{"File":"/p/train.py","Line":30,"Function":"step"}]}}
MT1	call	cuda	7	7	210	x
MT1	call	7	7	210	cuda	cuLaunchKernel	0xa	0x0	0	0
{"Kind":"call","PID":7,"TID":7,"Time":220,"API":"cuda","Name":"cuMemAlloc_v2","Mode":2}
{"Kind":"call","PID":7,"TID":7,"Time":230,"API":"cuda","Name":"cuLaunchKernel","Stream":119,"Outside":true,"ThreadName":"python3","Callers":[{"Module":"/x/libtorch_cuda.so","Symbol":"side_launch","Offset":16}]}
{"Kind":"call","PID":7,"TID":9,"Time":240,"API":"cuda","Name":"cuCtxSynchronize_v2","Result":900,"ThreadName":"python3","Python":{"State":"frames","ThreadName":"metrics","Frames":[{"File":"/v/lib/python3.12/site-packages/torch/cuda/__init__.py","Line":1162,"Function":"synchronize"},{"File":"/p/train.py","Line":42,"Function":"log_metrics"}]},"Callers":[{"Module":"/x/libcudart.so.13","Symbol":"cudaDeviceSynchronize","Offset":1},{"Module":"/x/libc10_cuda.so","Symbol":"_ZN3c104cuda18device_synchronizeEv","Offset":2}]}
MT1	call	7	7	250	cuda	cuLaunchKernel	0xa	0x0	901	0
{"Kind":"end","PID":7,"TID":7,"Time":260,"API":"cuda","Name":"cuStreamEndCapture","Stream":10,"Result":901}
{"Kind":"begin","PID":7,"TID":7,"Time":300,"API":"cuda","Name":"cuStreamBeginCapture_v2","Stream":10,"Mode":0}
{"Kind":"end","PID":7,"TID":7,"Time":310,"API":"cuda","Name":"cuStreamEndCapture","Stream":10,"Graph":4096,"Nodes":0}
{"Kind":"graph","PID":7,"TID":7,"Time":320,"API":"cuda","Name":"cuGraphInstantiateWithFlags","Graph":4096,"Exec":8192,"Nodes":0}
{"Kind":"graph","PID":7,"TID":7,"Time":330,"API":"cuda","Name":"cuGraphLaunch","Exec":8192,"Stream":10}
{"Kind":"graph","PID":7,"TID":7,"Time":340,"API":"cuda","Name":"cuGraphInstantiateWithFlags","Graph":20480,"Exec":24576,"Nodes":12}
{"Kind":"graph","PID":7,"TID":7,"Time":350,"API":"cuda","Name":"cuGraphLaunch","Exec":24576,"Stream":10}
{"Kind":"graph","PID":7,"TID":7,"Time":360,"API":"cuda","Name":"cuGraphLaunch","Exec":24576,"Stream":10}
{"Kind":"graph","PID":7,"TID":7,"Time":370,"API":"cuda","Name":"cuGraphLaunch_ptsz","Exec":28672,"Stream":10}
{"Kind":"graph","PID":7,"TID":7,"Time":380,"API":"cuda","Name":"cuGraphLaunch","Exec":28672,"Result":400}
{"Kind":"call","Unknown":1}
MT1	eof	0	0	0	token
`

// TestReplay: saved records, in the observer's form and as JSON events,
// are judged as a run that saw them; what does not parse is counted.
func TestReplay(t *testing.T) {
	r, err := Replay(strings.NewReader(replayed), ReplayOptions{Program: "python3", Args: []string{"train.py"}, Exit: Exit{Code: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Program != "python3" || r.Exit.Code != 1 || r.Malformed != 2 || r.Events != 17 || len(r.Processes) != 1 {
		t.Fatalf("program %q exit %+v, %d malformed, %d events, %d processes", r.Program, r.Exit, r.Malformed, r.Events, len(r.Processes))
	}
	p := r.Processes[0]
	if p.MainThreadName != "python3" || !p.Python {
		t.Errorf("process %+v: want its main thread's name and Python", p)
	}
	if len(r.Captures) != 2 {
		t.Fatalf("%d captures", len(r.Captures))
	}
	broken, empty := r.Captures[0], r.Captures[1]
	if broken.BeginPython.Call().Where.String() != "train.py:30 in step" || broken.BeginThreadName != "python3" {
		t.Errorf("begin %q %+v", broken.BeginThreadName, broken.BeginPython)
	}
	if broken.Guarded != 1 || len(broken.Candidates) != 0 || len(r.Hazards) != 0 {
		t.Errorf("guarded %d, candidates %+v, hazards %d: want the relaxed allocation guarded", broken.Guarded, broken.Candidates, len(r.Hazards))
	}
	if len(broken.Outside) != 1 || broken.Outside[0].Stream != 119 || !broken.Outside[0].Outside || broken.Outside[0].Callers[0].Symbol != "side_launch" {
		t.Errorf("outside %+v", broken.Outside)
	}
	if f := broken.FirstRefused(); f == nil || f.TID != 9 || f.Python.ThreadName != "metrics" || f.Callers[1].Symbol != "c10::cuda::device_synchronize" {
		t.Errorf("first refused %+v", f)
	}
	if broken.End.NodesKnown || broken.End.Empty() {
		t.Errorf("an end that names no graph knows no nodes: %+v", broken.End)
	}
	if !empty.End.Empty() || empty.End.Graph != 4096 || len(r.Empty()) != 1 {
		t.Errorf("empty capture's end %+v", empty.End)
	}
	if g := r.Graphs; g != (GraphUse{Instantiations: 2, Launches: 4, Launched: 3, Uncaptured: 2}) {
		t.Errorf("graphs %+v, want 2 instantiated, 4 launches of 3 graphs, 2 not from a capture", g)
	}
	j := Judge(r, false)
	if j.Verdict != Fail || !strings.HasPrefix(j.Summary, `torch.cuda.synchronize() at train.py:42 in log_metrics, thread 9 "metrics" (cuCtxSynchronize) invalidated the global-mode capture begun at train.py:30 in step by thread 7 "MainThread" on stream 0xa; end capture 901`) {
		t.Errorf("headline %s", j.Headline())
	}
}

// TestGraphsWithoutCapture: graphs built node by node and launched, with
// no capture begun, are counted so that the SKIP says so.
func TestGraphsWithoutCapture(t *testing.T) {
	stream := `MT1	hello	5	5	1	1	/usr/bin/python3
{"Kind":"graph","PID":5,"TID":5,"Time":2,"API":"cuda","Name":"cuGraphInstantiateWithParams","Graph":1,"Exec":2,"Nodes":40}
{"Kind":"graph","PID":5,"TID":5,"Time":3,"API":"cuda","Name":"cuGraphLaunch","Exec":2}
{"Kind":"graph","PID":5,"TID":5,"Time":4,"API":"cuda","Name":"cuGraphLaunch","Exec":2}
{"Kind":"graph","PID":5,"TID":5,"Time":5,"API":"cuda","Name":"cuGraphInstantiateWithParams","Graph":3,"Exec":4,"Nodes":7}
{"Kind":"graph","PID":5,"TID":5,"Time":6,"API":"cuda","Name":"cuGraphLaunch","Exec":4}
`
	r, err := Replay(strings.NewReader(stream), ReplayOptions{Program: "python3"})
	if err != nil {
		t.Fatal(err)
	}
	j := Judge(r, false)
	if j.Verdict != NothingToCheck || j.Summary != "no capture began; 2 graphs built without capture were launched: nothing to judge" {
		t.Errorf("%s", j.Headline())
	}
}

// TestGraphTrackerIsBounded: past its bound the tracker counts what it
// can and says its counts are lower bounds.
func TestGraphTrackerIsBounded(t *testing.T) {
	g := newGraphTracker()
	for i := range graphsTracked + 5 {
		g.record(Event{Kind: kindGraph, PID: 1, API: hip.DialectCUDA, Name: "cuGraphLaunch", Exec: uint64(i + 1)})
	}
	u := g.result()
	if !u.Partial || u.Launched != graphsTracked || u.Launches != graphsTracked+5 {
		t.Errorf("%+v", u)
	}
}
