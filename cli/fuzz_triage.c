/* The end of `kvfuzz fuzz`: the campaign's findings grouped into distinct defects
 * (kvfuzz/groups.h, docs/reports.md "Finding groups"), the first finding of each group that has
 * no minimized case yet minimized within a bounded time and saved beside it as
 * <finding>.min.kvfz, and the groups listed with the commands that reproduce them. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "kvfuzz/campaign.h"
#include "kvfuzz/groups.h"
#include "kvfuzz/minimize.h"

/* A group's minimization gets at most this share of what is left, and at most this long, so
 * that one stubborn case does not starve the others. */
#define TRIAGE_GROUP_SHARE 0.5
#define TRIAGE_GROUP_MAX_S 30.0

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Minimizes finding f with the campaign's kernel under its own rule and class, within limit_s:
 * 0 with <stem>.min.kvfz written, else -1 with the reason in err. */
static int minimize_finding(const kvf_group_finding *f, const kvf_kernel *kernel,
                            const kvf_precision *model, double limit_s, char *min_path,
                            size_t min_size, kvf_error *err) {
    kvf_minimize_opts mo;
    kvf_minimize_opts_default(&mo);
    mo.kernel = kernel;
    mo.time_limit_s = limit_s;
    mo.log = NULL;
    cli_limits(&mo.case_limits);
    if (f->rule && kvf_rule_parse(&mo.rule, f->rule, err)) return -1;
    kvf_rules_apply_precision(&mo.rule, 1, model);
    int cls = kvf_finding_class_parse(f->cls);
    mo.target = cls > 0 ? (kvf_finding_class)cls : KVF_FINDING_NONE;
    if (mo.target == KVF_FINDING_OVERFLOW) mo.require_overflow = 1;
    if (mo.target == KVF_FINDING_INVARIANCE && cli_finding_relation(f->kvfz, &mo, err)) return -1;
    kvf_spec spec;
    if (kvf_case_load(f->kvfz, &spec, NULL, &mo.case_limits, err)) return -1;
    kvf_minimize_stats st;
    int rc = kvf_minimize(&spec, &mo, NULL, &st, err);
    if (rc == 0) {
        snprintf(min_path, min_size, "%s/%s.min.kvfz", f->dir, f->stem);
        rc = kvf_spec_save(&spec, min_path, err);
    }
    kvf_spec_free(&spec);
    return rc ? -1 : 0;
}

/* Minimizes the first finding of every group without a minimized case, oldest group first,
 * until budget_s is spent or a stop is requested. Returns how many were minimized. */
static int minimize_groups(FILE *out, const kvf_groups *g, const kvf_kernel *kernel,
                           const kvf_precision *model, double budget_s) {
    const double t0 = now_s();
    int done = 0;
    for (size_t i = 0; i < g->ngroups && !kvf_campaign_stop_signal(); i++) {
        const kvf_group_finding *f = &g->findings[g->groups[i].first];
        /* A hang costs a whole deadline per candidate run: left to `kvfuzz minimize`. */
        if (f->min || !f->kvfz || strcmp(f->cls, kvf_finding_class_name(KVF_FINDING_HANG)) == 0)
            continue;
        double left = budget_s - (now_s() - t0);
        if (left < 0.5) break;
        double limit = fmin(TRIAGE_GROUP_MAX_S, fmax(0.5, left * TRIAGE_GROUP_SHARE));
        char path[4096];
        kvf_error err = {0};
        if (minimize_finding(f, kernel, model, limit, path, sizeof path, &err) == 0) {
            fprintf(out, "  minimized %s/%s into %s\n", f->dir, f->stem, path);
            done++;
        } else {
            fprintf(out, "  %s/%s not minimized: %s\n", f->dir, f->stem, err.msg);
        }
    }
    return done;
}

int cli_fuzz_triage(FILE *out, const char *dir, const kvf_kernel *kernel,
                    const kvf_precision *model, double budget_s) {
    const char *dirs[1] = {dir};
    kvf_groups g;
    kvf_error err = {0};
    if (kvf_groups_scan(&g, dirs, 1, &err)) {
        fprintf(stderr, "kvfuzz fuzz: grouping the findings: %s\n", err.msg);
        return -1;
    }
    if (g.nfindings == 0) {
        kvf_groups_free(&g);
        return 0;
    }
    int minimized = budget_s > 0 && kernel ? minimize_groups(out, &g, kernel, model, budget_s) : 0;
    if (minimized > 0) { /* byte-identical minimized cases join their groups */
        kvf_groups_free(&g);
        if (kvf_groups_scan(&g, dirs, 1, &err)) {
            fprintf(stderr, "kvfuzz fuzz: grouping the findings: %s\n", err.msg);
            return -1;
        }
    }
    kvf_groups_print(out, &g);
    kvf_groups_free(&g);
    return 0;
}
