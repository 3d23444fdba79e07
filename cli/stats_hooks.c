/* The campaign's statistics as judge hooks (stats_hooks.h). */
#include "stats_hooks.h"

#include <stdlib.h>

static void *rule_begin(void *ctx, int rule) {
    struct cli_stats_slot *sl = ctx;
    return kvf_stats_sink_rule_begin(sl->hs->sink, sl->thread, rule);
}

static void rule_end(void *ctx, void *scope, const kvf_verdict *v) {
    struct cli_stats_slot *sl = ctx;
    kvf_stats_sink_rule_end(sl->hs->sink, sl->thread, scope, v);
}

int cli_stats_hooks_begin(cli_stats_hooks *hs, int thread, const kvf_spec *spec, const kvf_case *c,
                          kvf_judge_hooks *hooks) {
    if (thread < 0 || thread >= KVF_CAMPAIGN_MAX_JOBS) return -1;
    uint8_t *bytes = NULL;
    size_t size = 0;
    if (spec && kvf_spec_encode(spec, &bytes, &size, NULL)) bytes = NULL;
    kvf_stats_case ref = {NULL, bytes, bytes ? size : 0};
    kvf_stats_sink_case_begin(hs->sink, thread, hs->kernel, hs->rules, hs->nrules, c,
                              &ref); /* copies the bytes */
    free(bytes);
    struct cli_stats_slot *sl = &hs->slots[thread];
    sl->hs = hs;
    sl->thread = thread;
    hooks->begin = rule_begin;
    hooks->element = kvf_stats_observe_element;
    hooks->exact_run = kvf_stats_observe_exact_run;
    hooks->end = rule_end;
    hooks->ctx = sl;
    return 0;
}
