/* kvfuzz replay's set-up (replay_cli.h): default kernel and rules, each kernel's rules and
 * model, the statistics and the workers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/campaign_setup.h"
#include "replay_cli.h"

int cli_replay_check_stats_path(const cli_replay *r) {
    int report = 0;
    if (kvf_replay_stats_clash(r->stats_path, r->paths, r->npaths, &report) >= 0)
        return cli_usage_error(r->cmd, "--stats %s is %s: writing the statistics would replace it",
                               r->stats_path,
                               report ? "the report of a case to replay" : "a case to replay");
    /* Any other case file too (a corpus entry, a finding not replayed now). */
    return r->stats_path ? cli_opt_stats_path(r->cmd, "--stats", r->stats_path) : 0;
}

/* The default set, plus the rule the findings' reports record. It keeps a model it names
 * ("strict:bf16-p"); a bare "strict" or "fa" takes each kernel's model, as the default set does.
 * It is added unless every kernel's set already holds it under that kernel's model: a finding of
 * a kernel that declares bf16-p-rsum records "strict:bf16-p-rsum", its default strict. */
static int default_rules(cli_replay *r, int recorded, const char *rec_rule) {
    r->nrules = kvf_rule_default_set(r->rules, KVF_MAX_RULES);
    int have = 1;
    if (recorded && rec_rule[0] && r->nrules < KVF_MAX_RULES &&
        kvf_rule_parse(&r->rules[r->nrules], rec_rule, NULL) == 0) {
        have = r->kernels.count > 0;
        for (size_t k = 0; k < r->kernels.count && have; k++) {
            kvf_rule mine[KVF_MAX_RULES];
            if (cli_rules_for_kernel(r->cmd, r->kernels.items[k], r->precision, r->rules,
                                     r->nrules + 1, mine, NULL, NULL))
                return KVF_EXIT_USAGE;
            int found = 0;
            for (int j = 0; j < r->nrules; j++)
                found |= strcmp(mine[j].name, mine[r->nrules].name) == 0;
            have = found;
        }
    }
    if (!have) {
        r->nrules++;
        fprintf(stderr, "kvfuzz replay: rule %s added, as the findings' reports record\n",
                r->rules[r->nrules - 1].name);
    }
    return 0;
}

/* Findings replay the way they were found: without --kernel (and --rule), the kernel (and the
 * failing rule, beside the default set) their reports recorded, when every file has a report
 * and all name the same kernel; else cuda when a GPU is usable, else cpu-splitkv. */
int cli_replay_defaults(cli_replay *r) {
    char rec_kernel[4200] = "", rec_rule[128] = "";
    int recorded = (r->kernels.count == 0 || r->nrules == 0) &&
                   kvf_replay_recorded(r->paths, r->npaths, cli_read_report, rec_kernel,
                                       sizeof rec_kernel, rec_rule, sizeof rec_rule);
    if (recorded && r->kernels.count == 0) {
        if (cli_recorded_kernel_present(r->cmd, rec_kernel) ||
            cli_add_kernel(r->cmd, rec_kernel, &r->kernels))
            return KVF_EXIT_USAGE;
        fprintf(stderr, "kvfuzz replay: kernel %s, as the findings' reports record\n", rec_kernel);
    }
    if (r->nrules == 0 && default_rules(r, recorded, rec_rule)) return KVF_EXIT_USAGE;
    if (r->kernels.count == 0 && kvf_kernel_list_push(&r->kernels, kvf_default_kernel(), NULL))
        return cli_usage_error(r->cmd, "out of memory for the kernel list");
    return 0;
}

/* Rules per kernel: each kernel is judged within the precision model it declares (or
 * --precision), never another kernel's (docs/precision.md). */
int cli_replay_kernel_rules(cli_replay *r) {
    const size_t nk = r->kernels.count;
    r->krules = calloc(nk, sizeof *r->krules);
    r->kmodel = calloc(nk, sizeof *r->kmodel);
    r->counts = calloc(nk, sizeof *r->counts);
    if (!r->krules || !r->kmodel || !r->counts)
        return cli_usage_error(r->cmd, "out of memory for %zu kernels", nk);
    for (size_t k = 0; k < nk; k++) {
        kvf_precision model;
        cli_precision_source source;
        if (cli_rules_for_kernel(r->cmd, r->kernels.items[k], r->precision, r->rules, r->nrules,
                                 r->krules[k], &model, &source))
            return KVF_EXIT_USAGE;
        cli_precision_text(&model, source, r->kmodel[k], sizeof r->kmodel[k]);
        for (int j = 0; j < r->nrules; j++) {
            kvf_verdict_counts *vc = &r->counts[k][j];
            vc->kernel = r->kernels.items[k]->name;
            vc->rule = r->krules[k][j].name;
            vc->signatures = -1;
            vc->require_overflow = r->require_overflow;
        }
    }
    return 0;
}

int cli_replay_start(cli_replay *r) {
    if (r->stats_path) {
        kvf_error err = {0};
        kvf_stats_opts so;
        kvf_stats_opts_default(&so);
        so.command = "kvfuzz replay";
        so.require_overflow = r->require_overflow;
        if (kvf_stats_create(&r->stats, &so, &err) ||
            kvf_stats_write(r->stats, r->stats_path, &err))
            return cli_usage_error(r->cmd, "%s", err.msg);
    }
    kvf_replay_opts o = {.kernels = r->kernels.items,
                         .nkernels = r->kernels.count,
                         .rules = r->krules[0],
                         .nrules = r->nrules,
                         .require_overflow = r->require_overflow,
                         .deadline_s = r->deadline,
                         .oracle_threads = (int)r->jobs,
                         .oracle_path = r->oracle_path,
                         .keep_bytes = r->stats != NULL};
    cli_limits(&o.limits);
    kvf_error err = {0};
    size_t failed = 0;
    if (kvf_replay_start(&r->session, &o, &failed, &err) == 0) return 0;
    if (failed < r->kernels.count)
        return cli_kernel_cannot_start(r->cmd, r->kernels.items[failed]->name, err.msg);
    return cli_usage_error(r->cmd, "%s", err.msg);
}

void cli_replay_free(cli_replay *r) {
    kvf_replay_stop(&r->session);
    free(r->krules);
    free(r->kmodel);
    free(r->counts);
    kvf_kernel_list_free(&r->kernels);
    if (r->paths) cli_free_paths(r->paths, r->npaths);
    kvf_stats_free(r->stats);
    r->krules = NULL;
    r->kmodel = NULL;
    r->counts = NULL;
    r->paths = NULL;
    r->stats = NULL;
}
