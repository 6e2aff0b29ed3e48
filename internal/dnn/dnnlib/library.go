package dnnlib

import (
	"errors"
	"fmt"
	"sync"

	"miotool/internal/dl"
	"miotool/internal/hip"
)

// OpenError is a failed load of a library with the record of every path
// tried.
type OpenError struct {
	Library hip.Library
	Err     error
}

func (e *OpenError) Error() string { return e.Err.Error() }
func (e *OpenError) Unwrap() error { return e.Err }

// Load opens the first library spec finds and binds table from it. A
// missing library is a *dl.NotFoundError; a missing symbol is a
// *dl.MissingSymbolError followed by hint, a guess at what a library
// without it is ("not cuDNN 9?"). Either comes inside an *OpenError with
// the search record, which Load also returns.
func Load(spec dl.SearchSpec, table []dl.Symbol, hint string) (hip.Library, error) {
	h, rec, err := dl.Open(spec)
	if err != nil {
		return rec, &OpenError{Library: rec, Err: err}
	}
	if err := dl.Bind(dl.Lookup(h), rec.Loaded, table); err != nil {
		return rec, &OpenError{Library: rec, Err: fmt.Errorf("%w (%s)", err, hint)}
	}
	return rec, nil
}

// Version is a library's version, e.g. 9.14.0.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Loaded is what a loaded library tells reports about itself.
type Loaded interface{ Info() hip.Library }

// Once loads a library on first use and keeps it, or the error, for the
// rest of the process.
type Once[L Loaded] struct {
	name string
	load func() (L, error)
}

// NewOnce loads with open on first use; name is the library's report label,
// the record Locate gives for a failure that carries none.
func NewOnce[L Loaded](name string, open func() (L, error)) *Once[L] {
	return &Once[L]{name: name, load: sync.OnceValues(open)}
}

// Get is the library, loading it on the first call.
func (o *Once[L]) Get() (L, error) { return o.load() }

// Locate is the search record of Get's library, for reports: where it
// loaded from and its version, or every path tried.
func (o *Once[L]) Locate() hip.Library {
	l, err := o.load()
	if err != nil {
		var oe *OpenError
		if errors.As(err, &oe) {
			return oe.Library
		}
		return hip.Library{Name: o.name}
	}
	return l.Info()
}

// LoadedPath is where dev loaded the library labelled name (its record in
// dev.Libraries()), or fallback when it names none. Opening that path
// finds the instance already in the process.
func LoadedPath(dev hip.Device, name, fallback string) string {
	for _, l := range dev.Libraries() {
		if l.Name == name && l.Loaded != "" {
			return l.Loaded
		}
	}
	return fallback
}

// BindRuntime opens the GPU runtime at path (opening a library already
// loaded returns the same instance) and binds table from it, for work on
// device ordinal, which must not be negative. what names the runtime in
// errors, e.g. "the CUDA driver".
func BindRuntime(what, path string, ordinal int, table []dl.Symbol) error {
	if ordinal < 0 {
		return fmt.Errorf("device ordinal %d is negative", ordinal)
	}
	h, err := dl.OpenPath(path, dl.DlopenMode)
	if err != nil {
		return fmt.Errorf("opening %s %s: %w", what, path, err)
	}
	return dl.Bind(dl.Lookup(h), path, table)
}
