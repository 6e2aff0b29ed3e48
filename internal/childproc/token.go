package childproc

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"strings"
)

// TokenEnv is the environment variable that marks every process a child
// starts, whatever group or session it moves to, as that child's: its
// value lists the tokens of the children of every miotool it descends
// from, separated by spaces (a miotool run under another adds its own).
// A descendant that clears its environment, or overwrites the memory it
// came in (setproctitle), cannot be found by it.
const TokenEnv = "_MIOTOOL_CHILD"

// newToken is a child's token: random, so that no other process can hold
// it by chance.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withToken is env (nil: this process's) with token added to TokenEnv.
func withToken(env []string, token string) []string {
	if env == nil {
		env = os.Environ()
	}
	out := make([]string, 0, len(env)+1)
	value := token
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, TokenEnv+"="); ok {
			if v != "" {
				value = v + " " + token
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, TokenEnv+"="+value)
}

// hasToken says whether an environment block (NUL-separated, as
// /proc/PID/environ holds it) carries token in TokenEnv.
func hasToken(environ []byte, token string) bool {
	for _, kv := range strings.Split(string(environ), "\x00") {
		if v, ok := strings.CutPrefix(kv, TokenEnv+"="); ok && slices.Contains(strings.Fields(v), token) {
			return true
		}
	}
	return false
}
