/* libcache_race: ROCM-27477's defect in a library of its own, in a CUDA
 * process: a model cache with no lock, filled on first use by several
 * threads at once. Two threads that miss the same key together both load
 * the model; the second insert destroys the first thread's model (its
 * device weights freed, its host table unmapped) while that thread still
 * predicts with it, and the process ends with SIGSEGV in model_predict,
 * now and then, as the threads' timing decides.
 *
 * The CUDA driver is opened at run time (dlopen of libcuda.so.1), so gcc
 * alone builds it: gcc -shared -fPIC -O1 -g -o libcache_race.so cache_race.c -ldl -pthread
 *
 * Environment:
 *   CACHE_RACE_JITTER_US  how long a load takes, at most (default 2000): a
 *                         random part of it each time, seeded by the run
 *                         (MIOTOOL_REPEAT_RUN) and the thread; the wider,
 *                         the rarer the crash
 *   CACHE_RACE_HOST_ONLY  1: no CUDA driver, the cache on the host alone
 *   CACHE_RACE_FORCE      1: the second thread waits for the first to hold
 *                         its model, so that the race always happens
 *   CACHE_RACE_LOCKED     1: the fix, one mutex over find and insert (as
 *                         ROCM-27477's GetFdeepModel has it): a model, once
 *                         inserted, is never replaced
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

static struct {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*memcpy_htod)(CUdeviceptr, const void *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
} cu;
static CUcontext context;
static int host_only, force, locked;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static long jitter_us = 2000;

enum { TABLE_FLOATS = 16384, SLOTS = 8 };

struct model {
	long key;
	float *table; /* mmap'd: unmapped when the model is destroyed */
	CUdeviceptr weights;
};

static struct model *cache[SLOTS]; /* no lock: the defect */

/* For CACHE_RACE_FORCE: the first thread holds its model, the second has
 * destroyed it. */
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t order_cv = PTHREAD_COND_INITIALIZER;
static int inserted, destroyed, predicted;

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (!p)
		fprintf(stderr, "cache_race: libcuda.so.1 has no %s\n", name);
	return p;
}

/* cache_race_init opens the device: 0 when it is open, 1 with no CUDA
 * driver, 2 when the driver refuses. */
int cache_race_init(void)
{
	const char *v;
	host_only = (v = getenv("CACHE_RACE_HOST_ONLY")) && strcmp(v, "1") == 0;
	force = (v = getenv("CACHE_RACE_FORCE")) && strcmp(v, "1") == 0;
	locked = (v = getenv("CACHE_RACE_LOCKED")) && strcmp(v, "1") == 0;
	if ((v = getenv("CACHE_RACE_JITTER_US")) && *v)
		jitter_us = atol(v);
	if (host_only)
		return 0;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		fprintf(stderr, "cache_race: no CUDA driver: %s\n", dlerror());
		return 1;
	}
	cu.init = sym(lib, "cuInit");
	cu.device_get = sym(lib, "cuDeviceGet");
	cu.primary_ctx_retain = sym(lib, "cuDevicePrimaryCtxRetain");
	cu.ctx_set_current = sym(lib, "cuCtxSetCurrent");
	cu.mem_alloc = sym(lib, "cuMemAlloc_v2");
	cu.memcpy_htod = sym(lib, "cuMemcpyHtoD_v2");
	cu.mem_free = sym(lib, "cuMemFree_v2");
	if (!cu.init || !cu.device_get || !cu.primary_ctx_retain || !cu.ctx_set_current || !cu.mem_alloc || !cu.memcpy_htod || !cu.mem_free)
		return 2;
	CUdevice dev;
	CUresult r;
	if ((r = cu.init(0)) || (r = cu.device_get(&dev, 0)) || (r = cu.primary_ctx_retain(&context, dev))) {
		fprintf(stderr, "cache_race: the CUDA driver refused: error %d\n", r);
		return 2;
	}
	return 0;
}

static unsigned long seed_of(long key)
{
	const char *run = getenv("MIOTOOL_REPEAT_RUN");
	unsigned long s = (unsigned long)(run ? atol(run) : time(NULL)) * 2654435761UL;
	return s ^ (unsigned long)key ^ (unsigned long)pthread_self();
}

/* load_model builds the model: its table on the host and its weights on
 * the device; loading takes a while, which is the race's window. */
__attribute__((noinline)) static struct model *load_model(long key)
{
	struct model *m = calloc(1, sizeof *m);
	m->key = key;
	m->table = mmap(NULL, TABLE_FLOATS * sizeof(float), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (int i = 0; i < TABLE_FLOATS; i++)
		m->table[i] = 1.0f / (float)(i + 1);
	if (!host_only) {
		cu.ctx_set_current(context);
		if (cu.mem_alloc(&m->weights, TABLE_FLOATS * sizeof(float)) == 0)
			cu.memcpy_htod(m->weights, m->table, TABLE_FLOATS * sizeof(float));
	}
	if (jitter_us > 0) {
		unsigned int s = (unsigned int)seed_of(key);
		usleep((useconds_t)(rand_r(&s) % jitter_us));
	}
	return m;
}

__attribute__((noinline)) static void destroy_model(struct model *m)
{
	if (!host_only && m->weights)
		cu.mem_free(m->weights);
	munmap(m->table, TABLE_FLOATS * sizeof(float));
	m->table = NULL;
	free(m);
}

/* get_model_locked is the fix: find and, on a miss, load and insert under
 * one lock; an inserted model is never replaced. */
static struct model *get_model_locked(long key)
{
	int slot = (int)(key % SLOTS);
	pthread_mutex_lock(&cache_mu);
	struct model *m = cache[slot];
	/* Another key's model in the slot is left alive, not destroyed: a
	 * thread may still predict with it. */
	if (!m || m->key != key)
		m = cache[slot] = load_model(key);
	pthread_mutex_unlock(&cache_mu);
	return m;
}

/* get_model is the pre-fix cache: find, and on a miss load and insert,
 * replacing (and destroying) whatever another thread inserted meanwhile. */
__attribute__((noinline)) struct model *get_model(long key, int second)
{
	if (locked)
		return get_model_locked(key);
	int slot = (int)(key % SLOTS);
	struct model *m = cache[slot];
	if (m && m->key == key && !(force && second))
		return m;
	if (force && second) {
		pthread_mutex_lock(&order_mu);
		while (!inserted)
			pthread_cond_wait(&order_cv, &order_mu);
		pthread_mutex_unlock(&order_mu);
	}
	struct model *fresh = load_model(key);
	struct model *old = cache[slot];
	cache[slot] = fresh;
	if (old && old->key == key && old != fresh)
		destroy_model(old);
	return fresh;
}

/* model_predict reads the model's table: where it crashes when another
 * thread has destroyed the model. */
__attribute__((noinline)) float model_predict(struct model *m)
{
	volatile float sum = 0;
	float *table = m->table;
	for (int pass = 0; pass < 8; pass++)
		for (int i = 0; i < TABLE_FLOATS; i++)
			sum += table[i];
	return sum;
}

/* cache_race_predict is what a thread calls: its model, then a
 * prediction with it. second is the thread's number (0 or 1). */
float cache_race_predict(long key, int second)
{
	struct model *m = get_model(key, second);
	if (force && !locked) {
		pthread_mutex_lock(&order_mu);
		if (!second) {
			inserted = 1;
			pthread_cond_broadcast(&order_cv);
			while (!destroyed)
				pthread_cond_wait(&order_cv, &order_mu);
		} else {
			destroyed = 1;
			pthread_cond_broadcast(&order_cv);
			/* Hold still until the first thread has predicted (it crashes
			 * first): faulthandler reads the other threads' frames before
			 * the crashing one's, and a thread that runs on meanwhile can
			 * end the report before it names the crash. Bounded. */
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 30;
			while (!predicted && pthread_cond_timedwait(&order_cv, &order_mu, &until) == 0)
				;
		}
		pthread_mutex_unlock(&order_mu);
		if (second)
			return 0;
	}
	float sum = model_predict(m);
	if (force && !locked) {
		pthread_mutex_lock(&order_mu);
		predicted = 1;
		pthread_cond_broadcast(&order_cv);
		pthread_mutex_unlock(&order_mu);
	}
	return sum;
}
