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
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		var entry struct {
			Description  string `yaml:"description"`
			conv.Problem `yaml:",inline"`
		}
		entry.Problem = conv.DefaultDriverProblem
		if v.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s:%d: problem %s: want a mapping of MIOpenDriver long flag names", name, v.Line, k.Value)
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			if f := v.Content[j]; !problemFields[f.Value] {
				return nil, fmt.Errorf("%s:%d: problem %s: unknown field %q", name, f.Line, k.Value, f.Value)
			}
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
	return NamedProblem{}, fmt.Errorf("no problem named %q (known: %s)", name, strings.Join(names, ", "))
}
