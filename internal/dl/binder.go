package dl

import (
	"fmt"

	"github.com/ebitengine/purego"
)

// Symbol is one entry of a binding table.
type Symbol struct {
	Name string
	// Alternatives are tried in order when Name is absent; use them only for
	// names with the same C signature (e.g. cuEventElapsedTime_v2 and
	// cuEventElapsedTime).
	Alternatives []string
	// Optional symbols that are absent leave *Addr zero instead of failing.
	Optional bool
	Addr     *uintptr
}

// MissingSymbolError names the first required symbol a library lacks.
type MissingSymbolError struct {
	Library string
	Symbol  string
	Tried   []string // Symbol and its alternatives
}

func (e *MissingSymbolError) Error() string {
	if len(e.Tried) > 1 {
		return fmt.Sprintf("%s has none of the symbols %v", e.Library, e.Tried)
	}
	return fmt.Sprintf("%s has no symbol %s", e.Library, e.Symbol)
}

// LookupFunc resolves one symbol name to its address.
type LookupFunc func(name string) (uintptr, error)

// Lookup resolves names in an open library handle.
func Lookup(handle uintptr) LookupFunc {
	return func(name string) (uintptr, error) { return purego.Dlsym(handle, name) }
}

// Bind resolves every symbol of table with lookup, filling each Addr. It
// stops at the first required symbol that is absent (under its name and
// every alternative) and returns a *MissingSymbolError naming it; library is
// the name used in that error.
func Bind(lookup LookupFunc, library string, table []Symbol) error {
	for _, s := range table {
		if s.Addr == nil {
			return fmt.Errorf("binding table entry %q has no destination", s.Name)
		}
		*s.Addr = 0
		names := append([]string{s.Name}, s.Alternatives...)
		for _, n := range names {
			if p, err := lookup(n); err == nil && p != 0 {
				*s.Addr = p
				break
			}
		}
		if *s.Addr == 0 && !s.Optional {
			return &MissingSymbolError{Library: library, Symbol: s.Name, Tried: names}
		}
	}
	return nil
}

// SymbolNames lists every name a table may bind, alternatives included.
func SymbolNames(table []Symbol) []string {
	var out []string
	for _, s := range table {
		out = append(out, s.Name)
		out = append(out, s.Alternatives...)
	}
	return out
}
