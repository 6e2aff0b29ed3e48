package hip

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DefaultHWQueues is HIP's default for GPU_MAX_HW_QUEUES.
const DefaultHWQueues = 4

// EnvHWQueues is the variable ROCclr reads for its per-device queue cap.
const EnvHWQueues = "GPU_MAX_HW_QUEUES"

// ParseHWQueues interprets a GPU_MAX_HW_QUEUES value the way the stream
// tracker must: unset, non-positive or unparseable counts as the default.
// The second result explains a value that was ignored ("" when none was).
func ParseHWQueues(raw string, set bool) (int, string) {
	if !set {
		return DefaultHWQueues, ""
	}
	s := strings.TrimSpace(raw)
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return DefaultHWQueues, fmt.Sprintf("%s=%q is not a number; using %d", EnvHWQueues, raw, DefaultHWQueues)
	case n <= 0:
		return DefaultHWQueues, fmt.Sprintf("%s=%d is not positive; using %d", EnvHWQueues, n, DefaultHWQueues)
	case n > 1<<16:
		return 1 << 16, fmt.Sprintf("%s=%d is implausibly large; using %d", EnvHWQueues, n, 1<<16)
	}
	return int(n), ""
}

// HWQueuesFromEnv reads GPU_MAX_HW_QUEUES from the process environment.
func HWQueuesFromEnv() (int, string) {
	v, ok := os.LookupEnv(EnvHWQueues)
	return ParseHWQueues(v, ok)
}
