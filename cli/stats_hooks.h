/* The campaign's streaming statistics as judge hooks (kvfuzz/outcome.h, kvfuzz/stats_sink.h):
 * `kvfuzz fuzz` counts every judged element through them, and `kvfuzz bench --oracle` times
 * the same path. One slot per judging thread carries the sink's scope between the hooks.
 *
 * Ownership: the caller owns the sink and keeps it, the kernel name and the rules alive while
 * any hook may run. Threads: calls for one thread must not overlap; threads differ freely. */
#ifndef KVFUZZ_CLI_STATS_HOOKS_H
#define KVFUZZ_CLI_STATS_HOOKS_H

#include "kvfuzz/campaign.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/spec.h"
#include "kvfuzz/stats.h"
#include "kvfuzz/stats_sink.h"

typedef struct cli_stats_hooks {
    kvf_stats_sink *sink;
    const char *kernel;
    const kvf_rule *rules;
    int nrules;
    struct cli_stats_slot {
        struct cli_stats_hooks *hs;
        int thread;
    } slots[KVF_CAMPAIGN_MAX_JOBS];
} cli_stats_hooks;

/* Starts the statistics of case c on `thread` (its identity: spec's encoding, none when spec
 * is NULL) and fills *hooks for kvf_outcome_judge_hooked. 0, or -1 for a thread out of range
 * (then judge without hooks). */
int cli_stats_hooks_begin(cli_stats_hooks *hs, int thread, const kvf_spec *spec, const kvf_case *c,
                          kvf_judge_hooks *hooks);

/* Replay's statistics (a kvf_stats) as judge hooks for one case and kernel: each rule's
 * elements counted in a scope of its own, as kvf_stats_judge counts them. A rule whose scope
 * cannot begin is judged without being counted. The struct borrows everything it points to
 * for the judgement. */
typedef struct cli_case_stats {
    kvf_stats *stats;
    const char *kernel;
    const kvf_rule *rules; /* the rules judged, in order */
    const kvf_case *c;
    const kvf_stats_case *ref;
    kvf_stats_scope scopes[KVF_MAX_RULES];
} cli_case_stats;

void cli_case_stats_hooks(cli_case_stats *cs, kvf_judge_hooks *hooks);

#endif
