/*
 * Asks the rule functions of the trace stand-ins' capture_rules.h about
 * every cell: one capture on stream s in the cell's mode, begun by this
 * thread ("same") or by another ("other": an owner id no thread has), this
 * thread in the cell's interaction mode, then the function. It prints
 *
 *     FUNCTION CAPTURE same|other MODE REFUSED INVALIDATED
 *
 * for TestCaptureRulesHeaderFollowsTheRulesTables, which knows the actions
 * each function stands for.
 */
#include <stdio.h>
#include <sys/types.h>

struct stream {
    int status, mode, nodes;
    pid_t owner;
};
#define STANDIN_STREAM struct stream
#include "capture_rules.h"

static const char *const modes[] = {"global", "thread-local", "relaxed"};

static void ask(const char *name, int (*fn)(void)) {
    for (int capture = GLOBAL; capture <= RELAXED; capture++)
        for (int other = 0; other <= 1; other++)
            for (int mode = GLOBAL; mode <= RELAXED; mode++) {
                struct stream s = {.status = ACTIVE, .mode = capture, .owner = other ? me() + 1000000 : me()};
                pthread_mutex_lock(&mu);
                add(&s);
                thread_mode = mode;
                int refused = fn() != 0;
                thread_mode = GLOBAL;
                drop(&s);
                pthread_mutex_unlock(&mu);
                printf("%s %s %s %s %d %d\n", name, modes[capture], other ? "other" : "same", modes[mode], refused,
                       s.status == INVALIDATED);
            }
}

int main(void) {
    ask("unsafe_call", unsafe_call);
    ask("host_memory_call", host_memory_call);
    ask("cuda_module_unload", cuda_module_unload);
    return fflush(stdout) == 0 ? 0 : 1;
}
