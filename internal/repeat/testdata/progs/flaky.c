/* flaky: a program that ends as its arguments say, for repeat's tests.
 *
 *   flaky MODE [PERMILLE [SEED]]
 *
 * MODE is what a failing run does:
 *   pass     never fails
 *   segv     SIGSEGV in model_cache_predict
 *   abort    glibc's message, then SIGABRT in model_cache_insert
 *   mixed    segv on some failing runs, abort on the others
 *   exit3    a wrong sum on standard error, exit status 3
 *   hang     never ends
 *   handler  its own SIGSEGV handler (which says so on standard error and
 *            re-raises with the default action), then segv
 *   at:LIST  segv on the runs listed (at:17,80,150), abort on those with an
 *            a after them (at:3a,5), hang on those with an h; the other
 *            runs pass; PERMILLE and SEED are not read
 *   at:env   at: with the list FLAKY_AT holds (blanks or commas between
 *            the runs): one command line, two
 *            builds told apart by their environment, as two library
 *            paths tell them apart
 * A run that hangs and finds FLAKY_GATE in its environment first opens
 * that FIFO for writing (which waits for a reader) and writes a line to
 * it: a test that reads the FIFO knows the run is hanging, with no sleep.
 * A run fails with probability PERMILLE/1000 (default 1000), decided by
 * SEED (default 1) and the run's number (MIOTOOL_REPEAT_RUN), so that the
 * same runs fail every time. A run that does not fail exits 0.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "flaky.h"

__attribute__((noinline)) void model_cache_predict(long run)
{
	/* The model another thread's insert has destroyed. */
	volatile long *model = (volatile long *)(uintptr_t)(16 + 0 * run);
	fprintf(stderr, "flaky: run %ld predicting with model %p\n", run, (void *)(0x5500000000UL + (unsigned long)run * 4096));
	*model = run;
}

__attribute__((noinline)) void model_cache_insert(long run)
{
	fprintf(stderr, "flaky: run %ld inserting model\nfree(): double free detected in tcache 2\n", run);
	abort();
}

static void own_handler(int sig)
{
	static const char msg[] = "flaky: own SIGSEGV handler called\n";
	ssize_t n = write(2, msg, sizeof msg - 1);
	(void)n;
	signal(sig, SIG_DFL);
	raise(sig);
}

__attribute__((noinline)) void wait_forever(long run)
{
	fprintf(stderr, "flaky: run %ld waiting forever\n", run);
	const char *gate = getenv("FLAKY_GATE");
	if (gate && *gate) {
		FILE *f = fopen(gate, "w");
		if (f) {
			fprintf(f, "run %ld hangs as process %ld\n", run, (long)getpid());
			fclose(f);
		}
	}
	for (;;)
		pause();
}

/* listed reports whether run is in list, and what it does there: 's' segv,
 * 'a' abort, 'h' hang. */
static int listed(const char *list, long run, char *what)
{
	const char *p = list;
	while (*p) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			return 0;
		char w = 's';
		if (*end == 'a' || *end == 'h')
			w = *end++;
		if (v == run) {
			*what = w;
			return 1;
		}
		p = *end == ',' || *end == ' ' ? end + 1 : end;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: flaky MODE [PERMILLE [SEED]]\n");
		return 2;
	}
	const char *mode = argv[1];
	long run = flaky_run();
	if (strncmp(mode, "at:", 3) == 0) {
		char what = 0;
		const char *list = mode + 3;
		if (strcmp(list, "env") == 0)
			list = getenv("FLAKY_AT") ? getenv("FLAKY_AT") : "";
		if (listed(list, run, &what)) {
			if (what == 'a')
				model_cache_insert(run);
			if (what == 'h')
				wait_forever(run);
			model_cache_predict(run);
		}
		return 0;
	}
	int permille = argc > 2 ? atoi(argv[2]) : 1000;
	unsigned long seed = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
	if (strcmp(mode, "pass") == 0 || !flaky_fails(run, seed, permille))
		return 0;
	if (strcmp(mode, "segv") == 0)
		model_cache_predict(run);
	if (strcmp(mode, "abort") == 0)
		model_cache_insert(run);
	if (strcmp(mode, "mixed") == 0) {
		if (flaky_mix((uint64_t)run) % 3 == 0)
			model_cache_insert(run);
		model_cache_predict(run);
	}
	if (strcmp(mode, "exit3") == 0) {
		fprintf(stderr, "flaky: run %ld: wrong sum 1425636 (want 1098304)\n", run);
		return 3;
	}
	if (strcmp(mode, "hang") == 0)
		wait_forever(run);
	if (strcmp(mode, "handler") == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = own_handler;
		sigaction(SIGSEGV, &sa, NULL);
		model_cache_predict(run);
	}
	fprintf(stderr, "flaky: unknown mode %s\n", mode);
	return 2;
}
