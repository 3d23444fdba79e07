/* The decode-target harness (harness.h). */
#include "harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/attribution.h"
#include "kvfuzz/env.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/spec.h"
#include "kvfuzz/test_kernels.h"
#include "kvfuzz/trial.h"

#define MAX_KERNELS 4
#define FEATURES_PER_KERNEL                                                                        \
    (KVF_MAX_RULES * 2 * KVF_MARGIN_BUCKETS + 2 * KVF_ULP_BUCKETS +                                \
     KVF_MAX_RULES * KVF_FINDING_CLASS_COUNT)
/* Every DETERMINISM_EVERY-th input runs each kernel twice and compares the bits. */
#define DETERMINISM_EVERY 16

/* Error feedback: one byte per (kernel, feature). libFuzzer reads this section after every
 * input as extra coverage, so an input that reaches a new error bucket (a larger margin, more
 * ulps, a new class) is kept and mutated further: the fuzzer climbs toward larger errors.
 * Outside libFuzzer it is an ordinary array. */
__attribute__((section("__libfuzzer_extra_counters"),
               used)) static uint8_t error_counters[MAX_KERNELS][FEATURES_PER_KERNEL];

static struct {
    const char *target;
    const kvf_kernel *kernels[MAX_KERNELS];
    void *states[MAX_KERNELS];
    int nkernels;
    kvf_rule rules[KVF_MAX_RULES]; /* as given: strict and fa under f32 unless they name a model */
    int nrules;
    /* The rules each kernel is judged by: strict and fa within the model the kernel declares,
     * or the --precision override (docs/precision.md), one copy per kernel so that one kernel's
     * model never judges another. */
    kvf_rule kernel_rules[MAX_KERNELS][KVF_MAX_RULES];
    int require_overflow, keep_going, jobs;
    int64_t max_work, max_pool;
    kvf_limits limits;
    kvf_mutate_limits mlim;
    int findings;
    uint64_t execs;
    kvf_outcome judged; /* the verdicts of the outputs last judged (kvf_harness_exec) */
    int judged_kernel;  /* ... by this kernel's rules */
    /* the case the custom mutator built last */
    uint8_t *stash_bytes;
    size_t stash_size;
    kvf_case stash_case;
    int stash_valid;
} H;

#define KVF__STR_(x) #x
#define KVF__STR(x) KVF__STR_(x)

static void die_usage(const char *fmt, const char *arg) {
    fprintf(stderr, "%s: ", H.target);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(2);
}

static void add_kernels(const char *list) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        const kvf_kernel *k = kvf_fuzz_kernel_find(name);
        if (!k) die_usage("unknown kernel \"%s\" (see kvfuzz kernels)", name);
        if (H.nkernels == MAX_KERNELS) die_usage("at most 4 kernels, got \"%s\"", list);
        H.kernels[H.nkernels++] = k;
    }
}

static void add_rule(const char *text) {
    kvf_error err = {0};
    if (H.nrules == KVF_MAX_RULES)
        die_usage("at most " KVF__STR(KVF_MAX_RULES) " rules, got \"%s\"", text);
    if (kvf_rule_parse(&H.rules[H.nrules], text, &err)) die_usage("%s", err.msg);
    H.nrules++;
}

/* The model kernel k is judged under: the override when given (`from` names where it came
 * from, for the message), else its declaration, else f32. A model that does not parse is a
 * usage error (one sentence, exit 2). */
static void kernel_precision(const kvf_kernel *k, const char *override, const char *from,
                             kvf_precision *out) {
    kvf_error err = {0};
    if (override) {
        if (kvf_precision_parse(out, override, &err)) {
            char msg[KVF_ERROR_MSG_MAX + 64];
            snprintf(msg, sizeof msg, "%s: %s", from, err.msg);
            die_usage("%s", msg);
        }
        return;
    }
    if (kvf_precision_parse(out, k->precision ? k->precision : "", &err)) {
        char msg[KVF_ERROR_MSG_MAX + 200];
        snprintf(msg, sizeof msg, "kernel %s declares a precision model kvfuzz cannot read: %s",
                 k->name, err.msg);
        die_usage("%s", msg);
    }
}

/* Whether kernels a and b are judged by the same rules (a verdict of one stands for the
 * other's on the same outputs). */
static int same_rules(int a, int b) {
    for (int r = 0; r < H.nrules; r++)
        if (strcmp(H.kernel_rules[a][r].name, H.kernel_rules[b][r].name) != 0) return 0;
    return 1;
}

static int64_t parse_count(const char *text, const char *what) {
    char *end;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || v < 0) die_usage(what, text);
    return v;
}

static int env_flag(const char *name) {
    int on = 0;
    kvf_error err = {0};
    if (kvf_env_flag(name, &on, &err)) die_usage("%s", err.msg); /* kvfuzz/env.h */
    return on;
}

void kvf_harness_init(int *argc, char ***argv, kvf_harness_device device, const char *target) {
    H.target = target;
    H.jobs = 1;
    kvf_error env_err = {0};
    if (kvf_env_check(&env_err)) die_usage("%s", env_err.msg); /* every KVF_* variable */
    kvf_limits_default(&H.limits);
    kvf_mutate_limits_default(&H.mlim);
    H.mlim.allow_layouts = device != KVF_HARNESS_CUDA; /* the CUDA host lays out dense buffers */
    /* Reject what the mutator would never produce, with some slack for byte mutations. */
    H.max_work = H.mlim.max_work * 4;
    H.max_pool = H.mlim.max_pool_elems * 4;
    const char *kernels = getenv("KVF_FUZZ_KERNEL");
    const char *rules = getenv("KVF_FUZZ_RULES");
    const char *work = getenv("KVF_FUZZ_MAX_WORK");
    const char *jobs = getenv("KVF_FUZZ_JOBS");
    const char *precision = getenv("KVF_FUZZ_PRECISION"), *precision_from = "KVF_FUZZ_PRECISION";
    if (precision && !*precision) precision = NULL; /* empty: the default, as for every variable */
    H.require_overflow = env_flag("KVF_FUZZ_REQUIRE_OVERFLOW");
    H.keep_going = env_flag("KVF_FUZZ_KEEP_GOING");
    H.mlim.allow_nonfinite = env_flag("KVF_FUZZ_ALLOW_NONFINITE");
    int cli_rules = 0;
    for (int i = 1; argc && i < *argc; i++) {
        const char *a = (*argv)[i];
        if (strncmp(a, "--kernel=", 9) == 0) {
            kernels = a + 9;
        } else if (strncmp(a, "--rule=", 7) == 0) {
            if (!cli_rules) H.nrules = 0;
            cli_rules = 1;
            add_rule(a + 7);
        } else if (strcmp(a, "--require-overflow") == 0) {
            H.require_overflow = 1;
        } else if (strcmp(a, "--keep-going") == 0) {
            H.keep_going = 1;
        } else if (strcmp(a, "--allow-nonfinite") == 0) {
            H.mlim.allow_nonfinite = 1;
        } else if (strncmp(a, "--max-work=", 11) == 0) {
            work = a + 11;
        } else if (strncmp(a, "--jobs=", 7) == 0) {
            jobs = a + 7;
        } else if (strncmp(a, "--precision=", 12) == 0) {
            precision = a + 12;
            precision_from = "--precision";
        } else if (strncmp(a, "--", 2) == 0) {
            die_usage("unknown option \"%s\" (options: --kernel= --rule= --precision= "
                      "--require-overflow --keep-going --allow-nonfinite --max-work= --jobs=)",
                      a);
        }
    }
    if (!cli_rules && rules && *rules) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", rules);
        for (char *save = NULL, *r = strtok_r(buf, ",", &save); r; r = strtok_r(NULL, ",", &save))
            add_rule(r);
    }
    if (H.nrules == 0) {
        add_rule("strict");
        add_rule("fa");
    }
    if (work) {
        H.max_work = parse_count(work, "--max-work must be a non-negative integer, got \"%s\"");
        H.max_pool = H.max_work / 4 > H.max_pool ? H.max_work / 4 : H.max_pool;
    }
    if (jobs) H.jobs = (int)parse_count(jobs, "--jobs must be a non-negative integer, got \"%s\"");
    if (kernels && *kernels) {
        add_kernels(kernels);
    } else if (device == KVF_HARNESS_CPU) {
        /* The production CPU kernels; mutants (which carry a `models` tag) are for tests. */
        for (size_t i = 0; i < kvf_kernel_count() && H.nkernels < MAX_KERNELS; i++) {
            const kvf_kernel *k = kvf_kernel_at(i);
            if (k->device == KVF_DEVICE_CPU && !k->models) H.kernels[H.nkernels++] = k;
        }
    } else {
        add_kernels("cuda");
    }
    for (int k = 0; k < H.nkernels; k++) {
        kvf_precision p;
        kernel_precision(H.kernels[k], precision, precision_from, &p);
        memcpy(H.kernel_rules[k], H.rules, (size_t)H.nrules * sizeof *H.rules);
        /* A rule that names its own model (strict:ftz) keeps it. */
        kvf_rules_apply_precision(H.kernel_rules[k], H.nrules, &p);
    }
    if (device == KVF_HARNESS_CUDA) {
        char why[256];
        if (!kvf_cuda_available(why, sizeof why)) {
            fprintf(stderr, "%s: no usable GPU: %s\n", target, why);
            exit(77);
        }
    }
    for (int k = 0; k < H.nkernels; k++) {
        kvf_error err = {0};
        if (kvf_kernel_create(H.kernels[k], &H.states[k], &err)) {
            fprintf(stderr, "%s: kernel %s could not start: %s\n", target, H.kernels[k]->name,
                    err.msg);
            exit(1);
        }
    }
}

const kvf_limits *kvf_harness_case_limits(void) {
    return &H.limits;
}

const kvf_mutate_limits *kvf_harness_mutate_limits(void) {
    return &H.mlim;
}

int kvf_harness_findings(void) {
    return H.findings;
}

static void stash_drop(void) {
    if (H.stash_valid) kvf_case_free(&H.stash_case);
    free(H.stash_bytes);
    H.stash_bytes = NULL;
    H.stash_size = 0;
    H.stash_valid = 0;
}

void kvf_harness_stash(const uint8_t *data, size_t size, kvf_case *c) {
    stash_drop();
    H.stash_bytes = malloc(size ? size : 1);
    if (!H.stash_bytes) {
        kvf_case_free(c);
        return;
    }
    memcpy(H.stash_bytes, data, size);
    H.stash_size = size;
    H.stash_case = *c;
    H.stash_valid = 1;
}

/* ---- the abort sites: one function per class, so crash de-duplication keeps them apart --- */

/* kvf_found_<class> for every class of kvfuzz/finding_classes.def (found_sites.inc is made from
 * it by fuzz/CMakeLists.txt): each a frame of its own on the stack libFuzzer reports, never
 * inlined into found(). */
#define KVF__FOUND_SITE(id, lower)                                                                 \
    __attribute__((noinline)) void kvf_found_##lower(void) {                                       \
        fprintf(stderr, "kvfuzz: %s: %s\n", kvf_finding_class_name(KVF_FINDING_##id),              \
                kvf_finding_class_doc(KVF_FINDING_##id));                                          \
        abort();                                                                                   \
    }
#include "found_sites.inc"
#undef KVF__FOUND_SITE

static void found(kvf_finding_class c) {
    switch (c) {
#define KVF__FOUND_SITE(id, lower)                                                                 \
    case KVF_FINDING_##id:                                                                         \
        kvf_found_##lower();                                                                       \
        break;
#include "found_sites.inc"
#undef KVF__FOUND_SITE
    default: /* no class: report() is called for findings only */
        break;
    }
    fprintf(stderr, "kvfuzz: a finding of class %d, which kvfuzz does not know\n", (int)c);
    abort();
}

static void report(const kvf_outcome *out, const kvf_kernel *k, const kvf_spec *s,
                   const kvf_case *c) {
    kvf_outcome_print(stderr, out, k->name, s, c);
    fprintf(stderr, "%s: ", k->name);
    kvf_outcome_line(stderr, out);
    fflush(stderr);
    if (H.keep_going) {
        H.findings++;
        return;
    }
    found(out->finding);
}

/* ---- one input ------------------------------------------------------------------------------ */

int kvf_harness_exec(const uint8_t *data, size_t size) {
    kvf_spec spec;
    kvf_case c;
    int have_case = 0;
    if (kvf_spec_decode(&spec, data, size, &H.limits, NULL)) {
        stash_drop();
        return -1;
    }
    if (H.max_work &&
        (kvf_spec_work(&spec) > H.max_work || kvf_spec_pool_elems(&spec) > H.max_pool)) {
        kvf_spec_free(&spec);
        stash_drop();
        return -1; /* too slow to be worth it; the mutator never goes there */
    }
    if (H.stash_valid && H.stash_size == size && memcmp(H.stash_bytes, data, size) == 0) {
        c = H.stash_case;
        H.stash_valid = 0;
        have_case = 1;
    }
    stash_drop();
    if (!have_case && kvf_case_build(&c, &spec, &H.limits, NULL)) {
        kvf_spec_free(&spec);
        return -1;
    }
    if (!H.mlim.allow_nonfinite && !kvf_case_inputs_finite(&c)) {
        /* NaN/inf that a sequence reads: outside the default input domain (docs/design.md §4),
         * where "the right answer" is a convention, not a bug. */
        kvf_case_free(&c);
        kvf_spec_free(&spec);
        return -1;
    }
    H.execs++;
    kvf_bf16 *o = malloc((size_t)(kvf_case_o_elems(&c) + 1) * sizeof *o);
    float *lse = malloc((size_t)(kvf_case_lse_elems(&c) + 1) * sizeof *lse);
    kvf_bf16 *o2 = malloc((size_t)(kvf_case_o_elems(&c) + 1) * sizeof *o2);
    float *lse2 = malloc((size_t)(kvf_case_lse_elems(&c) + 1) * sizeof *lse2);
    /* The outputs H.judged was judged on. A kernel whose o and lse are bit for bit those gets
     * the same verdicts, which depend on nothing else (the same case, oracle result and
     * rules), without judging them again: the CPU kernels agree on a third of the cases. */
    kvf_bf16 *o_judged = malloc((size_t)(kvf_case_o_elems(&c) + 1) * sizeof *o_judged);
    float *lse_judged = malloc((size_t)(kvf_case_lse_elems(&c) + 1) * sizeof *lse_judged);
    int have_judged = 0;
    const size_t o_bytes = (size_t)kvf_case_o_elems(&c) * sizeof *o;
    const size_t lse_bytes = (size_t)kvf_case_lse_elems(&c) * sizeof *lse;
    if (!o || !lse || !o2 || !lse2 || !o_judged || !lse_judged) {
        fprintf(stderr, "%s: out of memory\n", H.target);
        abort();
    }
    kvf_oracle_result oracle;
    int have_oracle = 0;
    for (int k = 0; k < H.nkernels; k++) {
        const kvf_kernel *kern = H.kernels[k];
        kvf_error err = {0};
        kvf_outcome out;
        int rc = kvf_kernel_run(kern, H.states[k], &c, o, lse, &err);
        if (rc == KVF_EUNSUPPORTED) continue;
        if (rc) {
            kvf_outcome_from_run(&out, KVF_RUN_KERNEL_ERROR, err.msg);
            report(&out, kern, &spec, &c);
            continue;
        }
        if (H.execs % DETERMINISM_EVERY == 0) {
            int rc2 = kvf_kernel_run(kern, H.states[k], &c, o2, lse2, &err);
            kvf_outcome_from_run(&out, KVF_RUN_OK, NULL);
            if (rc2 == 0 && kvf_outcome_compare(&out, &c, o, lse, o2, lse2)) {
                report(&out, kern, &spec, &c);
                continue;
            }
        }
        if (!have_oracle) {
            kvf_oracle_opts oo;
            kvf_oracle_opts_default(&oo);
            oo.threads = H.jobs;
            if (kvf_oracle_run(&oracle, &c, &oo, &err)) {
                /* Not the kernel's fault; a certified rounding that cannot be found is the
                 * oracle's own bug and must be loud. */
                fprintf(stderr, "%s: the oracle failed: %s\n", H.target, err.msg);
                abort();
            }
            have_oracle = 1;
        }
        if (have_judged && same_rules(H.judged_kernel, k) && memcmp(o, o_judged, o_bytes) == 0 &&
            memcmp(lse, lse_judged, lse_bytes) == 0) {
            out = H.judged;
        } else {
            const kvf_trial_rules judge = {H.kernel_rules[k], H.nrules, H.require_overflow, 0, 0,
                                           KVF_FINDING_NONE};
            if (kvf_trial_judge(&out, &judge, &c, &oracle, o, lse, NULL, &err)) {
                fprintf(stderr, "%s: could not judge: %s\n", H.target, err.msg);
                abort();
            }
            H.judged = out;
            H.judged_kernel = k;
            kvf_bf16 *to = o_judged;
            float *tl = lse_judged;
            o_judged = o, lse_judged = lse; /* the next kernel writes into the other pair */
            o = to, lse = tl;
            have_judged = 1;
        }
        int feats[3 * KVF_MAX_RULES + 2];
        int nf = kvf_outcome_features(&out, feats);
        for (int i = 0; i < nf; i++)
            if (feats[i] >= 0 && feats[i] < FEATURES_PER_KERNEL) error_counters[k][feats[i]] = 1;
        if (H.keep_going) {
            fprintf(stderr, "%s: ", kern->name);
            if (out.finding == KVF_FINDING_NONE) kvf_outcome_line(stderr, &out);
        }
        if (out.finding != KVF_FINDING_NONE) {
            /* Which precision model, if any, explains a tolerance finding: said in its report.
             * The outputs judged are in o_judged now (swapped above, or equal to them). */
            const kvf_trial_rules explain = {H.kernel_rules[k], H.nrules, H.require_overflow, 0, 1,
                                             KVF_FINDING_NONE};
            kvf_trial_explain(&out, &explain, &c, &oracle, o_judged, lse_judged);
            report(&out, kern, &spec, &c);
        }
    }
    if (have_oracle) kvf_oracle_result_free(&oracle);
    free(o);
    free(lse);
    free(o2);
    free(lse2);
    free(o_judged);
    free(lse_judged);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
    return 0;
}
