/* flaky.h: whether this run fails, decided by the seed and the run's
 * number (MIOTOOL_REPEAT_RUN), so that a run's fate is the same every time
 * and a test can count what it expects. */
#ifndef FLAKY_H
#define FLAKY_H

#include <stdint.h>
#include <stdlib.h>

/* splitmix64's finalizer: a well mixed 64-bit hash. */
static inline uint64_t flaky_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* flaky_run is this run's number, -1 when the variable is not set. */
static inline long flaky_run(void)
{
	const char *v = getenv("MIOTOOL_REPEAT_RUN");
	return v && *v ? strtol(v, NULL, 10) : -1;
}

/* flaky_fails reports whether run `run` fails at `permille` per thousand
 * with seed `seed`. */
static inline int flaky_fails(long run, unsigned long seed, int permille)
{
	return (int)(flaky_mix(seed * 1000003ULL ^ (uint64_t)run) % 1000) < permille;
}

#endif
