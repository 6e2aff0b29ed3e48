/*
 * A stand-in for libnvrtc.so.13 for miotool's tests. "Compiling" echoes the
 * source behind a marker the mock driver accepts; a source containing
 * #error fails with a log, as a real compile error does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct program { char *src, *name, *log, *code; int cubin; };
static int g_compiles;

int mock_nvrtc_compiles(void) { return __atomic_load_n(&g_compiles, __ATOMIC_SEQ_CST); }

int nvrtcVersion(int *major, int *minor) { *major = 13; *minor = 0; return 0; }
const char *nvrtcGetErrorString(int r) {
    switch (r) {
    case 0: return "NVRTC_SUCCESS";
    case 5: return "NVRTC_ERROR_INVALID_OPTION";
    case 6: return "NVRTC_ERROR_COMPILATION";
    }
    return "NVRTC_ERROR_UNKNOWN";
}
int nvrtcCreateProgram(struct program **p, const char *src, const char *name, int nh, const char *const *h, const char *const *inc) {
    (void)nh; (void)h; (void)inc;
    *p = calloc(1, sizeof **p);
    (*p)->src = strdup(src);
    (*p)->name = strdup(name ? name : "default_program");
    (*p)->log = strdup("");
    return 0;
}
int nvrtcCompileProgram(struct program *p, int n, const char *const *opts) {
    __atomic_add_fetch(&g_compiles, 1, __ATOMIC_SEQ_CST);
    const char *arch = NULL;
    for (int i = 0; i < n; i++)
        if (strncmp(opts[i], "--gpu-architecture=", 19) == 0) arch = opts[i] + 19;
    if (!arch) return 5;
    free(p->log);
    if (strstr(p->src, "#error")) {
        size_t len = strlen(p->name) + 64;
        p->log = malloc(len);
        snprintf(p->log, len, "%s(1): error: the source asked to fail", p->name);
        return 6;
    }
    p->log = strdup("");
    p->cubin = strncmp(arch, "sm_", 3) == 0;
    size_t len = strlen(p->src) + strlen(arch) + 32;
    p->code = malloc(len);
    snprintf(p->code, len, "%s %s\n%s", p->cubin ? "MOCKCUBIN" : "//MOCKPTX", arch, p->src);
    return 0;
}
int nvrtcGetProgramLogSize(struct program *p, size_t *n) { *n = strlen(p->log) + 1; return 0; }
int nvrtcGetProgramLog(struct program *p, char *out) { strcpy(out, p->log); return 0; }
int nvrtcGetPTXSize(struct program *p, size_t *n) { if (!p->code) return 4; *n = strlen(p->code) + 1; return 0; }
int nvrtcGetPTX(struct program *p, char *out) { if (!p->code) return 4; strcpy(out, p->code); return 0; }
/* The mock's "CUBIN" keeps its NUL so that the mock driver can read it as text. */
int nvrtcGetCUBINSize(struct program *p, size_t *n) { if (!p->code || !p->cubin) return 3; *n = strlen(p->code) + 1; return 0; }
int nvrtcGetCUBIN(struct program *p, char *out) { if (!p->code || !p->cubin) return 3; memcpy(out, p->code, strlen(p->code) + 1); return 0; }
int nvrtcDestroyProgram(struct program **p) {
    free((*p)->src); free((*p)->name); free((*p)->log); free((*p)->code); free(*p);
    *p = NULL;
    return 0;
}
