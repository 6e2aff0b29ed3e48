/*
 * The programs the crash handler's tests run, one scenario per first
 * argument. The functions that crash are exported (the program is linked
 * with -rdynamic) so that the stack names them; they print their scenario
 * on stderr first, so that a test can hold the program's own output to
 * what it wrote.
 *
 *   segv           a write through a null pointer in crash_in_named_function
 *   abort          abort() in abort_in_named_function
 *   own-handler    its own SIGSEGV handler (sigaction, after the observer
 *                  loaded), which says so and restores the default action
 *                  and raises the signal again
 *   handler-exit   its own SIGSEGV handler, installed with signal(), which
 *                  exits 42
 *   early-handler  a handler installed by a library's constructor, before
 *                  the observer's (libcrashearly.so, with
 *                  CRASH_EARLY_HANDLER=1), then a segv
 *   raise-ignored  SIGSEGV ignored, then raised with raise(): nothing
 *                  happens, and the program exits 0
 *   exit           exits 3, no signal
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORTED __attribute__((visibility("default"), noinline))

static void say(const char *s) {
    (void)!write(2, s, strlen(s));
}

volatile int *volatile nowhere;

EXPORTED int crash_in_named_function(int depth) {
    if (depth > 0)
        return crash_in_named_function(depth - 1) + 1;
    *nowhere = 1;
    return 0;
}

EXPORTED void abort_in_named_function(void) { abort(); }

static void own_handler(int sig) {
    say("own handler called\n");
    signal(sig, SIG_DFL);
    raise(sig);
}

static void exiting_handler(int sig) {
    (void)sig;
    say("exiting handler called\n");
    _exit(42);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
        return 2;
    }
    const char *scenario = argv[1];
    say(scenario);
    say("\n");
    if (!strcmp(scenario, "segv") || !strcmp(scenario, "early-handler")) {
        crash_in_named_function(3);
    } else if (!strcmp(scenario, "abort")) {
        abort_in_named_function();
    } else if (!strcmp(scenario, "own-handler")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = own_handler;
        sigaction(SIGSEGV, &sa, NULL);
        struct sigaction back;
        sigaction(SIGSEGV, NULL, &back);
        if (back.sa_handler != own_handler)
            say("sigaction does not give back the handler set\n");
        crash_in_named_function(0);
    } else if (!strcmp(scenario, "handler-exit")) {
        signal(SIGSEGV, exiting_handler);
        crash_in_named_function(0);
    } else if (!strcmp(scenario, "raise-ignored")) {
        signal(SIGSEGV, SIG_IGN);
        raise(SIGSEGV);
        say("still here\n");
        return 0;
    } else if (!strcmp(scenario, "exit")) {
        return 3;
    } else {
        say("unknown scenario\n");
        return 2;
    }
    return 1;
}
