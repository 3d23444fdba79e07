/* Invariance relations in a campaign (campaign_internal.h; docs/invariance.md): every
 * relations_every-th case also runs transformed by one relation, the relations in turn. The
 * generator derives the second case, the dispatcher runs it right after the first and hands
 * both outputs here; a broken relation the kernel promises is an `invariance` finding (the case
 * saved, the relation and its seed in the report), one it does not promise a property.
 * Graph replay applies only to CUDA kernels run through the buffer host. A kernel that does not
 * promise it and whose replay failed outright (a crash, a device error: a kernel not built for
 * graphs may fault on a stale plan) has its property settled: the campaign stops trying it
 * rather than pay a fresh worker every few cases. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "campaign_internal.h"

/* Chosen for a relation: never a case the determinism check re-runs. */
static int wants_relation(const kvf_campaign_opts *o, uint64_t index) {
    if (o->relations_every <= 0 || o->oracle_only || !o->kernel) return 0;
    const uint64_t every = (uint64_t)o->relations_every;
    if (index % every != every / 2) return 0;
    return !(o->determinism_every > 0 &&
             index % (uint64_t)o->determinism_every == (uint64_t)o->determinism_every - 1);
}

void kvf__job_relate(struct kvf_campaign *cp, kvf__job *j) {
    const kvf_campaign_opts *o = cp->opts;
    if (!wants_relation(o, j->index)) return;
    kvf_relation_pair *p = malloc(sizeof *p);
    if (!p) return;
    const uint64_t turn = j->index / (uint64_t)o->relations_every;
    /* The relation of this turn, or the next one that applies to the case. */
    const unsigned off = atomic_load(&cp->relations_off);
    for (int k = 0; k < KVF_RELATION_COUNT; k++) {
        const kvf_relation r = (kvf_relation)((turn + (uint64_t)k) % KVF_RELATION_COUNT);
        if ((off & KVF_RELATION_BIT(r)) ||
            (kvf_relation_is_replay(r) && !kvf_kernel_can_graph_replay(o->kernel)))
            continue;
        kvf_error err = {0};
        const uint64_t seed = o->seed * 0x9E3779B97F4A7C15ull + j->index;
        if (kvf_relation_derive(p, r, &j->c, seed, &o->case_limits, &err) == 0) {
            j->pair = p;
            return;
        }
    }
    free(p);
}

static void note_pair(kvf_campaign_stats *st, const kvf_relation_pair *p, const kvf_outcome *out,
                      const kvf__job *j) {
    const int r = (int)p->relation;
    st->relation_checked[r]++;
    if (!out->relation_broken) return;
    if (st->relation_broken[r]++ > 0) return;
    const kvf_difference *d = &out->difference;
    if (d->count > 0)
        snprintf(st->relation_example[r], sizeof st->relation_example[r],
                 "case %" PRIu64 ", %.120s (seed %" PRIu64 "): %" PRId64
                 " element(s) differ, first %s[b=%d h=%d] 0x%x vs 0x%x",
                 j->index, p->what, p->seed, d->count, d->output == KVF_OUTPUT_O ? "o" : "lse",
                 d->b, d->h, d->first_bits, d->second_bits);
    else
        snprintf(st->relation_example[r], sizeof st->relation_example[r],
                 "case %" PRIu64 ", %.120s (seed %" PRIu64 "): %.320s", j->index, p->what, p->seed,
                 out->message);
}

void kvf__relation_done(struct kvf_campaign *cp, kvf__job *j, const kvf_run_result *res) {
    const kvf_relation_pair *p = j->pair;
    if (res->status == KVF_RUN_UNSUPPORTED) return; /* the kernel declined the second case */
    const unsigned promised = kvf_kernel_promises(cp->opts->kernel);
    const int is_promised = (promised & KVF_RELATION_BIT(p->relation)) != 0;
    kvf_outcome out;
    kvf_outcome_from_run(&out, KVF_RUN_OK, NULL);
    if (res->status == KVF_RUN_OK) {
        kvf_outcome_relate(&out, p, is_promised, &j->c, j->o, j->lse, j->o2, j->lse2);
    } else { /* the first run gave output, the second none: the relation broke */
        if (kvf_relation_is_replay(p->relation) && !is_promised)
            atomic_fetch_or(&cp->relations_off, KVF_RELATION_BIT(p->relation));
        kvf_outcome_relation_broken(&out, p, is_promised);
        snprintf(out.message, sizeof out.message, "the %s ended: %s: %.200s",
                 kvf_relation_is_replay(p->relation) ? "graph replay" : "transformed case's run",
                 kvf_run_status_name(res->status), res->message);
    }
    pthread_mutex_lock(&cp->mu);
    cp->stats->relations_promised = promised;
    note_pair(cp->stats, p, &out, j);
    if (out.finding == KVF_FINDING_INVARIANCE) kvf__record_finding(cp, &out, j);
    pthread_mutex_unlock(&cp->mu);
}

void kvf__relations_print(FILE *f, const kvf_campaign_stats *st) {
    int64_t pairs = 0;
    for (int r = 0; r < KVF_RELATION_COUNT; r++)
        pairs += st->relation_checked[r];
    if (pairs == 0) return;
    fprintf(f, "  relations (%" PRId64 " pair(s) run twice, docs/invariance.md):\n", pairs);
    for (int r = 0; r < KVF_RELATION_COUNT; r++) {
        const int promised = (st->relations_promised & KVF_RELATION_BIT(r)) != 0;
        const char *name = kvf_relation_name((kvf_relation)r);
        if (st->relation_checked[r] == 0) {
            /* A replay never applies to a CPU kernel; that is the usual reason it has no pair. */
            fprintf(f, "    %-18s %s, not checked (%s)\n", name, promised ? "promised" : "property",
                    kvf_relation_is_replay((kvf_relation)r)
                        ? "it applies to CUDA kernels run through the buffer host"
                        : "no case it applied to");
        } else if (st->relation_broken[r] == 0) {
            fprintf(f, "    %-18s %s, held in %" PRId64 " pair(s)\n", name,
                    promised ? "promised" : "property", st->relation_checked[r]);
        } else {
            fprintf(f, "    %-18s %s in %" PRId64 " of %" PRId64 " pair(s); first: %s\n", name,
                    promised ? "promised, BROKEN" : "property, does not hold",
                    st->relation_broken[r], st->relation_checked[r], st->relation_example[r]);
        }
    }
}
