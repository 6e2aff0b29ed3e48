/*
 * A stand-in libcupti.so.13 for the trace tests: the few functions the
 * observer calls. A subscription hands the callback to the stand-in
 * libcuda, which fires it around each driver call. As CUPTI, it takes one
 * subscriber: a second cuptiSubscribe before cuptiUnsubscribe is refused.
 * With STANDIN_CUPTI_BUSY=1 in the environment, the first one is refused
 * too, as when another client (a profiler) holds it. STANDIN_CUPTI_NARROW
 * says how it takes the observer's narrowing: "ignored-once" leaves the
 * first turning off of the driver domain without effect (it says success),
 * "ignored" every one, "late" lets each turning off take effect only after
 * 600 more callbacks, and "refused" refuses to turn callbacks on one by
 * one while it names them.
 */
#include <stdlib.h>
#include <string.h>

#include "../../observer/mt_abi.h"

void standin_cupti_attach(mt_CUpti_CallbackFunc fn, void *userdata);
void standin_cupti_enable(int on);
void standin_cupti_leak(int n);
int standin_cupti_enable_one(uint32_t cbid, int on);
const char *standin_cupti_name(uint32_t cbid);

#define EXPORT __attribute__((visibility("default")))
#define MULTIPLE_SUBSCRIBERS 39

struct CUpti_Subscriber_st {
    int unused;
};
static struct CUpti_Subscriber_st the_subscriber;
static int subscribed;

EXPORT mt_CUptiResult cuptiSubscribe(mt_CUpti_SubscriberHandle *subscriber, mt_CUpti_CallbackFunc callback,
                                     void *userdata) {
    const char *busy = getenv("STANDIN_CUPTI_BUSY");
    if ((busy && strcmp(busy, "1") == 0) || subscribed)
        return MULTIPLE_SUBSCRIBERS;
    subscribed = 1;
    *subscriber = &the_subscriber;
    standin_cupti_attach(callback, userdata);
    return MT_CUPTI_SUCCESS;
}

static int narrow_mode(const char *mode) {
    const char *m = getenv("STANDIN_CUPTI_NARROW");
    return m && strcmp(m, mode) == 0;
}

EXPORT mt_CUptiResult cuptiEnableDomain(uint32_t enable, mt_CUpti_SubscriberHandle subscriber,
                                        mt_CUpti_CallbackDomain domain) {
    static int turned_off;
    if (subscriber != &the_subscriber || domain != MT_CUPTI_CB_DOMAIN_DRIVER_API)
        return 1;
    if (!enable && (narrow_mode("ignored") || (narrow_mode("ignored-once") && !turned_off++)))
        return MT_CUPTI_SUCCESS;
    standin_cupti_enable((int)enable);
    if (!enable && narrow_mode("late"))
        standin_cupti_leak(600);
    return MT_CUPTI_SUCCESS;
}

/* With STANDIN_CUPTI_OLD=1, the two calls an old CUPTI lacks are refused,
 * as if absent: the observer keeps every callback on. */
static int old_cupti(void) {
    const char *old = getenv("STANDIN_CUPTI_OLD");
    return old && strcmp(old, "1") == 0;
}

EXPORT mt_CUptiResult cuptiEnableCallback(uint32_t enable, mt_CUpti_SubscriberHandle subscriber,
                                          mt_CUpti_CallbackDomain domain, mt_CUpti_CallbackId cbid) {
    if (old_cupti() || narrow_mode("refused") || subscriber != &the_subscriber || domain != MT_CUPTI_CB_DOMAIN_DRIVER_API)
        return 1;
    return standin_cupti_enable_one(cbid, (int)enable) ? MT_CUPTI_SUCCESS : 1;
}

EXPORT mt_CUptiResult cuptiGetCallbackName(mt_CUpti_CallbackDomain domain, uint32_t cbid, const char **name) {
    if (old_cupti() || domain != MT_CUPTI_CB_DOMAIN_DRIVER_API)
        return 1;
    *name = standin_cupti_name(cbid);
    return *name ? MT_CUPTI_SUCCESS : 1;
}

EXPORT mt_CUptiResult cuptiUnsubscribe(mt_CUpti_SubscriberHandle subscriber) {
    (void)subscriber;
    subscribed = 0;
    standin_cupti_attach(NULL, NULL);
    standin_cupti_enable(0);
    return MT_CUPTI_SUCCESS;
}

EXPORT mt_CUptiResult cuptiGetResultString(mt_CUptiResult result, const char **str) {
    *str = result == MULTIPLE_SUBSCRIBERS ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" : "CUPTI_ERROR";
    return MT_CUPTI_SUCCESS;
}
