package cli

import (
	"fmt"
	"time"

	"miotool/internal/aiheur/cache"
	"miotool/internal/hip"
	"miotool/internal/streams"
)

// The flags a result names, spelled as the user types them, so that a
// status such as "Fails with --reclaim=lazy" reads as the command to run.
// Lower layers report the facts (a policy, a backend) and take these.

// BackendFlag asks for backend b: "--backend cuda".
func BackendFlag(b hip.BackendName) string { return "--backend " + string(b) }

// ReclaimFlag asks for reclaim policy p: "--reclaim=lazy".
func ReclaimFlag(p streams.Policy) string { return "--reclaim=" + string(p) }

// CacheFlag asks for model-cache policy p: "--cache=unlocked".
func CacheFlag(p cache.Policy) string { return "--cache=" + string(p) }

// RaceWindowFlag widens the cache race by d: "--race-window 2ms".
func RaceWindowFlag(d time.Duration) string { return fmt.Sprintf("--race-window %v", d) }

// SelectionReason says why sel's backend runs: the words of auto's choice,
// or "requested with --backend cuda" for a backend the user named.
func SelectionReason(sel hip.Selection) string {
	if sel.Reason == hip.ReasonRequested {
		return requestedReason(hip.BackendName(sel.Chosen))
	}
	return sel.Reason
}

func requestedReason(b hip.BackendName) string { return "requested with " + BackendFlag(b) }

// ModelDirFlag names the model directory flag: "--model-dir".
const ModelDirFlag = "--model-dir"
