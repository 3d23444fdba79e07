/* kvfuzz replay's output (replay_cli.h): the table's header, a line per case and kernel with
 * the attribution of each failing verdict under it, and the summary with the verdicts. */
#include <stdio.h>
#include <string.h>

#include "replay_cli.h"
#include "stats_hooks.h"

void cli_replay_header(const cli_replay *r) {
    /* A column is named as its rule is judged when every kernel judges it alike
     * ("strict:bf16-p"), else by the rule as given; the lines above it say each kernel's
     * model. */
    for (size_t k = 0; k < r->kernels.count; k++)
        printf("precision model for %s: %s\n", r->kernels.items[k]->name, r->kmodel[k]);
    printf("%-34s %-14s", "case", "kernel");
    for (int j = 0; j < r->nrules; j++) {
        const char *name = r->krules[0][j].name;
        for (size_t k = 1; k < r->kernels.count; k++)
            if (strcmp(r->krules[k][j].name, name) != 0) name = r->rules[j].name;
        printf(" %-12s", name);
    }
    printf(" %11s %11s %8s %7s\n", "max_abs", "max_rel", "max_ulp", "nan/inf");
}

/* The verdicts of kernel k's output on one case: a word per rule, o's error figures, the plan
 * of a failing run and each failing strict or fa verdict's attribution under the line. One
 * trial judges every rule, counting each rule's elements into the statistics while it judges
 * them. */
static void print_verdicts(cli_replay *r, size_t k, const kvf_replay_case *rc,
                           const kvf_stats_case *ref) {
    kvf_replay_result *res = &r->res;
    cli_case_stats cs = {.stats = r->stats,
                         .kernel = r->kernels.items[k]->name,
                         .rules = r->krules[k],
                         .c = &rc->c,
                         .ref = ref};
    kvf_judge_hooks hooks;
    cli_case_stats_hooks(&cs, &hooks);
    if (kvf_replay_judge(&r->session, rc, k, r->stats ? &hooks : NULL, res)) {
        printf(" not judged: %s\n", res->error);
        return;
    }
    for (int j = 0; j < r->nrules; j++) {
        const kvf_verdict *v = &res->out.verdicts[j];
        kvf_verdict_counts_add(&r->counts[k][j], v, r->require_overflow);
        const char *word = res->status[j] == KVF_VERDICT_PASS ? "pass"
                           : res->status[j] == KVF_VERDICT_RULE_REJECTS_ROUNDED
                               ? "benign"
                               : kvf_finding_class_name(v->finding);
        printf(" %-12s", word);
    }
    const kvf_verdict *last = &res->out.verdicts[r->nrules - 1];
    printf(" %11.3e %11.3e %8lld %7lld\n", last->o.max_abs, last->o.max_rel_fib,
           (long long)last->o.max_ulps,
           (long long)(last->o.nonfinite_mismatch + last->lse.nonfinite_mismatch));
    if (res->failed && res->run.plan[0]) printf("%-34s   plan: %s\n", "", res->run.plan);
    for (int j = 0; j < r->nrules; j++) {
        if (res->repeats[j]) continue;
        if (res->attr_error[j][0])
            printf("%-34s   attribution (%s): not attributed: %s\n", "", r->krules[k][j].name,
                   res->attr_error[j]);
        else if (res->attr[j].kind != KVF_ATTRIB_NONE)
            printf("%-34s   attribution (%s): %s\n", "", r->krules[k][j].name, res->attr[j].text);
    }
}

/* One relation of kernel k on the case: a line saying whether it held. */
static void print_relation(cli_replay *r, size_t k, const kvf_replay_case *rc, kvf_relation rel,
                           uint64_t seed) {
    kvf_outcome out;
    char why[KVF_ERROR_MSG_MAX] = "";
    const int64_t n = kvf_replay_relate(&r->session, rc, k, rel, seed, &out, why, sizeof why);
    printf("%-34s   relation %s (seed %llu): ", "", kvf_relation_name(rel),
           (unsigned long long)seed);
    if (n < 0) {
        printf("not checked: %s\n", why);
        return;
    }
    if (n == 0) {
        printf("held (%s)\n", out.relation_what);
        return;
    }
    const kvf_difference *d = &out.difference;
    printf("%s: %s; %lld element(s) differ, first %s[b=%d h=%d",
           out.relation_promised ? "BROKEN, promised (invariance)" : "does not hold (a property)",
           out.relation_what, (long long)d->count, d->output == KVF_OUTPUT_O ? "o" : "lse", d->b,
           d->h);
    if (d->d >= 0) printf(" d=%d", d->d);
    printf("] 0x%x vs 0x%x\n", d->first_bits, d->second_bits);
}

/* The relations asked for, and the one the case's finding report names. */
static void print_relations(cli_replay *r, size_t k, const kvf_replay_case *rc) {
    int from_report = -1;
    uint64_t report_seed = 0;
    json_t *report = NULL;
    kvf_error err = {0};
    if (cli_read_report(rc->path, &report, &err) == 0 && report &&
        kvf_finding_report_relation(report, &from_report, &report_seed) != 1)
        from_report = -1;
    json_decref(report);
    for (int rel = 0; rel < KVF_RELATION_COUNT; rel++)
        if (r->relations & KVF_RELATION_BIT(rel))
            print_relation(r, k, rc, (kvf_relation)rel, r->relation_seed);
    if (from_report >= 0 &&
        (!(r->relations & KVF_RELATION_BIT(from_report)) || report_seed != r->relation_seed))
        print_relation(r, k, rc, (kvf_relation)from_report, report_seed);
}

/* Kernel k on one case: its run, counted in the statistics, then its verdicts. */
static void print_kernel(cli_replay *r, size_t k, const kvf_replay_case *rc,
                         const kvf_stats_case *ref) {
    const char *name = r->kernels.items[k]->name;
    printf("%-34s %-14s", rc->name, name);
    kvf_replay_result *res = &r->res;
    kvf_replay_run_kind kind = kvf_replay_run(&r->session, rc, k, res);
    if (r->stats)
        kvf_stats_count_run(r->stats, name,
                            kind == KVF_REPLAY_RAN           ? KVF_STATS_RAN
                            : kind == KVF_REPLAY_UNSUPPORTED ? KVF_STATS_UNSUPPORTED
                                                             : (int)res->run_class,
                            NULL);
    if (kind == KVF_REPLAY_UNSUPPORTED)
        printf(" unsupported: %s\n", res->run.message);
    else if (kind == KVF_REPLAY_RUN_FAILED)
        printf(" %s: %s\n", kvf_finding_class_name(res->run_class), res->run.message);
    else {
        print_verdicts(r, k, rc, ref);
        print_relations(r, k, rc);
    }
}

void cli_replay_case(cli_replay *r, const char *path) {
    kvf_replay_case rc;
    kvf_error err = {0};
    kvf_replay_case_status st = kvf_replay_case_open(&r->session, &rc, path, &err);
    if (st == KVF_REPLAY_CASE_BAD_INPUT) {
        cli_usage_error("replay", "%s: %s", path, err.msg);
        printf("%-34s %-14s bad input\n", rc.name, "-");
        kvf_replay_case_close(&rc);
        return;
    }
    if (st == KVF_REPLAY_CASE_ORACLE_FAILED) {
        cli_usage_error("replay", "%s: the oracle failed: %s", path, err.msg);
        printf("%-34s %-14s not judged: the oracle failed\n", rc.name, "-");
    } else if (st == KVF_REPLAY_CASE_NO_MEMORY) {
        cli_usage_error("replay", "out of memory for %s", path);
    } else {
        const kvf_stats_case ref = {path, rc.kvfz, rc.kvfz_size};
        for (size_t k = 0; k < r->kernels.count; k++)
            print_kernel(r, k, &rc, &ref);
    }
    kvf_replay_case_close(&rc);
    if (r->stats && kvf_stats_tick(r->stats, r->stats_path, &err))
        fprintf(stderr, "kvfuzz replay: %s\n", err.msg);
    fflush(stdout);
}

int cli_replay_summary(cli_replay *r, int stopped) {
    const kvf_replay_tally *t = &r->session.t;
    if (stopped)
        printf("\nstopped by %s after %zu of %zu case file(s)\n", strsignal(stopped), r->done,
               r->npaths);
    printf("\n%zu case(s), %zu kernel run(s): %zu without a kernel failure, %zu with one, %zu "
           "unsupported, %zu bad input(s)",
           t->cases_ok + t->bad_inputs, t->runs, kvf_replay_clean_runs(t), t->failed_runs,
           t->unsupported, t->bad_inputs);
    if (t->not_judged) printf(", %zu not judged (the oracle failed)", t->not_judged);
    if (t->relation_pairs)
        printf("; %zu relation pair(s), %zu promised relation(s) broken", t->relation_pairs,
               t->relations_broken);
    printf("\n");
    printf("verdict:\n");
    for (size_t k = 0; k < r->kernels.count; k++)
        for (int j = 0; j < r->nrules; j++)
            kvf_verdict_counts_print(stdout, &r->counts[k][j], "  ");
    int rc = t->failed_runs || t->relations_broken ? KVF_EXIT_FINDINGS : KVF_EXIT_OK;
    if (r->stats) {
        kvf_error err = {0};
        if (kvf_stats_write(r->stats, r->stats_path, &err)) {
            fprintf(stderr, "kvfuzz replay: %s\n", err.msg);
            rc = KVF_EXIT_USAGE;
        } else {
            printf("statistics: %s\n", r->stats_path);
        }
    }
    /* A file we could not judge outranks a verdict. */
    if (t->bad_inputs || t->not_judged) rc = KVF_EXIT_USAGE;
    if (stopped && rc == KVF_EXIT_OK) rc = 128 + stopped;
    return rc;
}
