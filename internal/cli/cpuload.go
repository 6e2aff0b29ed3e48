package cli

// MaxCPULoadPerCore bounds --cpu-load at this many busy workers per core:
// thousands of spinning workers starve the checks themselves, and a run
// would look hung rather than loaded.
const MaxCPULoadPerCore = 4

// CheckCPULoad is the usage error of a --cpu-load of n busy workers on a
// machine of cores cores; nil when n can run.
func CheckCPULoad(n, cores int) error {
	switch {
	case n < 0:
		return UsageErrorf("--cpu-load %d: want 0 or more busy workers", n)
	case n > MaxCPULoadPerCore*cores:
		return UsageErrorf("--cpu-load %d: want at most %d busy workers (%d per CPU core, %d cores here)",
			n, MaxCPULoadPerCore*cores, MaxCPULoadPerCore, cores)
	}
	return nil
}
