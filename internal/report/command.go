package report

import (
	"fmt"
	"strings"
)

// outputFlags are the flags that choose where and how a result is written
// (cli.OutputFlags, which the command layer spells and a test of cli keeps
// equal to these). They change nothing about what was checked, so the
// checklist's Command column leaves them out. The bool says whether the
// flag takes a value.
var outputFlags = map[string]bool{
	"--format":          true,
	"--junit":           true,
	"--export-markdown": true,
	"--export-json":     true,
	"--no-progress":     false,
}

// splitFlags choose which part of a split run a process makes (--shard
// I/N): the shards of one check make one row of a merged checklist, so
// the Command column leaves them out too. The bool says whether the flag
// takes a value.
var splitFlags = map[string]bool{
	"--shard": true,
}

// ChecklistCommand is command without its output flags (--format X,
// --junit FILE, --export-markdown FILE, --export-json FILE, --no-progress,
// also in their --flag=value forms) and its --shard, for the Command
// column of a Testing Checklist. A command that does not split as a shell
// would split it is returned unchanged.
func ChecklistCommand(command string) string {
	words, raw, err := splitWords(command)
	if err != nil {
		return command
	}
	kept := make([]string, 0, len(raw))
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "--" {
			kept = append(kept, raw[i:]...)
			break
		}
		name, _, hasValue := strings.Cut(w, "=")
		takesValue, isOutput := outputFlags[name]
		if split, ok := splitFlags[name]; ok {
			takesValue, isOutput = split, true
		}
		if !isOutput {
			kept = append(kept, raw[i])
			continue
		}
		if takesValue && !hasValue {
			i++ // the flag's value is the next word
		}
	}
	return strings.Join(kept, " ")
}

// SplitCommandLine splits s into words the way a POSIX shell does for plain
// words, single quotes, double quotes, backslash escapes and backslash-
// newline continuations. Expansions ($VAR, globs) are not performed: a
// suite's command is not run by a shell.
//
// This split and JoinCommandLine are miotool's own, not a library's: the
// maintained shell parser (mvdan.cc/sh) expands $VAR and globs, which a
// suite's literal command must not do, and pulls in a whole shell; the
// small splitting packages (google/shlex, kballard/go-shellquote) are
// unmaintained and no more correct for these cases. Both directions are
// tested against each other and against the quoting rules they follow.
func SplitCommandLine(s string) ([]string, error) {
	words, _, err := splitWords(s)
	return words, err
}

// splitWords returns each word unquoted and as it was written.
func splitWords(s string) (words, raw []string, err error) {
	var cur strings.Builder
	inWord := false
	start := 0
	flush := func(end int) {
		if inWord {
			words = append(words, cur.String())
			raw = append(raw, s[start:end])
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			flush(i)
			continue
		case !inWord:
			inWord, start = true, i
		}
		switch c {
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, nil, fmt.Errorf("unterminated single quote at column %d", i+1)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && s[j+1] == '\n' {
					j++ // a line continuation: both characters go
					continue
				}
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("\"\\$`", s[j+1]) >= 0 {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, nil, fmt.Errorf("unterminated double quote at column %d", i+1)
			}
			i = j
		case '\\':
			if i+1 >= len(s) {
				return nil, nil, fmt.Errorf("a backslash ends the command")
			}
			i++
			if s[i] == '\n' {
				// A line continuation joins the lines: it neither ends the
				// word nor starts one.
				if cur.Len() == 0 && start == i-1 {
					inWord = false
				}
				continue
			}
			cur.WriteByte(s[i])
		default:
			cur.WriteByte(c)
		}
	}
	flush(len(s))
	return words, raw, nil
}

// JoinCommandLine joins words into one line a shell splits back into the
// same words, quoting only the words that need it.
func JoinCommandLine(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = quoteWord(w)
	}
	return strings.Join(out, " ")
}

func quoteWord(s string) string {
	if s == "" {
		return "''"
	}
	plain := strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
