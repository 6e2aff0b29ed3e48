package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// EnumValue is a string-like flag that accepts only the listed values, so
// that a typo is a usage error at parse time rather than a surprise later.
type EnumValue[T ~string] struct {
	target  *T
	allowed []T
}

var _ pflag.Value = (*EnumValue[string])(nil)

// NewEnumValue binds target, sets it to def and accepts only allowed.
func NewEnumValue[T ~string](target *T, def T, allowed ...T) *EnumValue[T] {
	*target = def
	return &EnumValue[T]{target: target, allowed: allowed}
}

// Set accepts an allowed value, compared without regard to case.
func (e *EnumValue[T]) Set(s string) error {
	v := T(strings.ToLower(strings.TrimSpace(s)))
	if !slices.Contains(e.allowed, v) {
		return fmt.Errorf("want %s", OrList(e.allowed))
	}
	*e.target = v
	return nil
}

func (e *EnumValue[T]) String() string { return string(*e.target) }

// Type is shown in help as the flag's argument name.
func (e *EnumValue[T]) Type() string { return "string" }

// Allowed lists the accepted values.
func (e *EnumValue[T]) Allowed() []T { return slices.Clone(e.allowed) }

// OrList writes "a, b or c".
func OrList[T ~string](items []T) string {
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = string(it)
	}
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// WithAll is a list flag's values and "all", which stands for every one.
func WithAll(values []string) []string { return append(values, "all") }

// ParseList reads a list flag's values, where "all" means every value:
// each value once, in the order given; none is a usage error.
func ParseList[T comparable](vals []string, flag string, all []T, parse func(string) (T, error)) ([]T, error) {
	var out []T
	seen := map[T]bool{}
	for _, v := range vals {
		if v == "all" {
			return all, nil
		}
		x, err := parse(v)
		if err != nil {
			return nil, UsageErrorf("%s: %v", flag, err)
		}
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		return nil, UsageErrorf("%s: give at least one value", flag)
	}
	return out, nil
}
