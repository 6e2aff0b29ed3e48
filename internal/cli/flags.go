package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

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

// reclaimUsage is what --reclaim is, in every command that takes it.
const reclaimUsage = "how abandoned streams are reclaimed: "

// AddReclaimListFlag declares --reclaim for a command that runs one case
// per policy it names (a list, "all" for every policy), defaulting to def.
func AddReclaimListFlag(cmd *cobra.Command, target *[]string, def ...string) {
	cmd.Flags().StringSliceVar(target, "reclaim", def, reclaimUsage+OrList(WithAll(Names(streams.Policies)))+"; several separated by commas")
	CompleteList(cmd, "reclaim", WithAll(Names(streams.Policies)))
}

// AddReclaimFlag declares --reclaim for a command that runs with one
// policy, defaulting to def.
func AddReclaimFlag(cmd *cobra.Command, target *streams.Policy, def streams.Policy) {
	cmd.Flags().Var(NewEnumValue(target, def, streams.Policies...), "reclaim", reclaimUsage+OrList(streams.Policies))
}

// MaxSamples bounds --samples: the timed runs of each solver are kept and
// trimmed by modified z-score, which settles within tens of samples; a
// thousand is far past any use, and the default problem's tiled solver
// takes about a second per sample on the simulator.
const MaxSamples = 1000

// AddSamplesFlag declares --samples: timed runs per solver in a find, from
// 1 to MaxSamples (ValidateSamples).
func AddSamplesFlag(cmd *cobra.Command, target *int, def int) {
	cmd.Flags().IntVar(target, "samples", def, fmt.Sprintf("timed runs per solver after the warm-up (at most %d)", MaxSamples))
}

// ValidateSamples refuses a --samples outside 1 to MaxSamples.
func ValidateSamples(n int) error {
	if n < 1 || n > MaxSamples {
		return UsageErrorf("--samples %d: want 1 to %d", n, MaxSamples)
	}
	return nil
}

// AddRepeatFlag declares --repeat: how many times every case runs, from 1
// to max.
func AddRepeatFlag(cmd *cobra.Command, target *int, max int) {
	cmd.Flags().IntVar(target, "repeat", 1, fmt.Sprintf("run every case this many times and count the outcomes (at most %d)", max))
}
