package dl

import (
	"errors"
	"reflect"
	"testing"
)

func mapLookup(m map[string]uintptr) LookupFunc {
	return func(name string) (uintptr, error) {
		if p, ok := m[name]; ok {
			return p, nil
		}
		return 0, errors.New("undefined symbol: " + name)
	}
}

func TestBind(t *testing.T) {
	lookup := mapLookup(map[string]uintptr{"a_v2": 1, "b": 2, "c": 3})
	var a, b, c, opt uintptr
	table := []Symbol{
		{Name: "a_v2", Addr: &a},
		{Name: "b_v2", Alternatives: []string{"b"}, Addr: &b},
		{Name: "opt", Optional: true, Addr: &opt},
		{Name: "c", Addr: &c},
	}
	if err := Bind(lookup, "libx", table); err != nil {
		t.Fatalf("Bind: %v", err)
	}
	if a != 1 || b != 2 || c != 3 || opt != 0 {
		t.Fatalf("bound a=%d b=%d c=%d opt=%d", a, b, c, opt)
	}
	if got := SymbolNames(table); !reflect.DeepEqual(got, []string{"a_v2", "b_v2", "b", "opt", "c"}) {
		t.Fatalf("SymbolNames = %q", got)
	}
}

func TestBindReportsFirstMissing(t *testing.T) {
	lookup := mapLookup(map[string]uintptr{"a": 1})
	var a, b, c uintptr
	err := Bind(lookup, "libx.so.1", []Symbol{
		{Name: "a", Addr: &a},
		{Name: "b_v2", Addr: &b},
		{Name: "c_v3", Alternatives: []string{"c_v2"}, Addr: &c},
	})
	var m *MissingSymbolError
	if !errors.As(err, &m) {
		t.Fatalf("want *MissingSymbolError, got %T %v", err, err)
	}
	if m.Symbol != "b_v2" || m.Library != "libx.so.1" {
		t.Fatalf("missing %+v", m)
	}
	if err.Error() != "libx.so.1 has no symbol b_v2" {
		t.Fatalf("message %q", err.Error())
	}

	err = Bind(lookup, "libx.so.1", []Symbol{{Name: "c_v3", Alternatives: []string{"c_v2"}, Addr: &c}})
	if !errors.As(err, &m) || m.Symbol != "c_v3" || len(m.Tried) != 2 {
		t.Fatalf("alternatives: %v", err)
	}
	if err := Bind(lookup, "libx", []Symbol{{Name: "a"}}); err == nil {
		t.Fatal("an entry without a destination must be refused")
	}
}

func TestLookupInRealLibrary(t *testing.T) {
	h, err := OpenPath("libc.so.6", DlopenMode)
	if err != nil {
		t.Skipf("libc.so.6: %v", err)
	}
	var strlen uintptr
	if err := Bind(Lookup(h), "libc.so.6", []Symbol{{Name: "strlen", Addr: &strlen}}); err != nil {
		t.Fatal(err)
	}
	s := CString("miotool")
	if n := CallPtr(strlen, ptrOf(s)); n != 7 {
		t.Fatalf("strlen through the binding = %d", n)
	}
	var none uintptr
	if err := Bind(Lookup(h), "libc.so.6", []Symbol{{Name: "miotool_no_such_symbol", Addr: &none}}); err == nil {
		t.Fatal("a missing symbol bound")
	}
}
