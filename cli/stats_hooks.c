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

static void *case_rule_begin(void *ctx, int rule) {
    cli_case_stats *cs = ctx;
    if (rule < 0 || rule >= KVF_MAX_RULES) return NULL;
    kvf_stats_scope *sc = &cs->scopes[rule];
    return kvf_stats_begin(sc, cs->stats, cs->kernel, &cs->rules[rule], cs->c, cs->ref, NULL) ? NULL
                                                                                              : sc;
}

static void case_rule_end(void *ctx, void *scope, const kvf_verdict *v) {
    (void)ctx;
    if (v)
        kvf_stats_observe_verdict(scope, v);
    else
        kvf_stats_end(scope);
}

void cli_case_stats_hooks(cli_case_stats *cs, kvf_judge_hooks *hooks) {
    hooks->begin = case_rule_begin;
    hooks->element = kvf_stats_observe_element;
    hooks->exact_run = kvf_stats_observe_exact_run;
    hooks->end = case_rule_end;
    hooks->ctx = cs;
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
