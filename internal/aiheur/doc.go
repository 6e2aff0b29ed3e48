// Package aiheur is miotool's copy of MIOpen's AI heuristics: TunaNet,
// which ranks convolution solvers when immediate mode has no find-db
// record, and KernelTuningNet (KTN), which predicts a solver's tuning
// parameters token by token. Both run MIOpen's own model files
// (<arch>.tn.model, <arch>_<set>_*.ktn.model, frugally-deep JSON) through
// the float32 engine in package fdeep.
//
// Problem is the convolution as the models see it, in forward convention.
// TunaNet builds the per-arch feature vector, normalises it with the
// arch's statistics (overall for gfx908/gfx90a, test for gfx942, as MIOpen
// 3.3 does), drops the leading non-solver outputs and sorts the rest into
// a ranking. KTN encodes a solver's feature matrix and decodes tuning
// values with a caller-supplied validator, like MIOpen's ModelSetParams.
//
// Model files come from ModelDir (the caller's override, MIOpen's
// MIOPEN_SYSTEM_DB_PATH, or an installed ROCm's share/miopen/db) or, when
// none is found, from the Embedded file system a build may fill in.
// Loaded models are shared through the caches of package cache, in the
// pre-fix (unlocked), fixed (locked) or lock-free policy; see Caches.
package aiheur
