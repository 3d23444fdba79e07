/* `kvfuzz bench`: times CUDA decode kernels, built in or from plugins, side by side in one
 * process against a read roofline measured in the same run (docs/performance.md, "Method").
 * What it measures and how is kvfuzz/bench_session.h, its workloads and rows
 * kvfuzz/bench_workload.h; this file parses the options and prints the table or the JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "kvfuzz/bench_session.h"
#include "kvfuzz/bench_workload.h"

#ifdef KVF_HAVE_CUDA
#include "kvfuzz/cuda_kernels.h"
#endif

enum {
    BENCH_ORACLE = 256,
    BENCH_KERNEL,
    BENCH_PRESET,
    BENCH_BATCH,
    BENCH_LEN,
    BENCH_HEADS,
    BENCH_HEAD_DIM,
    BENCH_PAGE_SIZE,
    BENCH_ITERS,
    BENCH_WARMUP,
    BENCH_SEED,
    BENCH_KV_DTYPE,
    BENCH_SCALES,
    BENCH_JSON
};

/* --help names the plugin kernel limit in words. */
_Static_assert(KVF_PLUGIN_MAX_KERNELS == 4096u, "--help states the plugin kernel limit");

static const cli_option bench_options[] = {
    {"oracle", BENCH_ORACLE, NULL,
     "oracle throughput instead (first; kvfuzz bench --oracle --help)"},
    {"kernel", BENCH_KERNEL, "K",
     "a CUDA kernel: cuda, cuda-naive, cuda/mut=..., PATH.so (every CUDA\n"
     "kernel of a plugin, any number; a plugin lists at most 4096) or\n"
     "PATH.so:NAME; repeat it or give a comma-\n"
     "separated list (default: cuda and cuda-naive)"},
    {"preset", BENCH_PRESET, "P",
     "seed:  batch 1, 51 pages of 64, the last holding 2 (3202 tokens),\n"
     "Hq 20, Hk 4, D 128 (the seed case file's workload)\n"
     "sweep: batch {1,8,32,128} x length {512,4096,32768} (seed shape)\n"
     "mixed: batch 64, lengths log-uniform in [1, 16384] plus two empty\n"
     "sequences (seed shape)\n"
     "(default: seed, unless --batch/--len are given)"},
    {"batch", BENCH_BATCH, "B", "sequences (1..65535), with --len: a single custom workload"},
    {"len", BENCH_LEN, "L", "tokens per sequence (0..1048576)"},
    {"heads", BENCH_HEADS, "HQ:HK", "query and KV heads (default 20:4)"},
    {"head-dim", BENCH_HEAD_DIM, "D", "64, 128 or 256 (default 128)"},
    {"page-size", BENCH_PAGE_SIZE, "S", "1..256 (default 64)"},
    {"iters", BENCH_ITERS, "N", "timed iterations, median and min reported (default 50)"},
    {"warmup", BENCH_WARMUP, "N", "untimed iterations first (default 5)"},
    {"seed", BENCH_SEED, "N", "input seed (default 1)"},
    {"kv-dtype", BENCH_KV_DTYPE, "T",
     "bf16, e4m3 or e5m2: the K and V caches' element type (default bf16);\n"
     "FP8 halves the bytes the roofline reads"},
    {"scales", BENCH_SCALES, "G",
     "FP8 scales: none, tensor, head or token (default tensor with FP8)"},
    {"json", BENCH_JSON, NULL,
     "one JSON object instead of the table: the device, the settings and\n"
     "\"results\", one object per (workload, kernel)"},
    {0},
};

static void bench_help(FILE *f) {
    fprintf(
        f,
        "usage: kvfuzz bench [--kernel K]... [--preset P | --batch B --len L]\n"
        "                    [--heads HQ:HK] [--head-dim D] [--page-size S] [--iters N]\n"
        "                    [--warmup N] [--seed N] [--kv-dtype T [--scales G]] [--json]\n"
        "       kvfuzz bench --oracle ...   (oracle throughput: kvfuzz bench --oracle --help)\n\n"
        "Times CUDA decode kernels side by side on the same device-resident inputs and compares\n"
        "each with a streaming read of the same number of bytes measured in the same run (the\n"
        "read roofline). Every kernel runs through kvfuzz's buffer host (NaN-poisoned pools,\n"
        "guarded outputs); before timing each is checked by the host and against cuda-naive\n"
        "(a disagreement beyond 1e-2 absolute and relative, or any host check, fails the "
        "run).\n\n");
    cli_print_options(f, bench_options);
    fprintf(f,
            "\nColumns: median and min microseconds per run() (split + merge for cuda), achieved\n"
            "GB/s of the bytes above, the roofline's median for the same bytes,\n"
            "fraction = roofline time / kernel time, the check, and the kernel's plan facts\n"
            "(describe()). A kernel that does not support the shape gets a row saying so. Exit 0,\n"
            "1 when a check fails or the device errs, 2 on bad usage or when the kernels cannot\n"
            "start (no usable GPU, or a kvfuzz built without CUDA).\n");
}

typedef struct bench_opts {
    kvf_bench_settings st;
    int json;
    const char *preset;
    int64_t batch, len, page_size, iters, warmup; /* into st once parsed */
    int scales;                                   /* --scales, -1 when not given */
    kvf_kernel_list kernels; /* grows: PATH.so adds every CUDA kernel of a plugin */
} bench_opts;

#ifdef KVF_HAVE_CUDA

/* Where the rows go: the table, or --json's array (written at the end). */
typedef struct bench_out {
    const bench_opts *o;
    json_t *results;
    int json_bad; /* out of memory building them */
} bench_out;

static void print_row(bench_out *bo, const kvf_bench_workload *w, const kvf_bench_measure *m,
                      const kvf_bench_result *r) {
    const char *check = kvf_bench_result_check(r);
    const int32_t maxlen = kvf_bench_workload_max_len(w);
    if (bo->o->json) {
        json_t *row = kvf_bench_json_row(w, &bo->o->st.shape, r, m->tokens, m->bytes, m->roof_us);
        if (!row || !bo->results || kvf_json_push(bo->results, row)) bo->json_bad = 1;
    } else if (r->status == 0) {
        printf("%-14s %-14s %6d %7d %10.2f %10.2f %8.1f %10.2f %8.1f %6.3f  %-8s %s\n", w->name,
               r->kernel, w->batch, maxlen, r->med_us, r->min_us, r->gbps, m->roof_us,
               kvf_bench_gbps(m->bytes, m->roof_us), r->fraction, check, r->plan);
    } else {
        printf("%-14s %-14s %6d %7d  %s: %s\n", w->name, r->kernel, w->batch, maxlen, check,
               r->why);
    }
}

/* The device, the settings and the columns; with --json the object the rows go into. */
static json_t *print_header(bench_out *bo, const kvf_bench_device *dev) {
    const bench_opts *o = bo->o;
    char date[16];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", localtime(&now));
    if (o->json) {
        json_t *root = kvf_bench_json_root(date, dev, o->st.iters, o->st.warmup,
                                           KVF_BENCH_FLUSH_BYTES, &bo->results);
        bo->json_bad = !root;
        return root;
    }
    const kvf_bench_shape *sh = &o->st.shape;
    printf("kvfuzz bench  %s  %s (%d SMs, %d MB L2)  Hq %d Hk %d D %d S %d  iters %d, warmup "
           "%d, round robin, L2 flushed (%zu MiB written) before each run%s%s%s%s\n",
           date, dev->name, dev->sms, dev->l2_bytes >> 20, sh->hq, sh->hk, sh->d, sh->s,
           o->st.iters, o->st.warmup, KVF_BENCH_FLUSH_BYTES >> 20, sh->kv_dtype ? "  kv " : "",
           sh->kv_dtype ? kvf_kv_dtype_name(sh->kv_dtype) : "", sh->kv_dtype ? ", scales " : "",
           sh->kv_dtype ? kvf_scale_granularity_name(sh->scale_gran) : "");
    printf("%-14s %-14s %6s %7s %10s %10s %8s %10s %8s %6s  %-8s %s\n", "workload", "kernel",
           "batch", "len", "median_us", "min_us", "GB/s", "roof_us", "roofGB/s", "frac", "check",
           "plan");
    return NULL;
}

/* The session's sentence, when it has one. */
static void say(const kvf_error *err) {
    if (err->msg[0]) fprintf(stderr, "kvfuzz bench: %s\n", err->msg);
}

static int run_bench(const kvf_bench_workloads *w, const bench_opts *o) {
    char why[256];
    if (!kvf_cuda_runtime_available(why, sizeof why))
        return cli_usage_error("bench", "the CUDA kernels cannot start: %s", why);
    kvf_bench_session *s = NULL;
    kvf_error err = {0};
    if (kvf_bench_session_create(&s, o->kernels.items, o->kernels.count, &o->st, &err))
        return cli_usage_error("bench", "%s", err.msg);
    if (kvf_bench_session_start(s, &err)) {
        kvf_bench_session_destroy(s);
        return cli_usage_error("bench", "the kernels cannot start: %s", err.msg);
    }
    int rc = KVF_EXIT_FINDINGS;
    bench_out bo = {o, NULL, 0};
    json_t *root = NULL;
    kvf_bench_device dev;
    if (kvf_bench_session_prepare(s, &dev, &err)) {
        say(&err);
        goto out;
    }
    root = print_header(&bo, &dev);
    rc = 0;
    for (int i = 0; i < w->count; i++) {
        kvf_bench_measure m;
        if (kvf_bench_session_run(s, &w->items[i], i == 0, &m, &err)) {
            say(&err);
            rc = KVF_EXIT_FINDINGS;
            break;
        }
        for (int k = 0; k < m.count; k++) {
            if (kvf_bench_result_fails(&m.results[k])) rc = KVF_EXIT_FINDINGS;
            print_row(&bo, &w->items[i], &m, &m.results[k]);
        }
        fflush(stdout);
    }
    /* The rows measured, also after a device error ended the run early. */
    if (o->json && (bo.json_bad || kvf_json_dump(root, stdout, 1))) {
        fprintf(stderr, "kvfuzz bench: %s\n",
                bo.json_bad ? "out of memory building the JSON" : "cannot write the JSON");
        rc = KVF_EXIT_FINDINGS;
    }
out:
    json_decref(root);
    kvf_bench_session_destroy(s);
    return rc;
}
#else
static int run_bench(const kvf_bench_workloads *w, const bench_opts *o) {
    (void)w, (void)o;
    return cli_usage_error("bench", "the CUDA kernels cannot start: this kvfuzz was built without "
                                    "CUDA, and bench times the CUDA kernels only");
}
#endif

/* One option into o: 0, or the exit status of a bad one. */
static int bench_option(const char *cmd, bench_opts *o, int key, const char *val) {
    int rc = 0;
    switch (key) {
    case BENCH_ORACLE:
        return cli_usage_error(cmd, "--oracle selects the oracle benchmark and comes first "
                                    "(see kvfuzz bench --oracle --help)");
    case BENCH_JSON:
        o->json = 1;
        break;
    case BENCH_KERNEL: {
        kvf_error err = {0};
        if (strlen(val) >= KVF_BENCH_KERNELS_MAX)
            return cli_usage_error(cmd, "--kernel is too long");
        if (kvf_bench_add_kernels(&o->kernels, val, &err))
            return cli_usage_error(cmd, "%s", err.msg);
        break;
    }
    case BENCH_PRESET:
        if (!kvf_bench_preset_known(val))
            rc = cli_usage_error(cmd, "unknown preset \"%s\" (seed, sweep or mixed)", val);
        o->preset = val;
        break;
    case BENCH_BATCH:
        return cli_opt_i64(cmd, "--batch", val, 1, 65535, &o->batch);
    case BENCH_LEN:
        return cli_opt_i64(cmd, "--len", val, 0, 1 << 20, &o->len);
    case BENCH_HEADS:
        if (kvf_bench_parse_heads(val, &o->st.shape.hq, &o->st.shape.hk))
            rc = cli_usage_error(cmd,
                                 "--heads must be HQ:HK with HK dividing HQ and a group of "
                                 "at most 16, not \"%s\"",
                                 val);
        break;
    case BENCH_HEAD_DIM:
        if (kvf_bench_parse_head_dim(val, &o->st.shape.d))
            rc = cli_usage_error(cmd, "--head-dim must be 64, 128 or 256, not \"%s\"", val);
        break;
    case BENCH_PAGE_SIZE:
        return cli_opt_i64(cmd, "--page-size", val, 1, 256, &o->page_size);
    case BENCH_ITERS:
        return cli_opt_i64(cmd, "--iters", val, 1, 100000, &o->iters);
    case BENCH_WARMUP:
        return cli_opt_i64(cmd, "--warmup", val, 0, 100000, &o->warmup);
    case BENCH_SEED:
        return cli_opt_u64(cmd, "--seed", val, &o->st.seed);
    case BENCH_KV_DTYPE: {
        const int dt = kvf_kv_dtype_parse(val);
        if (dt < 0)
            return cli_usage_error(cmd, "--kv-dtype must be bf16, e4m3 or e5m2, not \"%s\"", val);
        o->st.shape.kv_dtype = dt;
        break;
    }
    case BENCH_SCALES: {
        const int g = kvf_scale_granularity_parse(val);
        if (g < 0)
            return cli_usage_error(cmd, "--scales must be none, tensor, head or token, not \"%s\"",
                                   val);
        o->scales = g;
        break;
    }
    }
    return rc;
}

/* The options into o: -1 to run, else the exit status (after --help, or a bad option). */
static int bench_parse(const char *cmd, bench_opts *o, int argc, char **argv) {
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, bench_options);
    cli_parser_repeatable(&p, BENCH_KERNEL);
    const char *val;
    for (int key; (key = cli_next(&p, &val)) != CLI_END;) {
        if (key == CLI_HELP) bench_help(stdout);
        int rc = key == CLI_HELP    ? KVF_EXIT_OK
                 : key == CLI_ERROR ? KVF_EXIT_USAGE
                                    : bench_option(cmd, o, key, val);
        if (key == CLI_HELP || rc) return rc;
    }
    char **rest;
    if (cli_operands(&p, &rest))
        return cli_usage_error(cmd, "unexpected argument \"%s\" (see `kvfuzz bench --help`)",
                               rest[0]);
    if ((o->batch >= 0) != (o->len >= 0))
        return cli_usage_error(cmd, "--batch and --len go together");
    if (kvf_bench_default_kernels(&o->kernels, NULL))
        return cli_usage_error(cmd, "out of memory for the kernel list");
    if (o->batch >= 0 && o->preset)
        return cli_usage_error(cmd, "give either --preset or --batch/--len, not both");
    const int fp8 = kvf_kv_dtype_is_fp8(o->st.shape.kv_dtype);
    if (!fp8 && o->scales > 0)
        return cli_usage_error(cmd, "--scales %s needs --kv-dtype e4m3 or e5m2",
                               kvf_scale_granularity_name(o->scales));
    o->st.shape.scale_gran = o->scales >= 0 ? o->scales : fp8 ? KVF_SCALE_TENSOR : KVF_SCALE_NONE;
    o->st.shape.s = (int32_t)o->page_size, o->st.iters = (int)o->iters;
    o->st.warmup = (int)o->warmup;
    return -1;
}

int kvf_cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    if (argc > 1 && strcmp(argv[1], "--oracle") == 0) /* cli/bench_oracle.c */
        return kvf_cmd_bench_oracle(argc - 1, argv + 1);
    bench_opts o = {{{20, 4, 128, 64, 0, 0}, 50, 5, 1}, 0, NULL, -1, -1, 64, 50, 5, -1, {0}};
    kvf_bench_workloads w = {0};
    kvf_error err = {0};
    int rc = bench_parse(cmd, &o, argc, argv);
    if (rc < 0 && kvf_bench_workloads_make(&w, o.preset, o.batch, o.len, o.st.seed, &err)) {
        fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
        rc = KVF_EXIT_FINDINGS;
    }
    if (rc < 0) rc = run_bench(&w, &o);
    kvf_bench_workloads_free(&w);
    kvf_kernel_list_free(&o.kernels); /* plugin kernels; built-in ones are static */
    return rc;
}
