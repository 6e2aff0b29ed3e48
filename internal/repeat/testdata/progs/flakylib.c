/* libflaky: the crash of flaky's segv mode, as a library a Python program
 * calls through ctypes, so that the crashing thread has Python frames. */
#include <stdio.h>

#include "flaky.h"

__attribute__((noinline)) void model_cache_predict(long run)
{
	volatile long *model = (volatile long *)(uintptr_t)16;
	fprintf(stderr, "libflaky: run %ld predicting with a destroyed model\n", run);
	*model = run;
}

/* flaky_predict crashes on the runs that fail at permille with seed. */
int flaky_predict(long run, unsigned long seed, int permille)
{
	if (flaky_fails(run, seed, permille))
		model_cache_predict(run);
	return 0;
}
