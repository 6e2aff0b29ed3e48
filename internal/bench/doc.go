// Package bench holds the benchmarks that must run on a real device as well
// as on the simulator: the cost of abandoning a stream, the reclaim path
// hop by hop from a kernel's own last write (Hops), the worker and the poller
// reclaiming after an idle period, turn about (ColdReclaim), the caller's costs
// paired with their runtime floors (Paired), the poller's CPU cost, and
// the launch path's overhead under each reclaim policy. The device comes from
// MIOTOOL_BENCH_BACKEND (sim when unset; cuda or hip on a GPU machine);
// scripts/gpu-check.sh runs them on a GPU and keeps the medians.
package bench
