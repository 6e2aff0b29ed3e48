/*
 * A stand-in for libhiprtc.so.7 for miotool's tests. "Compiling" echoes the
 * target and the source behind a marker the stand-in runtime accepts; a
 * source containing #error fails with a log, as a real compile error does,
 * and one containing "mock: internal error" fails the way a broken
 * compiler install does. It records the options of the last compile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mockhip_api.h"
MOCKHIPRTC_API(MOCKHIP_DECLARE)

struct program { char *src, *name, *log, *code; };
static int g_compiles;
static char g_last_options[1024];

int mock_hiprtc_compiles(void) { return __atomic_load_n(&g_compiles, __ATOMIC_SEQ_CST); }
const char *mock_hiprtc_last_options(void) { return g_last_options; }

int hiprtcVersion(int *major, int *minor) { *major = 7; *minor = 1; return 0; }
const char *hiprtcGetErrorString(int r) {
    switch (r) {
    case 0: return "HIPRTC_SUCCESS";
    case 5: return "HIPRTC_ERROR_INVALID_OPTION";
    case 6: return "HIPRTC_ERROR_COMPILATION";
    case 11: return "HIPRTC_ERROR_INTERNAL_ERROR";
    }
    return "HIPRTC_ERROR_UNKNOWN";
}
int hiprtcCreateProgram(struct program **p, const char *src, const char *name, int nh, const char **h, const char **inc) {
    (void)nh; (void)h; (void)inc;
    *p = calloc(1, sizeof **p);
    (*p)->src = strdup(src);
    (*p)->name = strdup(name ? name : "default_program");
    (*p)->log = strdup("");
    return 0;
}
int hiprtcCompileProgram(struct program *p, int n, const char **opts) {
    __atomic_add_fetch(&g_compiles, 1, __ATOMIC_SEQ_CST);
    const char *arch = NULL;
    g_last_options[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strncat(g_last_options, " ", sizeof g_last_options - strlen(g_last_options) - 1);
        strncat(g_last_options, opts[i], sizeof g_last_options - strlen(g_last_options) - 1);
        if (strncmp(opts[i], "--offload-arch=", 15) == 0) arch = opts[i] + 15;
    }
    if (!arch) return 5;
    free(p->log);
    if (strstr(p->src, "mock: internal error")) {
        p->log = strdup("");
        return 11;
    }
    if (strstr(p->src, "#error")) {
        size_t len = strlen(p->name) + 64;
        p->log = malloc(len);
        snprintf(p->log, len, "%s:2:2: error: the source asked to fail", p->name);
        return 6;
    }
    p->log = strdup("");
    size_t len = strlen(p->src) + strlen(arch) + 16;
    p->code = malloc(len);
    snprintf(p->code, len, "MOCKCO %s\n%s", arch, p->src);
    return 0;
}
int hiprtcGetProgramLogSize(struct program *p, size_t *n) { *n = strlen(p->log) + 1; return 0; }
int hiprtcGetProgramLog(struct program *p, char *out) { strcpy(out, p->log); return 0; }
/* The stand-in code object keeps its NUL so the stand-in runtime reads it as text. */
int hiprtcGetCodeSize(struct program *p, size_t *n) { if (!p->code) return 4; *n = strlen(p->code) + 1; return 0; }
int hiprtcGetCode(struct program *p, char *out) { if (!p->code) return 4; memcpy(out, p->code, strlen(p->code) + 1); return 0; }
int hiprtcDestroyProgram(struct program **p) {
    free((*p)->src); free((*p)->name); free((*p)->log); free((*p)->code); free(*p);
    *p = NULL;
    return 0;
}
