// Package configs holds the files miotool ships with: named convolution
// problems, capture-rule expectations and PR suites. They are embedded so
// that a binary copied to another machine carries them.
package configs

import (
	"embed"
	"fmt"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"miotool/internal/conv"
	"miotool/internal/suggest"
)

//go:embed problems.yaml rules/*.yaml
var files embed.FS

// RulesFile is a shipped capture-rules table, by its name under rules/
// (for example "h200-cuda.yaml").
func RulesFile(name string) ([]byte, error) { return files.ReadFile("rules/" + name) }

// NamedProblem is an entry of problems.yaml.
type NamedProblem struct {
	Name        string
	Description string
	Problem     conv.Problem
}

// Problems reads a problems file: path, or the embedded problems.yaml when
// path is empty. Missing fields take MIOpenDriver's defaults; unknown
// fields and invalid problems are errors naming the file and line.
func Problems(path string) ([]NamedProblem, error) {
	name := "problems.yaml (built in)"
	var data []byte
	var err error
	if path == "" {
		data, err = files.ReadFile("problems.yaml")
	} else {
		name = path
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: no problems", name)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of problem names", name, root.Line)
	}
	var out []NamedProblem
	// A name is one problem: a second definition would be read as another
	// problem by one reader and replace the first for another.
	defined := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if first, ok := defined[k.Value]; ok {
			return nil, fmt.Errorf("%s:%d: problem %s is defined twice, at lines %d and %d: give each problem a name of its own", name, k.Line, k.Value, first, k.Line)
		}
		defined[k.Value] = k.Line
		var entry struct {
			Description  string `yaml:"description"`
			conv.Problem `yaml:",inline"`
		}
		entry.Problem = conv.DefaultDriverProblem
		if v.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s:%d: problem %s: want a mapping of MIOpenDriver long flag names", name, v.Line, k.Value)
		}
		set := map[string]int{}
		for j := 0; j+1 < len(v.Content); j += 2 {
			f := v.Content[j]
			if !problemFields[f.Value] {
				return nil, fmt.Errorf("%s:%d: problem %s: unknown field %q%s", name, f.Line, k.Value, f.Value, fieldHint(f.Value))
			}
			if first, ok := set[f.Value]; ok {
				return nil, fmt.Errorf("%s:%d: problem %s: %s is set twice, at lines %d and %d", name, f.Line, k.Value, f.Value, first, f.Line)
			}
			set[f.Value] = f.Line
		}
		if err := v.Decode(&entry); err != nil {
			return nil, fmt.Errorf("%s:%d: problem %s: %v", name, k.Line, k.Value, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if err := entry.Problem.Validate(); err != nil {
			return nil, fmt.Errorf("%s:%d: problem %s: %v", name, k.Line, k.Value, err)
		}
		out = append(out, NamedProblem{Name: k.Value, Description: entry.Description, Problem: entry.Problem})
	}
	return out, nil
}

// problemFields are the keys a problem entry may have.
var problemFields = map[string]bool{
	"description": true, "batchsize": true, "in_channels": true, "in_h": true, "in_w": true,
	"out_channels": true, "fil_h": true, "fil_w": true, "pad_h": true, "pad_w": true,
	"conv_stride_h": true, "conv_stride_w": true, "dilation_h": true, "dilation_w": true, "group_count": true,
}

// fieldHint is " (did you mean in_h?)" for a field a few edits from a
// known one, else the known fields.
func fieldHint(field string) string {
	known := make([]string, 0, len(problemFields))
	for f := range problemFields {
		known = append(known, f)
	}
	sort.Strings(known)
	if k, ok := suggest.Closest(field, known); ok {
		return fmt.Sprintf(" (did you mean %s?)", k)
	}
	return " (the fields are description and MIOpenDriver's long flag names: " + strings.Join(known, ", ") + ")"
}

// Problem looks a named problem up.
func Problem(path, name string) (NamedProblem, error) {
	all, err := Problems(path)
	if err != nil {
		return NamedProblem{}, err
	}
	var names []string
	for _, p := range all {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	sort.Strings(names)
	if k, ok := suggest.Closest(name, names); ok {
		return NamedProblem{}, fmt.Errorf("no problem named %q (did you mean %s?)", name, k)
	}
	return NamedProblem{}, fmt.Errorf("no problem named %q (known: %s)", name, strings.Join(names, ", "))
}
