package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// ReplayOptions are the facts a replay takes besides the records: the
// program, how it ended and what its file said, as a run would have
// found them.
type ReplayOptions struct {
	Program    string
	Args       []string
	Path       string
	Exit       Exit
	Executable ProgramFile
	Limits     Limits
	// Rules judge guards and hazards; nil means BuiltinRules.
	Rules *RulesTables
}

// maxRecord bounds one line of a replayed stream.
const maxRecord = 1 << 20

// Replay reads saved observer records and judges them as a run that saw
// them would: one record a line, each as the observer sends it (MT1 and
// tab-separated fields), or as an Event in JSON (a line starting with
// "{"); blank lines and lines starting with "#" are skipped, and a record
// that does not parse is counted as malformed, as a run counts it.
// Callers are named from the records alone (no object file is read), so
// that a stream saved on one machine replays the same on any other.
func Replay(records io.Reader, o ReplayOptions) (*Result, error) {
	coll := newCollector(o.Limits, nil)
	coll.tables = o.Rules
	s := bufio.NewScanner(records)
	s.Buffer(make([]byte, 64<<10), maxRecord)
	for s.Scan() {
		line := bytes.TrimSpace(s.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		e, err := replayEvent(line)
		switch {
		case err != nil:
			coll.malformed++
		case e.Kind == kindEOF:
		default:
			coll.add(e)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("reading observer records: %w", err)
	}
	r := coll.result()
	r.Program, r.Args, r.Path, r.Exit, r.Executable = o.Program, o.Args, o.Path, o.Exit, o.Executable
	return r, nil
}

// replayEvent parses one saved record: JSON when it starts with "{", the
// observer's own form otherwise.
func replayEvent(line []byte) (Event, error) {
	if line[0] != '{' {
		return ParseEvent(line)
	}
	// What a JSON record leaves out is what the observer leaves out: an
	// end or graph record without a node count does not know it.
	e := Event{Nodes: -1, Device: -1}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Event{}, err
	}
	if e.Kind == "" {
		return Event{}, errNotRecord
	}
	return e, nil
}
