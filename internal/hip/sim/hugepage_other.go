//go:build !linux

package sim

// adviseHugePages has nothing to ask where there are no transparent huge
// pages to ask for.
func adviseHugePages([]byte) {}
