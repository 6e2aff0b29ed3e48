package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"miotool/internal/report"
)

// OutputFlags are the flags that choose where and how a result is written
// and change nothing about what is checked: a suite's checks may not set
// them, since the suite sets them itself (ResultArgs), and a checklist's
// Command column leaves them out.
var OutputFlags = []string{"--format", "--junit", "--export-markdown", "--export-json", "--no-progress"}

// ResultArgs end the command line of a miotool child whose result is read
// back: one miotool/result JSON document on its standard output, and no
// progress drawn on its standard error.
func ResultArgs() []string { return []string{"--format", string(report.JSON), "--no-progress"} }

// ResultFileFlag names the file a miotool child writes its result to, so
// that the result stays apart from whatever else reaches its standard
// output (a traced program's own output does).
const ResultFileFlag = "--export-json"

// ResultFiles are the files the output flags of the running command name:
// one run writes each of them besides the --format view on standard
// output, as hyperfine's --export-* and ctest's --output-junit do.
type ResultFiles struct {
	JUnit    string // --junit FILE
	Markdown string // --export-markdown FILE
	JSON     string // --export-json FILE
}

// outputState is what IOStreams keep about the result documents: the files
// the output flags name.
type outputState struct {
	files ResultFiles
}

// output is the streams' output state, made on first use.
func (s *IOStreams) output() *outputState {
	if s.out == nil {
		s.out = &outputState{}
	}
	return s.out
}

// ResultFiles are the files the output flags name for this run.
func (s *IOStreams) ResultFiles() ResultFiles { return s.output().files }

// AddOutputFlags gives cmd, and every runnable command below it, the output
// flags --junit, --export-markdown and --export-json, and returns cmd. A
// command whose run returns its result to the runner (RunE, DeviceRunE)
// needs nothing else: the files are checked before it runs (they can be
// written, none is one of its inputs) and written, before standard output,
// when it has returned.
func AddOutputFlags(f *Factory, cmd *cobra.Command) *cobra.Command {
	files := &f.IOStreams.output().files
	var add func(c *cobra.Command)
	add = func(c *cobra.Command) {
		if c.Runnable() {
			fl := c.Flags()
			fl.StringVar(&files.JUnit, "junit", "", "also write the result as JUnit XML to `FILE`, one test case per check")
			fl.StringVar(&files.Markdown, "export-markdown", "", "also write the result as Markdown to `FILE`")
			fl.StringVar(&files.JSON, "export-json", "", "also write the result as JSON to `FILE`")
			for name, ext := range map[string]string{"junit": "xml", "export-markdown": "md", "export-json": "json"} {
				_ = c.MarkFlagFilename(name, ext)
				MarkOutputFile(c, name)
				_ = fl.SetAnnotation(name, resultFileAnnotation, []string{"true"})
			}
		}
		for _, sub := range c.Commands() {
			add(sub)
		}
	}
	add(cmd)
	return cmd
}

// document is a result that the runner writes: a single check's or a
// suite's.
type document interface {
	// exitCode is the exit status the document says.
	exitCode() int
	// fail makes the document say that the run failed with err, which
	// came beside it: an ERROR, whose exit status is err's.
	fail(err error)
	// interrupt makes the document say that in stopped the run: what
	// was measured stays, the verdict is INTERRUPTED (unless the run
	// said so itself, in its own words) and the exit status the
	// signal's.
	interrupt(in *Interruption)
	// render writes the document in format f.
	render(w io.Writer, f report.Format, opts report.Options) error
	junit(w io.Writer) error
	// exitError is how a command that rendered the document ends.
	exitError() error
}

// writeDocument writes doc to the files the output flags name and then in
// format to stdout. When a file cannot be written, none is replaced, doc
// is settled as ending with failCode (the tool's failure, unless a signal
// stopped the run), stdout gets the settled doc and the error is
// returned. A failed stdout write is kept by the stream (see
// stdoutWriter) for Main, not returned.
func (s *IOStreams) writeDocument(format report.Format, doc document, failCode int, after *afterProgram) error {
	files, err := docFiles(doc, s.output().files)
	if err == nil {
		err = writeOutputFiles(files)
	}
	if err != nil {
		err = &ExitError{Code: failCode, Err: err}
		if failCode < 128 {
			doc.fail(err) // an interrupted document stays INTERRUPTED
		}
	}
	opts := report.Options{TTY: s.IsStdoutTTY(), Color: s.ColorEnabled()}
	var rerr error
	if after == nil {
		rerr = doc.render(s.Out, format, opts)
	} else {
		rerr = renderAfterProgram(s.Out, format, doc, opts, after)
	}
	if rerr != nil && !isStdoutError(rerr) && err == nil {
		err = &ExitError{Code: ExitToolFailure, Err: fmt.Errorf("writing the result: %w", rerr)}
	}
	return err
}

// renderAfterProgram writes doc after a program's output: a newline first
// where the program's last line may be open, and JSON compacted to one
// line, so that the result is the last line whatever the program printed.
func renderAfterProgram(w io.Writer, format report.Format, doc document, opts report.Options, after *afterProgram) error {
	var buf bytes.Buffer
	if after.newlineFirst {
		buf.WriteByte('\n')
	}
	if format != report.JSON {
		if err := doc.render(&buf, format, opts); err != nil {
			return err
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	var doc1 bytes.Buffer
	if err := doc.render(&doc1, format, opts); err != nil {
		return err
	}
	if err := json.Compact(&buf, doc1.Bytes()); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// outputFile is one file an output flag names, with what goes in it.
type outputFile struct {
	flag, path string
	data       []byte
}

// docFiles renders doc for every file in files.
func docFiles(doc document, files ResultFiles) ([]outputFile, error) {
	var out []outputFile
	for _, f := range []struct {
		flag, path string
		write      func(io.Writer) error
	}{
		{"--junit", files.JUnit, doc.junit},
		{"--export-markdown", files.Markdown, func(w io.Writer) error { return doc.render(w, report.Markdown, report.Options{}) }},
		{"--export-json", files.JSON, func(w io.Writer) error { return doc.render(w, report.JSON, report.Options{}) }},
	} {
		if f.path == "" {
			continue
		}
		var buf bytes.Buffer
		if err := f.write(&buf); err != nil {
			return nil, fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
		out = append(out, outputFile{f.flag, f.path, buf.Bytes()})
	}
	return out, nil
}

// resultDocument is a single check's result.
type resultDocument struct{ r *report.Result }

func (d resultDocument) exitCode() int { return d.r.ExitCode() }

func (d resultDocument) fail(err error) {
	r := d.r
	code := ExitCodeOf(err)
	if r.Verdict != report.Interrupted {
		r.Verdict, r.Detail, r.Summary = report.Error, "", oneLineErr(exitErrorOf(err))
	}
	r.ExitStatus = 0
	if code != r.Verdict.ExitCode() {
		r.ExitStatus = code
	}
}

func (d resultDocument) interrupt(in *Interruption) {
	r := d.r
	if r.Verdict != report.Interrupted {
		// The run had finished when the signal came: what it found stays,
		// said as what the finished part showed.
		end := r.Started.Add(r.Duration)
		soFar := ""
		if r.Summary != "" {
			soFar = fmt.Sprintf("the run had finished: %s, %s", r.Verdict, r.Summary)
		}
		r.Cases = report.Cases{}
		r.Interrupt(in.Error(), report.Progress{}, 0, soFar, end)
	}
	r.ExitStatus = 0
	if code := in.ExitCode(); code != r.Verdict.ExitCode() {
		r.ExitStatus = code
	}
}

func (d resultDocument) render(w io.Writer, f report.Format, opts report.Options) error {
	return report.Render(w, f, d.r, opts)
}

// junit is the result as JUnit XML (report.WriteResultJUnit): one
// <testsuite> with one <testcase>, the check, whose message is the
// checklist status. Its verdict is the one the exit status says, so a CI
// counts what the shell sees; a matrix's rows are the check's sub-tests,
// counted in its status ("(24/24)"), not test cases of their own. A SKIP
// is a <skipped> case, not a failure.
func (d resultDocument) junit(w io.Writer) error { return report.WriteResultJUnit(w, d.r) }

func (d resultDocument) exitError() error {
	r := d.r
	code := r.ExitCode()
	if code == ExitOK {
		return nil
	}
	ee := &ExitError{Code: code, Err: fmt.Errorf("%s: %s: %s", r.Check, r.Verdict, r.Summary), Silent: true}
	if r.Verdict == report.Skip || r.Verdict == report.Error {
		ee.Silent = false
	}
	return ee
}

// suiteDocument is a suite's result, or a merge of several.
type suiteDocument struct{ s *report.SuiteResult }

func (d suiteDocument) exitCode() int { return d.s.ExitCode() }

func (d suiteDocument) fail(err error) {
	d.s.Failure = oneLineErr(exitErrorOf(err))
}

func (d suiteDocument) interrupt(in *Interruption) {
	s := d.s
	if s.Interrupted == "" && s.Verdict() != report.Interrupted {
		s.Interrupted = in.Error()
	}
	s.ExitStatus = 0
	if code := in.ExitCode(); code != s.Verdict().ExitCode() {
		s.ExitStatus = code
	}
}

func (d suiteDocument) render(w io.Writer, f report.Format, opts report.Options) error {
	return report.RenderSuite(w, f, d.s, opts)
}

func (d suiteDocument) junit(w io.Writer) error { return report.WriteJUnit(w, d.s) }

func (d suiteDocument) exitError() error {
	if code := d.s.ExitCode(); code != ExitOK {
		return &ExitError{Code: code, Err: fmt.Errorf("suite %s: %s", d.s.Suite, d.s.Summary()), Silent: true}
	}
	return nil
}

// CheckOutputFile checks, before any work is done, that path (the value of
// flag, e.g. "--junit") can be written: its folder exists and takes new
// files, and the path is not a folder. A long run must not end in a result
// that cannot be saved. It creates and removes a file of its own in the
// folder, since permission bits alone do not say (ACLs, read-only mounts,
// root); a file already at path is left as it is.
func CheckOutputFile(flag, path string) error {
	if info, err := os.Stat(path); err == nil {
		if info.IsDir() {
			return UsageErrorf("%s %s: is a folder; give a file name", flag, path)
		}
		// An existing file is opened for writing without truncation, so it
		// is unchanged until the result replaces it.
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return UsageErrorf("%s %s: cannot be written: %v", flag, path, unwrapPath(err))
		}
		return f.Close()
	}
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return UsageErrorf("%s %s: the folder %s does not exist", flag, path, dir)
	case err != nil:
		return UsageErrorf("%s %s: %v", flag, path, err)
	case !info.IsDir():
		return UsageErrorf("%s %s: %s is not a folder", flag, path, dir)
	}
	probe, err := os.CreateTemp(dir, ".miotool-write-check-*")
	if err != nil {
		return UsageErrorf("%s %s: the folder %s cannot be written: %v", flag, path, dir, unwrapPath(err))
	}
	name := probe.Name()
	probe.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("%s: removing the write check %s: %w", flag, name, err)
	}
	return nil
}

// unwrapPath drops the path an *fs.PathError repeats (the probe's name).
func unwrapPath(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}
