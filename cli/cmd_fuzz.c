/* kvfuzz fuzz: the campaign runner's command line (fuzz/include/kvfuzz/campaign.h). This file
 * holds the run's order: set-up, the findings folder and the statistics, the campaign; the
 * options are fuzz_options.c and fuzz_option_values.c, the output fuzz_summary.c (fuzz_cli.h),
 * what a campaign needs before it runs kvfuzz/campaign_setup.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_cli.h"
#include "kvfuzz/campaign_setup.h"
#include "kvfuzz/stats.h"
#include "kvfuzz/stats_sink.h"

/* The judge hooks of one case on oracle thread `thread` (kvf_campaign_opts.judge_hooks): the
 * statistics sink's. */
static int stats_hooks(void *ctx, int thread, const kvf_spec *spec, const kvf_case *c,
                       kvf_judge_hooks *hooks) {
    cli_fuzz_stats *fs = ctx;
    return cli_stats_hooks_begin(&fs->hooks, thread, spec, c, hooks);
}

/* The run's statistics also count launches that gave no output (crashes, hangs, kernel errors,
 * unsupported cases): those are never judged, so the judge hooks do not see them. */
static void stats_run(void *ctx, int finding_class) {
    cli_fuzz_stats *fs = ctx;
    kvf_stats_sink_count_run(fs->hooks.sink, fs->o->kernel->name,
                             finding_class < 0 ? KVF_STATS_UNSUPPORTED : finding_class);
}

/* The kernel, the seed, the rules under the kernel's precision model, the corpus folder: 0 or
 * the exit status. */
static int fuzz_setup(cli_fuzz *f, kvf_precision *model, cli_precision_source *model_source) {
    const char *cmd = "fuzz";
    if (f->kernel_name) {
        if (cli_one_kernel(cmd, f->kernel_name, &f->o.kernel)) return KVF_EXIT_USAGE;
    } else {
        f->o.kernel = kvf_default_kernel();
    }
    /* FP8 caches in every case (--kv-dtype fp8, e4m3, e5m2) need a kernel that reads them. */
    const unsigned dtypes = kvf_kv_dtypes_norm(f->o.mutate.kv_dtypes);
    if (!f->o.oracle_only && f->o.kernel && !(dtypes & KVF_KV_DTYPES_BF16) &&
        !kvf_kernel_takes_quant(f->o.kernel))
        return cli_usage_error(cmd,
                               "--kv-dtype %s asks for FP8 caches in every case, but kernel %s "
                               "does not read them (`kvfuzz kernels --kernel %s` shows what it "
                               "reads)",
                               kvf_kv_dtypes_name(dtypes), f->o.kernel->name, f->o.kernel->name);
    if (!f->seed_given) f->o.seed = kvf_campaign_clock_seed();
    if (f->o.nrules == 0) f->o.nrules = kvf_rule_default_set(f->o.rules, KVF_MAX_RULES);
    /* strict and fa judge the kernel within the precision it declares (docs/precision.md). */
    if (cli_kernel_precision(cmd, f->o.kernel, f->precision, model, model_source))
        return KVF_EXIT_USAGE;
    kvf_rules_apply_precision(f->o.rules, f->o.nrules, model);

    /* A corpus that is a file is refused before anything is made (the campaign found it only
     * after writing the statistics); a missing one is created. */
    if (kvf_campaign_check_corpus(f->o.corpus_dir, NULL))
        return cli_usage_error(cmd, "--corpus %s is not a folder", f->o.corpus_dir);
    return 0;
}

/* The findings folder and the statistics sink: 0 or the exit status. *stale: the temporary
 * files removed. */
static int fuzz_open(cli_fuzz *f, cli_fuzz_stats *fs, int argc, char **argv, int *stale) {
    const char *cmd = "fuzz";
    /* From here on files are made: a signal now must end in an orderly stop (the campaign
     * sees it at once), never in a half-written statistics file. */
    kvf_campaign_catch_signals();
    {
        kvf_error werr = {0};
        if (kvf_campaign_prepare_dirs(f->o.findings_dir, f->o.corpus_dir, stale, &werr)) {
            kvf_campaign_release_signals();
            return cli_usage_error(cmd, "%s", werr.msg);
        }
    }

    kvf_error err = {0};
    static char default_stats[4096];
    if (!f->stats_path) {
        kvf_campaign_stats_path(default_stats, sizeof default_stats, f->o.findings_dir);
        f->stats_path = default_stats;
    }
    kvf_stats_opts so;
    kvf_stats_opts_default(&so);
    so.findings_dir = f->o.findings_dir;
    char *command = kvf_campaign_command_line(argc, argv, f->seed_given, f->o.seed);
    so.command = command ? command : "kvfuzz fuzz";
    so.flush_interval_s = f->stats_interval;
    so.require_overflow = f->o.require_overflow;
    fs->o = &f->o;
    fs->hooks.kernel = f->o.kernel ? f->o.kernel->name : NULL;
    fs->hooks.rules = f->o.rules;
    fs->hooks.nrules = f->o.nrules;
    int made =
        kvf_stats_sink_create(&fs->hooks.sink, &so, f->stats_path, KVF_CAMPAIGN_MAX_JOBS, &err);
    free(command); /* the statistics keep their own copy */
    if (made) {
        kvf_campaign_release_signals();
        return cli_usage_error(cmd, "%s", err.msg);
    }
    return 0;
}

int kvf_cmd_fuzz(int argc, char **argv) {
    static cli_fuzz f;        /* o.devices points into it */
    static cli_fuzz_stats fs; /* 256 slots: too large for the stack */
    memset(&f, 0, sizeof f);
    memset(&fs, 0, sizeof fs);
    kvf_campaign_opts_default(&f.o);
    cli_limits(&f.o.case_limits);
    f.o.findings_dir = "findings";
    f.stats_interval = 60;
    f.minimize_time = -1;
    int rc = cli_fuzz_parse(&f, argc, argv);
    if (rc >= 0) return rc;
    kvf_precision model;
    cli_precision_source model_source;
    if ((rc = fuzz_setup(&f, &model, &model_source))) return rc;
    int stale = 0;
    if ((rc = fuzz_open(&f, &fs, argc, argv, &stale))) return rc;
    cli_fuzz_banner(&f, &model, model_source, stale);
    if (!f.o.oracle_only) {
        f.o.judge_hooks = stats_hooks;
        f.o.run_observer = stats_run;
        f.o.observer_ctx = &fs;
    }
    kvf_campaign_stats st;
    kvf_error err = {0};
    rc = kvf_campaign_run(&f.o, &st, &err);
    return cli_fuzz_finish(&f, &fs, &model, &st, rc, &err);
}
