/*
 * A program's own CUDA injection library, as a profiler ships one: its
 * InitializeInjection asks CUPTI for a subscription and says on stderr
 * what it got. Under the trace the observer loads it after itself, and
 * CUPTI, which takes one subscriber, refuses it.
 */
#include <stdio.h>

#include "../../observer/mt_abi.h"

mt_CUptiResult cuptiSubscribe(mt_CUpti_SubscriberHandle *subscriber, mt_CUpti_CallbackFunc callback, void *userdata);

static void callback(void *userdata, mt_CUpti_CallbackDomain domain, mt_CUpti_CallbackId cbid, const void *cbdata) {
    (void)userdata, (void)domain, (void)cbid, (void)cbdata;
}

__attribute__((visibility("default"))) int InitializeInjection(void) {
    mt_CUpti_SubscriberHandle sub = NULL;
    mt_CUptiResult r = cuptiSubscribe(&sub, callback, NULL);
    fprintf(stderr, "user injection initialized: cuptiSubscribe returned %u\n", r);
    return 1;
}
