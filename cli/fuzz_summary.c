/* kvfuzz fuzz's output around the campaign (fuzz_cli.h): the first lines, then the statistics
 * closed, the summary, the verdicts and the groups of findings. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_cli.h"
#include "kvfuzz/stats.h"
#include "kvfuzz/stats_sink.h"
#include "kvfuzz/verdict.h"

/* The campaign's answer, last: per rule, the cases judged and the signatures found. Every new
 * signature is one finding file; the statistics tell the benign failures apart. */
static void print_verdicts(FILE *f, const kvf_stats *stats, const kvf_campaign_stats *st) {
    kvf_verdict_counts vc[KVF_MAX_RULES];
    size_t n = kvf_stats_verdicts(stats, vc, KVF_MAX_RULES);
    if (n > KVF_MAX_RULES) n = KVF_MAX_RULES;
    fprintf(f, "verdict:\n");
    for (size_t i = 0; i < n; i++) {
        /* Signatures are per campaign, not per rule; with one rule they are that rule's. */
        if (kvf_verdict_counts_failed(&vc[i]) && n == 1) vc[i].signatures = (long)st->findings_new;
        kvf_verdict_counts_print(f, &vc[i], "  ");
    }
    if (n == 0) fprintf(f, "  nothing judged\n");
    /* Tolerance signatures split by attribution: a defect lies outside every precision model,
     * the others only below the precision the kernel declared (docs/precision.md). */
    if (st->signatures_defect + st->signatures_precision > 0)
        fprintf(f,
                "  tolerance signatures: %" PRId64 " %s (no precision model explains %s), %" PRId64
                " within a looser precision model than the one judged (the kernel's precision "
                "is below what it declares)\n",
                st->signatures_defect, st->signatures_defect == 1 ? "defect" : "defects",
                st->signatures_defect == 1 ? "it" : "them", st->signatures_precision);
}

void cli_fuzz_banner(const cli_fuzz *f, const kvf_precision *model,
                     cli_precision_source model_source, int stale) {
    if (f->o.oracle_only) {
        fprintf(stderr, "kvfuzz fuzz: oracle only (no kernel, nothing judged), seed %" PRIu64,
                f->o.seed);
    } else {
        fprintf(stderr, "kvfuzz fuzz: kernel %s, seed %" PRIu64 "%s%s, rules", f->o.kernel->name,
                f->o.seed, f->tag ? ", tag " : "", f->tag ? f->tag : "");
        for (int r = 0; r < f->o.nrules; r++)
            fprintf(stderr, " %s", f->o.rules[r].name);
    }
    const unsigned dtypes = kvf_kv_dtypes_norm(f->o.mutate.kv_dtypes);
    if (dtypes != KVF_KV_DTYPES_ALL) fprintf(stderr, ", kv caches %s", kvf_kv_dtypes_name(dtypes));
    fprintf(stderr, ", %s in %s%s%s\n", f->o.oracle_only ? "statistics" : "findings",
            f->o.findings_dir, f->o.corpus_dir ? ", corpus " : "",
            f->o.corpus_dir ? f->o.corpus_dir : "");
    if (!f->o.oracle_only) {
        char mtext[96];
        cli_precision_text(model, model_source, mtext, sizeof mtext);
        fprintf(stderr, "kvfuzz fuzz: precision model %s\n", mtext);
    }
    if (stale)
        fprintf(stderr, "kvfuzz fuzz: removed %d temporary file(s) left by an interrupted write\n",
                stale);
}

int cli_fuzz_finish(cli_fuzz *f, cli_fuzz_stats *fs, const kvf_precision *model,
                    kvf_campaign_stats *st0, int rc, const kvf_error *err) {
    kvf_campaign_stats st = *st0;
    if (!st.interrupted && kvf_campaign_stop_signal()) {
        /* Caught before the campaign started (it then never ran): still a stop by signal. */
        st.interrupted = 1;
        st.stop_signal = kvf_campaign_stop_signal();
    }
    kvf_error serr = {0};
    if (st.ndevices) {
        kvf_stats_device devs[KVF_MAX_DEVICES];
        memset(devs, 0, sizeof devs);
        for (int k = 0; k < st.ndevices; k++) {
            const kvf_campaign_device *d = &st.device[k];
            devs[k] = (kvf_stats_device){d->ordinal, d->cases,         d->active_s, d->crashes,
                                         d->hangs,   d->kernel_errors, d->retired,  ""};
            /* The statistics keep the first sentence's worth; the log has it whole. */
            snprintf(devs[k].why, sizeof devs[k].why, "%.*s", (int)sizeof devs[k].why - 1, d->why);
        }
        if (kvf_stats_sink_set_devices(fs->hooks.sink, devs, (size_t)st.ndevices, &serr))
            fprintf(stderr, "kvfuzz fuzz: %s\n", serr.msg);
    }
    if (kvf_stats_sink_finish(fs->hooks.sink, &serr)) /* the oracle threads have all ended */
        fprintf(stderr, "kvfuzz fuzz: %s\n", serr.msg);
    else
        fprintf(stderr, "kvfuzz fuzz: statistics in %s\n", f->stats_path);
    if (rc) {
        fprintf(stderr, "kvfuzz fuzz: %s\n", err->msg);
        if (st.cases == 0) {
            kvf_stats_sink_free(fs->hooks.sink);
            kvf_campaign_release_signals();
            return KVF_EXIT_USAGE;
        }
    }
    kvf_campaign_print_summary(stdout, &f->o, &st);
    print_verdicts(stdout, kvf_stats_sink_stats(fs->hooks.sink), &st);
    if (!f->o.oracle_only)
        cli_fuzz_triage(stdout, f->o.findings_dir, f->o.kernel, model,
                        f->minimize_time >= 0 ? f->minimize_time : fmin(60, 0.1 * st.elapsed_s));
    kvf_stats_sink_free(fs->hooks.sink);
    fflush(stdout);
    /* Held until here: a signal during the last statistics write or the summary is the
     * orderly stop's, already under way (a second one still kills). */
    kvf_campaign_release_signals();
    if (st.finding_hits > 0) return KVF_EXIT_FINDINGS;
    return rc ? KVF_EXIT_USAGE : KVF_EXIT_OK;
}
