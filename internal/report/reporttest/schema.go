// Package reporttest holds miotool's JSON documents to their schema,
// docs/miotool.schema.json, in tests: a check's result, a suite's, a
// merge's, and each command's real output.
//
// It validates with a JSON Schema (draft 2020-12) validator of its own
// for the keywords the schema uses, so that the tests need nothing
// installed; a keyword it does not implement makes the schema refused
// rather than ignored, and a test compares its answers with the
// reference implementation's (Python's jsonschema) where that is
// installed.
package reporttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// SchemaPath is the schema's path in the repository.
const SchemaPath = "docs/miotool.schema.json"

// Schema is a compiled JSON Schema.
type Schema struct {
	root *node
	defs map[string]*node
}

// node is one schema: a boolean schema (accept set, all) or keywords.
type node struct {
	boolean    *bool
	types      []string
	enum       []any
	constant   *any
	hasConst   bool
	pattern    *regexp.Regexp
	minimum    *big.Float
	maximum    *big.Float
	minLength  *int
	minItems   *int
	properties map[string]*node
	patternPr  []patternProp
	additional *node
	propNames  *node
	required   []string
	items      *node
	allOf      []*node
	anyOf      []*node
	oneOf      []*node
	not        *node
	ifS        *node
	thenS      *node
	elseS      *node
	ref        string
}

type patternProp struct {
	re *regexp.Regexp
	s  *node
}

// annotations are keywords that say something to people and nothing to
// a validator.
var annotations = []string{"$schema", "$id", "$comment", "title", "description", "examples", "default"}

// Compile reads a schema document.
func Compile(doc []byte) (*Schema, error) {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	top, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("the schema is not an object")
	}
	s := &Schema{defs: map[string]*node{}}
	if defs, ok := top["$defs"].(map[string]any); ok {
		for name, d := range defs {
			n, err := compile(d, "#/$defs/"+name)
			if err != nil {
				return nil, err
			}
			s.defs[name] = n
		}
	}
	root, err := compile(top, "#")
	if err != nil {
		return nil, err
	}
	s.root = root
	// Every reference resolves.
	var check func(n *node) error
	seen := map[*node]bool{}
	check = func(n *node) error {
		if n == nil || seen[n] {
			return nil
		}
		seen[n] = true
		if n.ref != "" {
			if _, ok := s.defs[strings.TrimPrefix(n.ref, "#/$defs/")]; !ok || !strings.HasPrefix(n.ref, "#/$defs/") {
				return fmt.Errorf("$ref %q resolves to nothing", n.ref)
			}
		}
		kids := []*node{n.additional, n.propNames, n.items, n.not, n.ifS, n.thenS, n.elseS}
		for _, p := range n.properties {
			kids = append(kids, p)
		}
		for _, p := range n.patternPr {
			kids = append(kids, p.s)
		}
		kids = slices.Concat(kids, n.allOf, n.anyOf, n.oneOf)
		for _, k := range kids {
			if err := check(k); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range s.defs {
		if err := check(d); err != nil {
			return nil, err
		}
	}
	return s, check(root)
}

func compile(v any, at string) (*node, error) {
	if b, ok := v.(bool); ok {
		return &node{boolean: &b}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: a schema is an object or a boolean", at)
	}
	n := &node{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sub := func(k string, x any) (*node, error) { return compile(x, at+"/"+k) }
	list := func(k string, x any) ([]*node, error) {
		xs, ok := x.([]any)
		if !ok || len(xs) == 0 {
			return nil, fmt.Errorf("%s/%s: not a non-empty array", at, k)
		}
		var out []*node
		for i, e := range xs {
			c, err := compile(e, fmt.Sprintf("%s/%s/%d", at, k, i))
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	for _, k := range keys {
		x := m[k]
		var err error
		switch k {
		case "$defs":
			if at != "#" {
				return nil, fmt.Errorf("%s: $defs only at the top", at)
			}
		case "type":
			switch t := x.(type) {
			case string:
				n.types = []string{t}
			case []any:
				for _, e := range t {
					s, _ := e.(string)
					n.types = append(n.types, s)
				}
			}
			for _, t := range n.types {
				if !slices.Contains([]string{"object", "array", "string", "number", "integer", "boolean", "null"}, t) {
					return nil, fmt.Errorf("%s/type: %q", at, t)
				}
			}
		case "enum":
			e, ok := x.([]any)
			if !ok {
				return nil, fmt.Errorf("%s/enum: not an array", at)
			}
			n.enum = e
		case "const":
			c := x
			n.constant, n.hasConst = &c, true
		case "pattern":
			n.pattern, err = regexp.Compile(x.(string))
		case "minimum", "maximum":
			f, ok := new(big.Float).SetString(string(x.(json.Number)))
			if !ok {
				return nil, fmt.Errorf("%s/%s: %v", at, k, x)
			}
			if k == "minimum" {
				n.minimum = f
			} else {
				n.maximum = f
			}
		case "minLength", "minItems":
			i64, err := x.(json.Number).Int64()
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %v", at, k, err)
			}
			i := int(i64)
			if k == "minLength" {
				n.minLength = &i
			} else {
				n.minItems = &i
			}
		case "properties":
			n.properties = map[string]*node{}
			for name, p := range x.(map[string]any) {
				if n.properties[name], err = sub(k+"/"+name, p); err != nil {
					return nil, err
				}
			}
		case "patternProperties":
			for pat, p := range x.(map[string]any) {
				re, err := regexp.Compile(pat)
				if err != nil {
					return nil, fmt.Errorf("%s/%s: %v", at, k, err)
				}
				c, err := sub(k+"/"+pat, p)
				if err != nil {
					return nil, err
				}
				n.patternPr = append(n.patternPr, patternProp{re, c})
			}
		case "additionalProperties":
			n.additional, err = sub(k, x)
		case "propertyNames":
			n.propNames, err = sub(k, x)
		case "required":
			for _, e := range x.([]any) {
				n.required = append(n.required, e.(string))
			}
		case "items":
			n.items, err = sub(k, x)
		case "allOf":
			n.allOf, err = list(k, x)
		case "anyOf":
			n.anyOf, err = list(k, x)
		case "oneOf":
			n.oneOf, err = list(k, x)
		case "not":
			n.not, err = sub(k, x)
		case "if":
			n.ifS, err = sub(k, x)
		case "then":
			n.thenS, err = sub(k, x)
		case "else":
			n.elseS, err = sub(k, x)
		case "$ref":
			n.ref = x.(string)
		default:
			if !slices.Contains(annotations, k) {
				return nil, fmt.Errorf("%s: keyword %q is not one this validator implements: add it here, or leave it out of the schema", at, k)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", at, k, err)
		}
	}
	return n, nil
}

// Validate checks doc against the schema and returns what is wrong, each
// with the JSON pointer of the value and what it breaks; none when the
// document holds.
func (s *Schema) Validate(doc []byte) ([]string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return s.validate(s.root, v, ""), nil
}

func (s *Schema) validate(n *node, v any, at string) []string {
	where := at
	if where == "" {
		where = "/"
	}
	fail := func(format string, args ...any) []string {
		return []string{where + ": " + fmt.Sprintf(format, args...)}
	}
	if n.boolean != nil {
		if *n.boolean {
			return nil
		}
		return fail("not allowed here")
	}
	var errs []string
	if n.ref != "" {
		errs = append(errs, s.validate(s.defs[strings.TrimPrefix(n.ref, "#/$defs/")], v, at)...)
	}
	if len(n.types) > 0 && !slices.ContainsFunc(n.types, func(t string) bool { return isType(v, t) }) {
		return append(errs, fail("%s is not %s", kind(v), strings.Join(n.types, " or "))...)
	}
	if n.enum != nil && !slices.ContainsFunc(n.enum, func(e any) bool { return equal(e, v) }) {
		errs = append(errs, fail("%s is none of %s", show(v), show(n.enum))...)
	}
	if n.hasConst && !equal(*n.constant, v) {
		errs = append(errs, fail("%s is not %s", show(v), show(*n.constant))...)
	}
	switch x := v.(type) {
	case string:
		if n.pattern != nil && !n.pattern.MatchString(x) {
			errs = append(errs, fail("%q does not match %s", x, n.pattern)...)
		}
		if n.minLength != nil && utf8.RuneCountInString(x) < *n.minLength {
			errs = append(errs, fail("%q is shorter than %d", x, *n.minLength)...)
		}
	case json.Number:
		f, _ := new(big.Float).SetString(string(x))
		if n.minimum != nil && f.Cmp(n.minimum) < 0 {
			errs = append(errs, fail("%s is below %s", x, n.minimum.Text('g', -1))...)
		}
		if n.maximum != nil && f.Cmp(n.maximum) > 0 {
			errs = append(errs, fail("%s is above %s", x, n.maximum.Text('g', -1))...)
		}
	case []any:
		if n.minItems != nil && len(x) < *n.minItems {
			errs = append(errs, fail("%d items, fewer than %d", len(x), *n.minItems)...)
		}
		if n.items != nil {
			for i, e := range x {
				errs = append(errs, s.validate(n.items, e, fmt.Sprintf("%s/%d", at, i))...)
			}
		}
	case map[string]any:
		errs = append(errs, s.validateObject(n, x, at, fail)...)
	}
	for _, a := range n.allOf {
		errs = append(errs, s.validate(a, v, at)...)
	}
	if n.anyOf != nil && !slices.ContainsFunc(n.anyOf, func(a *node) bool { return len(s.validate(a, v, at)) == 0 }) {
		errs = append(errs, fail("%s matches none of anyOf", show(v))...)
	}
	if n.oneOf != nil {
		matched := 0
		var nearest []string // the errors of the branch that came nearest
		for _, o := range n.oneOf {
			e := s.validate(o, v, at)
			if len(e) == 0 {
				matched++
			} else if nearest == nil || len(e) < len(nearest) {
				nearest = e
			}
		}
		if matched != 1 {
			errs = append(errs, fail("matches %d of oneOf, not exactly one", matched)...)
			if matched == 0 {
				errs = append(errs, nearest...)
			}
		}
	}
	if n.not != nil && len(s.validate(n.not, v, at)) == 0 {
		errs = append(errs, fail("%s matches what is ruled out", show(v))...)
	}
	if n.ifS != nil {
		if len(s.validate(n.ifS, v, at)) == 0 {
			if n.thenS != nil {
				errs = append(errs, s.validate(n.thenS, v, at)...)
			}
		} else if n.elseS != nil {
			errs = append(errs, s.validate(n.elseS, v, at)...)
		}
	}
	return errs
}

func (s *Schema) validateObject(n *node, x map[string]any, at string, fail func(string, ...any) []string) []string {
	var errs []string
	for _, r := range n.required {
		if _, ok := x[r]; !ok {
			errs = append(errs, fail("%q is missing", r)...)
		}
	}
	names := make([]string, 0, len(x))
	for k := range x {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		child := at + "/" + k
		if n.propNames != nil {
			errs = append(errs, s.validate(n.propNames, k, child)...)
		}
		matched := false
		if p, ok := n.properties[k]; ok {
			matched = true
			errs = append(errs, s.validate(p, x[k], child)...)
		}
		for _, pp := range n.patternPr {
			if pp.re.MatchString(k) {
				matched = true
				errs = append(errs, s.validate(pp.s, x[k], child)...)
			}
		}
		if !matched && n.additional != nil {
			if n.additional.boolean != nil && !*n.additional.boolean {
				errs = append(errs, fail("%q is not a field of this object", k)...)
				continue
			}
			errs = append(errs, s.validate(n.additional, x[k], child)...)
		}
	}
	return errs
}

func isType(v any, t string) bool {
	switch x := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	case json.Number:
		if t == "number" {
			return true
		}
		if t == "integer" {
			f, ok := new(big.Float).SetString(string(x))
			return ok && f.IsInt()
		}
	}
	return false
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number " + show(v)
}

// equal compares JSON values, numbers by value (1 and 1.0 are equal).
func equal(a, b any) bool {
	if na, ok := a.(json.Number); ok {
		nb, ok := b.(json.Number)
		if !ok {
			return false
		}
		fa, _ := new(big.Float).SetString(string(na))
		fb, _ := new(big.Float).SetString(string(nb))
		return fa != nil && fb != nil && fa.Cmp(fb) == 0
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			if f, ok := y[k]; !ok || !equal(e, f) {
				return false
			}
		}
		return true
	}
	return a == b
}

func show(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// RepoFile is path, relative to the repository root, found from the
// test's folder up to the folder holding go.mod.
func RepoFile(t testing.TB, path string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, filepath.FromSlash(path))
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatalf("no go.mod above the test's folder, so no %s", path)
		}
		dir = up
	}
}

// Load compiles the repository's schema, docs/miotool.schema.json.
func Load(t testing.TB) *Schema {
	t.Helper()
	doc, err := os.ReadFile(RepoFile(t, SchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Compile(doc)
	if err != nil {
		t.Fatalf("%s: %v", SchemaPath, err)
	}
	return s
}

// Hold fails the test, naming every field that breaks it, unless doc
// holds to the repository's schema.
func Hold(t testing.TB, what string, doc []byte) {
	t.Helper()
	errs, err := Load(t).Validate(doc)
	if err != nil {
		t.Errorf("%s: %v\n%s", what, err, doc)
		return
	}
	if len(errs) > 0 {
		t.Errorf("%s does not hold to %s:\n  %s\n%s", what, SchemaPath, strings.Join(errs, "\n  "), doc)
	}
}
