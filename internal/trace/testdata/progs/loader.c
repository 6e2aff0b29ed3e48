/*
 * Loads a library the way Python loads an extension module, RTLD_LOCAL,
 * with the HIP runtime among its dependencies and not in the program's
 * own, and runs its capture: the interposer must still find the runtime.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    unsigned (*capture)(void) = (unsigned (*)(void))dlsym(h, "helper_capture_query");
    printf("loader: helper end capture %u\n", capture ? capture() : 999u);
    return 0;
}
