/* What every thread of a campaign shares (campaign_internal.h): the clock, the log, the job
 * buffers and the stop flag. Apart from campaign.c, so that the threads' files (generate.c,
 * dispatch.c, judge_pool.c) depend on these and campaign.c on them, and not in a circle. */
#include <stdlib.h>
#include <time.h>

#include "campaign_internal.h"

double kvf__now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

FILE *kvf__log(const struct kvf_campaign *cp) {
    return cp->opts->log ? cp->opts->log : stderr;
}

void kvf__job_free(kvf__job *j) {
    if (!j) return;
    kvf_spec_free(&j->spec);
    kvf_case_free(&j->c);
    free(j->bytes);
    free(j->o);
    free(j->lse);
    free(j->o2);
    free(j->lse2);
    if (j->pair) kvf_relation_pair_free(j->pair);
    free(j->pair);
    free(j);
}

void kvf__job_free_any(void *j) {
    kvf__job_free(j);
}

/* A case's bytes: its pages, q and output buffers. */
static size_t case_bytes(const kvf_case *c, int with_outputs) {
    const size_t pages = (size_t)c->num_resident_pages * (size_t)kvf_case_page_elems(c) * 2 * 2;
    const size_t outs = (size_t)kvf_case_o_elems(c) * 2 + (size_t)kvf_case_lse_elems(c) * 4;
    return pages + (size_t)kvf_case_q_elems(c) * 2 + (with_outputs ? outs : 0);
}

size_t kvf__job_bytes(const kvf__job *j) {
    const kvf_case *c = &j->c;
    const size_t outs = (size_t)kvf_case_o_elems(c) * 2 + (size_t)kvf_case_lse_elems(c) * 4;
    if (j->pair) /* the derived case, and its outputs in o2 */
        return j->size + case_bytes(c, j->o != NULL) + case_bytes(&j->pair->derived, 1);
    return j->size + case_bytes(c, j->o != NULL) + (j->o2 ? outs : 0);
}

void kvf__campaign_stop(struct kvf_campaign *cp, int how) {
    int cur = atomic_load(&cp->stop);
    while (cur < how && !atomic_compare_exchange_weak(&cp->stop, &cur, how)) {
    }
    /* Generators waiting for room give up; with DROP, everything waiting wakes and leaves
     * (what is queued is freed with the campaign). */
    kvf__queue_close(&cp->ready);
    if (how >= KVF__DROP) {
        kvf__queue_abort(&cp->ready);
        kvf__queue_abort(&cp->judged);
    }
}
