/* A library whose constructor, with CRASH_EARLY_HANDLER=1, installs a
 * SIGSEGV handler before the observer's constructor runs (a program's own
 * library initializes before a preloaded one): the handler says so and
 * takes the default action. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void early_handler(int sig) {
    static const char msg[] = "early handler called\n";
    (void)!write(2, msg, sizeof msg - 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    const char *on = getenv("CRASH_EARLY_HANDLER");
    if (on && !strcmp(on, "1")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = early_handler;
        sigaction(SIGSEGV, &sa, NULL);
    }
}
