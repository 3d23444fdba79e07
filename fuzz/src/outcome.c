/* Judging one run under several rules, the fuzzers' error buckets, finding signatures and the
 * reports (outcome.h). */
#include "kvfuzz/outcome.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvfuzz/file.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/prng.h"

const char *kvf_run_status_name(kvf_run_status s) {
    switch (s) {
    case KVF_RUN_OK:
        return "ok";
    case KVF_RUN_UNSUPPORTED:
        return "unsupported";
    case KVF_RUN_KERNEL_ERROR:
        return "kernel-error";
    case KVF_RUN_CRASH:
        return "crash";
    case KVF_RUN_HANG:
        return "hang";
    case KVF_RUN_UNWRITTEN:
        return "unwritten-output";
    case KVF_RUN_OOB_WRITE:
        return "out-of-bounds-write";
    case KVF_RUN_INPUT_MODIFIED:
        return "input-modified";
    }
    return "unknown";
}

/* CUDA reports a kernel that faulted (an illegal address, a trap) as an error code from the
 * next API call, not as a signal; those are crashes (docs/design.md §7), the rest of the launch
 * and API errors are kernel errors. */
int kvf_message_is_device_fault(const char *message) {
    static const char *const faults[] = {"cudaErrorIllegalAddress",
                                         "cudaErrorMisalignedAddress",
                                         "cudaErrorLaunchFailure",
                                         "cudaErrorIllegalInstruction",
                                         "cudaErrorHardwareStackError",
                                         "cudaErrorInvalidPc",
                                         "cudaErrorInvalidAddressSpace",
                                         "cudaErrorAssert",
                                         NULL};
    for (int i = 0; message && faults[i]; i++)
        if (strstr(message, faults[i])) return 1;
    return 0;
}

kvf_run_status kvf_run_status_from_code(int rc) {
    switch (rc) {
    case 0:
        return KVF_RUN_OK;
    case KVF_EUNSUPPORTED:
        return KVF_RUN_UNSUPPORTED;
    case KVF_EUNWRITTEN:
        return KVF_RUN_UNWRITTEN;
    case KVF_EOOBWRITE:
        return KVF_RUN_OOB_WRITE;
    case KVF_EINPUTMOD:
        return KVF_RUN_INPUT_MODIFIED;
    default:
        return KVF_RUN_KERNEL_ERROR;
    }
}

void kvf_outcome_from_run(kvf_outcome *out, kvf_run_status status, const char *message) {
    memset(out, 0, sizeof *out);
    out->status = status;
    out->rule = -1;
    out->fib = -1;
    if (message) snprintf(out->message, sizeof out->message, "%s", message);
    switch (status) {
    case KVF_RUN_KERNEL_ERROR:
        out->finding =
            kvf_message_is_device_fault(message) ? KVF_FINDING_CRASH : KVF_FINDING_KERNEL_ERROR;
        break;
    case KVF_RUN_CRASH:
        out->finding = KVF_FINDING_CRASH;
        break;
    case KVF_RUN_HANG:
        out->finding = KVF_FINDING_HANG;
        break;
    case KVF_RUN_UNWRITTEN:
        out->finding = KVF_FINDING_UNWRITTEN_OUTPUT;
        break;
    case KVF_RUN_OOB_WRITE:
        out->finding = KVF_FINDING_OOB_WRITE;
        break;
    case KVF_RUN_INPUT_MODIFIED:
        out->finding = KVF_FINDING_INPUT_MODIFIED;
        break;
    default:
        out->finding = KVF_FINDING_NONE;
        break;
    }
}

typedef struct plain_hooks {
    kvf_element_observer observer;
    void *ctx;
} plain_hooks;

static void *plain_begin(void *ctx, int rule) {
    (void)rule;
    return ((plain_hooks *)ctx)->ctx;
}

int kvf_outcome_judge(kvf_outcome *out, const kvf_rule *rules, int nrules, int require_overflow,
                      const kvf_case *c, const kvf_oracle_result *oracle, const kvf_bf16 *o,
                      const float *lse, kvf_element_observer observer, void *observer_ctx,
                      kvf_error *err) {
    plain_hooks ph = {observer, observer_ctx};
    kvf_judge_hooks h = {plain_begin, observer, NULL, &ph, NULL};
    return kvf_outcome_judge_hooked(out, rules, nrules, require_overflow, c, oracle, o, lse,
                                    observer ? &h : NULL, err);
}

int kvf_outcome_judge_hooked(kvf_outcome *out, const kvf_rule *rules, int nrules,
                             int require_overflow, const kvf_case *c,
                             const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                             const kvf_judge_hooks *hooks, kvf_error *err) {
    kvf_outcome_from_run(out, KVF_RUN_OK, NULL);
    if (nrules > KVF_MAX_RULES) nrules = KVF_MAX_RULES;
    out->nrules = nrules;
    for (int r = 0; r < nrules; r++) {
        void *scope = hooks && hooks->begin ? hooks->begin(hooks->ctx, r) : NULL;
        int rc = scope && hooks->element
                     ? kvf_judge_observe_runs(&out->verdicts[r], &rules[r], c, oracle, o, lse,
                                              hooks->element, hooks->exact_run, scope, err)
                     : kvf_judge(&out->verdicts[r], &rules[r], c, oracle, o, lse, err);
        if (scope && hooks->end) hooks->end(hooks->ctx, scope, rc ? NULL : &out->verdicts[r]);
        if (rc) return rc;
        const kvf_verdict *v = &out->verdicts[r];
        /* Overflow-class violations (rows whose logits leave f32) are reported but count only
         * when asked for, as in `kvfuzz replay --require-overflow` (docs/design.md §4). */
        int counts = !v->pass && (v->finding != KVF_FINDING_OVERFLOW || require_overflow);
        if (counts && out->finding == KVF_FINDING_NONE) {
            out->finding = v->finding;
            out->rule = r;
        }
    }
    return 0;
}

int kvf_outcome_judge_fib(kvf_outcome *out, int require_overflow, const kvf_case *c,
                          const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                          kvf_error *err) {
    if (out->status != KVF_RUN_OK) return 0;
    for (int r = 0; r < out->nrules; r++)
        if (strcmp(out->verdicts[r].rule.name, "fib") == 0) {
            out->fib =
                kvf_verdict_status_of(&out->verdicts[r], require_overflow) == KVF_VERDICT_FAIL;
            return 0;
        }
    kvf_rule fib;
    int rc = kvf_rule_parse(&fib, "fib", err);
    if (rc) return rc;
    /* A verdict is large (its worst elements); this runs once per new finding. */
    kvf_verdict *v = malloc(sizeof *v);
    if (!v) return kvf_error_set(err, KVF_ENOMEM, "out of memory judging under fib");
    rc = kvf_judge(v, &fib, c, oracle, o, lse, err);
    if (!rc) out->fib = kvf_verdict_status_of(v, require_overflow) == KVF_VERDICT_FAIL;
    free(v);
    return rc;
}

int kvf_outcome_attribute(kvf_outcome *out, const kvf_case *c, const kvf_oracle_result *oracle,
                          const kvf_bf16 *o, const float *lse, kvf_error *err) {
    memset(&out->attribution, 0, sizeof out->attribution);
    if (out->status != KVF_RUN_OK || out->rule < 0 || out->rule >= out->nrules) return 0;
    return kvf_attribute(&out->attribution, &out->verdicts[out->rule], c, oracle, o, lse, err);
}

int kvf_outcome_compare(kvf_outcome *out, const kvf_case *c, const kvf_bf16 *o1, const float *lse1,
                        const kvf_bf16 *o2, const float *lse2) {
    kvf_difference d = {0};
    int64_t n_o = kvf_case_o_elems(c), n_lse = kvf_case_lse_elems(c);
    const int32_t hq = c->num_qo_heads, dim = c->head_dim;
    for (int64_t i = 0; i < n_o; i++)
        if (o1[i] != o2[i] && d.count++ == 0) {
            d.output = KVF_OUTPUT_O;
            d.b = (int32_t)(i / ((int64_t)hq * dim));
            d.h = (int32_t)(i / dim % hq);
            d.d = (int32_t)(i % dim);
            d.first_bits = o1[i];
            d.second_bits = o2[i];
        }
    for (int64_t i = 0; i < n_lse; i++) {
        uint32_t a = kvf_f32_bits(lse1[i]), b = kvf_f32_bits(lse2[i]);
        if (a != b && d.count++ == 0) {
            d.output = KVF_OUTPUT_LSE;
            d.b = (int32_t)(i / hq);
            d.h = (int32_t)(i % hq);
            d.d = -1;
            d.first_bits = a;
            d.second_bits = b;
        }
    }
    if (d.count == 0) return 0;
    out->nondeterministic = 1;
    out->difference = d;
    if (out->finding == KVF_FINDING_NONE) {
        out->finding = KVF_FINDING_NONDETERMINISM;
        out->rule = -1;
    }
    return 1;
}

/* ---- buckets -------------------------------------------------------------------------------- */

int kvf_margin_bucket(double m) {
    if (isnan(m)) return 63;
    if (isinf(m)) return 62;
    if (m <= 0) return 0;
    int e = ilogb(m); /* floor(log2 m) */
    if (e < -50) e = -50;
    if (e > 10) e = 10;
    return 1 + (e + 50);
}

int kvf_ulp_bucket(int64_t u) {
    if (u < 0) return 65;
    if (u == INT64_MAX) return 64;
    if (u == 0) return 0;
    int e = 0;
    while (u >>= 1)
        e++;
    return 1 + e;
}

int kvf_feature_space(int nrules) {
    return nrules * 2 * KVF_MARGIN_BUCKETS + 2 * KVF_ULP_BUCKETS +
           (nrules > 0 ? nrules : 1) * KVF_FINDING_CLASS_COUNT;
}

int kvf_feature_max(int nrules) {
    return nrules * 2 + 2 + (nrules > 0 ? nrules : 1);
}

int kvf_outcome_features(const kvf_outcome *out, int *f) {
    int n = 0, nr = out->nrules;
    const int ulp_base = nr * 2 * KVF_MARGIN_BUCKETS;
    const int class_base = ulp_base + 2 * KVF_ULP_BUCKETS;
    if (out->status != KVF_RUN_OK || nr == 0) {
        /* Run-level classes share the first rule's class slots. */
        f[n++] = class_base + out->finding;
        return n;
    }
    for (int r = 0; r < nr; r++) {
        const kvf_verdict *v = &out->verdicts[r];
        f[n++] = (r * 2 + 0) * KVF_MARGIN_BUCKETS + kvf_margin_bucket(v->o.max_margin);
        f[n++] = (r * 2 + 1) * KVF_MARGIN_BUCKETS + kvf_margin_bucket(v->lse.max_margin);
        f[n++] = class_base + r * KVF_FINDING_CLASS_COUNT + v->finding;
    }
    /* ulp distances do not depend on the rule. A NaN/inf mismatch has no distance; it keeps
     * a bucket of its own (the one past every distance), so the search still tells it apart. */
    const kvf_output_metrics *mo = &out->verdicts[0].o, *ml = &out->verdicts[0].lse;
    f[n++] = ulp_base +
             (mo->nonfinite_mismatch ? kvf_ulp_bucket(INT64_MAX) : kvf_ulp_bucket(mo->max_ulps));
    f[n++] = ulp_base + KVF_ULP_BUCKETS +
             (ml->nonfinite_mismatch ? kvf_ulp_bucket(INT64_MAX) : kvf_ulp_bucket(ml->max_ulps));
    return n;
}

/* ---- signature ------------------------------------------------------------------------------ */

static const char *magnitude_band(int64_t ulps) {
    if (ulps < 0 || ulps == INT64_MAX) return "nan";
    if (ulps <= 2) return "ulp1-2";
    if (ulps <= 15) return "ulp3-15";
    if (ulps <= 255) return "ulp16-255";
    return "ulp256+";
}

static const char *value_kind(double x) {
    return isnan(x) ? "nan" : isinf(x) ? (x > 0 ? "+inf" : "-inf") : "finite";
}

uint64_t kvf_outcome_signature(const kvf_outcome *out, const char *kernel, char *text,
                               size_t size) {
    char buf[512];
    const char *cls = kvf_finding_class_name(out->finding);
    if (out->rule >= 0 && out->rule < out->nrules) {
        const kvf_verdict *v = &out->verdicts[out->rule];
        /* The output that fails: o for o-tolerance, lse for lse-tolerance, for the others the
         * one whose worst element fails. Only an overflow finding is about rows out of the
         * model; any other class was decided on in-model rows, so o names it only when it
         * fails there: NaN in o on a row whose logits leave f32, beside an empty sequence's
         * wrong lse, is the lse's finding (whose in-model failures lead its worst list). */
        int64_t o_fails = v->o.violations;
        if (out->finding != KVF_FINDING_OVERFLOW) o_fails -= v->o.violations_out_of_model;
        const kvf_output_metrics *m = &v->o;
        const char *which = "o";
        if (out->finding == KVF_FINDING_LSE_TOLERANCE ||
            (out->finding != KVF_FINDING_O_TOLERANCE && o_fails == 0)) {
            m = &v->lse;
            which = "lse";
        }
        const char *detail = magnitude_band(m->max_ulps);
        if (out->finding == KVF_FINDING_NONFINITE && m->worst_count > 0)
            detail = value_kind(m->worst[0].kernel_value);
        snprintf(buf, sizeof buf, "%s|%s|%s|%s|%s", cls, kernel, v->rule.name, which, detail);
    } else if (out->finding == KVF_FINDING_CRASH && out->status == KVF_RUN_KERNEL_ERROR) {
        snprintf(buf, sizeof buf, "%s|%s|device-fault", cls, kernel);
    } else if (out->finding == KVF_FINDING_CRASH) {
        snprintf(buf, sizeof buf, "%s|%s|%s%d", cls, kernel, out->signal ? "signal" : "exit",
                 out->signal ? out->signal : out->exit_code);
    } else if (out->finding == KVF_FINDING_NONDETERMINISM) {
        snprintf(buf, sizeof buf, "%s|%s|%s", cls, kernel,
                 out->difference.output == KVF_OUTPUT_O ? "o" : "lse");
    } else {
        snprintf(buf, sizeof buf, "%s|%s", cls, kernel);
    }
    if (text && size) snprintf(text, size, "%s", buf);
    return kvf_hash64(buf, strlen(buf));
}

/* ---- text report ---------------------------------------------------------------------------- */

static void print_dist(FILE *f, const char *name, const kvf_dist *d) {
    fprintf(f, "%s %s 2^%d p%u", name, kvf_dist_name(d->kind), d->log2_scale, d->param);
}

static void print_case(FILE *f, const kvf_spec *s, const kvf_case *c) {
    const kvf_recipe *rp = &s->recipe;
    fprintf(f, "case: Hq %u, Hk %u (group %u), D %u, S %u, batch %u", rp->num_qo_heads,
            rp->num_kv_heads, rp->num_qo_heads / rp->num_kv_heads, rp->head_dim, rp->page_size,
            rp->batch_size);
    if (c) fprintf(f, ", pool %" PRId64 " pages", c->num_pages);
    fprintf(f, ", sm_scale %.9g (0x%08x)\n", (double)rp->sm_scale, kvf_f32_bits(rp->sm_scale));
    fprintf(f, "  lengths [");
    int64_t tokens = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        int64_t len = rp->num_pages[b]
                          ? (int64_t)(rp->num_pages[b] - 1) * rp->page_size + rp->last_page_len[b]
                          : 0;
        tokens += len;
        if (b == 16) {
            fprintf(f, ", ...");
            continue;
        }
        if (b < 16) fprintf(f, "%s%" PRId64, b ? ", " : "", len);
    }
    fprintf(f, "] (%" PRId64 " tokens; pages/last_page_len", tokens);
    for (uint32_t b = 0; b < rp->batch_size && b < 16; b++)
        fprintf(f, " %u/%u", rp->num_pages[b], rp->last_page_len[b]);
    fprintf(f,
            ")\n  table %s, page_id_base %u, spare %u, logits %s, poison 0x%x, seed 0x%016" PRIx64
            "\n  ",
            kvf_table_name(rp->table), rp->page_id_base, rp->spare_pages,
            kvf_logits_name(rp->logits), rp->poison, rp->seed);
    print_dist(f, "q", &rp->q);
    print_dist(f, ", k", &rp->k);
    print_dist(f, ", v", &rp->v);
    fprintf(f, "; %u override(s)%s\n", s->num_overrides,
            s->has_explicit ? "; explicit tensors" : "");
    for (uint32_t i = 0; i < s->num_overrides && i < 8; i++) {
        static const char *const targets[] = {"?", "kv_indices", "kv_last_page_len",
                                              "q", "k_cache",    "v_cache"};
        const kvf_override *o = &s->overrides[i];
        fprintf(f, "    %s[%" PRIu64 "] = 0x%x\n", targets[o->target <= 5 ? o->target : 0],
                o->index, o->value);
    }
}

static void print_metrics(FILE *f, const char *name, const kvf_output_metrics *m) {
    fprintf(f,
            "%s: %" PRId64 "/%" PRId64 " fail, margin %.3g, abs %.3g, rel %.3g, ulp %" PRId64
            " (%.2f bits)",
            name, m->violations, m->elements, m->max_margin, m->max_abs, m->max_rel_fib,
            m->max_ulps, m->bits_of_error);
}

static void print_element(FILE *f, const kvf_element_error *e) {
    int is_o = e->output == KVF_OUTPUT_O;
    if (is_o)
        fprintf(f, "    o[b=%d h=%d d=%d]", e->b, e->h, e->d);
    else
        fprintf(f, "    lse[b=%d h=%d]", e->b, e->h);
    fprintf(f,
            " kernel %.9g (0x%0*x) oracle %.9g (0x%0*x) exact %.17g (%a) ulps %" PRId64
            " allowed %.3g margin %.3g%s%s\n",
            e->kernel_value, is_o ? 4 : 8, e->kernel_bits, e->rounded_value, is_o ? 4 : 8,
            e->rounded_bits, e->exact_value, e->exact_value, e->ulps, e->allowed, e->margin,
            e->fails ? " FAIL" : "",
            /* Said on the line: such an element is no kernel failure unless overflow is
             * required, though it may be listed under a finding of another class. */
            e->out_of_model ? " (row out of the model)" : "");
}

static const char *signal_name(int sig) {
    const char *s = strsignal(sig);
    return s ? s : "unknown signal";
}

void kvf_outcome_print(FILE *f, const kvf_outcome *out, const char *kernel, const kvf_spec *s,
                       const kvf_case *c) {
    fprintf(f, "==== kvfuzz finding: %s (kernel %s", kvf_finding_class_name(out->finding), kernel);
    if (out->rule >= 0) fprintf(f, ", rule %s", out->verdicts[out->rule].rule.name);
    fprintf(f, ") ====\n");
    if (out->plan[0]) fprintf(f, "plan: %s\n", out->plan);
    if (out->attribution.kind != KVF_ATTRIB_NONE)
        fprintf(f, "attribution: %s\n", out->attribution.text);
    if (s) print_case(f, s, c);
    if (out->status != KVF_RUN_OK) {
        fprintf(f, "run: %s: %s\n", kvf_run_status_name(out->status), out->message);
        if (out->status == KVF_RUN_CRASH && out->signal)
            fprintf(f, "  the worker was killed by signal %d (%s)\n", out->signal,
                    signal_name(out->signal));
        return;
    }
    if (out->nondeterministic) {
        const kvf_difference *d = &out->difference;
        fprintf(
            f, "nondeterminism: %" PRId64 " element(s) differ between two runs; first %s[b=%d h=%d",
            d->count, d->output == KVF_OUTPUT_O ? "o" : "lse", d->b, d->h);
        if (d->d >= 0) fprintf(f, " d=%d", d->d);
        fprintf(f, "] 0x%x then 0x%x\n", d->first_bits, d->second_bits);
    }
    for (int r = 0; r < out->nrules; r++) {
        const kvf_verdict *v = &out->verdicts[r];
        fprintf(f, "rule %-20s %s", v->rule.name, v->pass ? "pass" : "FAIL ");
        if (!v->pass) fprintf(f, "%s", kvf_finding_class_name(v->finding));
        fprintf(f, "\n  ");
        print_metrics(f, "o", &v->o);
        fprintf(f, "\n  ");
        print_metrics(f, "lse", &v->lse);
        fprintf(f, "\n");
    }
    int r = out->rule >= 0 ? out->rule : 0;
    if (out->nrules > 0) {
        const kvf_verdict *v = &out->verdicts[r];
        fprintf(f, "worst elements under %s:\n", v->rule.name);
        for (int i = 0; i < v->o.worst_count; i++)
            print_element(f, &v->o.worst[i]);
        for (int i = 0; i < v->lse.worst_count && i < 4; i++)
            print_element(f, &v->lse.worst[i]);
    }
}

void kvf_outcome_line(FILE *f, const kvf_outcome *out) {
    fprintf(f, "%s", kvf_finding_class_name(out->finding));
    if (out->status != KVF_RUN_OK) {
        fprintf(f, " %s\n", kvf_run_status_name(out->status));
        return;
    }
    if (out->nrules == 0) {
        fprintf(f, "\n");
        return;
    }
    const kvf_verdict *v = &out->verdicts[out->rule >= 0 ? out->rule : 0];
    const kvf_output_metrics *m = out->finding == KVF_FINDING_LSE_TOLERANCE ? &v->lse : &v->o;
    fprintf(f, " rule %s max_abs %.17g max_rel %.17g max_ulp %" PRId64 " margin %.17g\n",
            v->rule.name, m->max_abs, m->max_rel_fib, m->max_ulps, m->max_margin);
}

/* ---- files ---------------------------------------------------------------------------------- */

int kvf_fuzz_mkdirs(const char *dir, kvf_error *err) {
    return kvf_mkdirs(dir, err);
}

/* Temporary names start with a dot (case-file listings skip them) and carry the pid and a
 * counter, so concurrent writers never share one. */
static void temp_name(char *out, size_t size, const char *dir, const char *base) {
    static atomic_uint counter;
    snprintf(out, size, "%s/.%s.tmp.%ld.%u", dir, base, (long)getpid(),
             atomic_fetch_add(&counter, 1));
}

static int write_fd_all(int fd, const void *data, size_t size) {
    const uint8_t *p = data;
    while (size) {
        ssize_t w = write(fd, p, size);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        size -= (size_t)w;
    }
    return 0;
}

static int write_temp(const char *tmp, const void *data, size_t size) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    int ok = write_fd_all(fd, data, size) == 0 && fsync(fd) == 0;
    if (close(fd) != 0) ok = 0;
    if (!ok) unlink(tmp);
    return ok ? 0 : -1;
}

int kvf_fuzz_write_atomic(const char *path, const void *data, size_t size, kvf_error *err) {
    return kvf_write_atomic_bytes(path, data, size, err);
}

int kvf_finding_save(const char *dir, const kvf_outcome *out, const char *kernel,
                     const kvf_spec *spec, const kvf_case *c, const json_t *extra, int *is_new,
                     char *path_out, size_t path_size, kvf_error *err) {
    *is_new = 0;
    int rc = kvf_fuzz_mkdirs(dir, err);
    if (rc) return rc;
    uint64_t h = kvf_outcome_signature(out, kernel, NULL, 0);
    char name[128], final_case[4200], final_json[4200], tmp_case[4300], tmp_json[4300];
    snprintf(name, sizeof name, "%s-%012" PRIx64, kvf_finding_class_name(out->finding),
             h & UINT64_C(0xFFFFFFFFFFFF));
    snprintf(final_case, sizeof final_case, "%s/%s.kvfz", dir, name);
    snprintf(final_json, sizeof final_json, "%s/%s.json", dir, name);
    if (path_out && path_size) snprintf(path_out, path_size, "%s", final_case);
    if (access(final_case, F_OK) == 0) return 0; /* seen before: the common case, no I/O */

    uint8_t *bytes;
    size_t size;
    if ((rc = kvf_spec_encode(spec, &bytes, &size, err))) return rc;
    char *json = NULL;
    size_t json_size = 0;
    FILE *mem = open_memstream(&json, &json_size);
    if (!mem) {
        free(bytes);
        return kvf_error_set(err, KVF_ENOMEM, "out of memory writing a finding report");
    }
    int jrc = kvf_outcome_json(mem, out, kernel, spec, c, extra);
    if (fclose(mem) != 0 || jrc) {
        free(bytes);
        free(json);
        return kvf_error_set(err, KVF_ENOMEM, "out of memory writing a finding report");
    }

    temp_name(tmp_case, sizeof tmp_case, dir, name);
    temp_name(tmp_json, sizeof tmp_json, dir, name);
    int ok = write_temp(tmp_case, bytes, size) == 0;
    ok = ok && write_temp(tmp_json, json, json_size) == 0;
    free(bytes);
    free(json);
    if (!ok) {
        int e = errno;
        unlink(tmp_case);
        unlink(tmp_json);
        return kvf_error_set(err, KVF_EIO, "cannot write a finding into %s: %s", dir, strerror(e));
    }
    /* link() of the case decides, atomically, whether this signature is new; only the winner
     * moves its report into place, so a report always describes the case beside it. */
    if (link(tmp_case, final_case) != 0) {
        int e = errno;
        unlink(tmp_case);
        unlink(tmp_json);
        if (e == EEXIST) return 0;
        return kvf_error_set(err, KVF_EIO, "cannot write %s: %s", final_case, strerror(e));
    }
    *is_new = 1;
    if (rename(tmp_json, final_json) != 0) {
        int e = errno;
        unlink(tmp_case);
        unlink(tmp_json);
        return kvf_error_set(err, KVF_EIO, "cannot write %s: %s", final_json, strerror(e));
    }
    unlink(tmp_case);
    return 0;
}

/* Whether name is one of the temporary names kvfuzz's writers use: ".NAME.tmp.XXXXXX"
 * (mkstemp's six characters: the atomic-write helper in core), ".NAME.tmp.PID.N" (findings,
 * temp_name above) or ".kvfuzz-write-check.XXXXXX" (kvf_fuzz_check_writable). */
static int is_temp_name(const char *name) {
    size_t n = strlen(name);
    if (name[0] != '.' || n < 8) return 0;
    if (strncmp(name, ".kvfuzz-write-check.", 20) == 0) return n == 26;
    const char *t = NULL;
    for (const char *p = strstr(name, ".tmp."); p; p = strstr(p + 1, ".tmp."))
        t = p; /* the last ".tmp." */
    if (!t || t == name) return 0;
    const char *tail = t + 5;
    size_t tn = strlen(tail), alnum = 0, digits = 0, dots = 0;
    for (const char *p = tail; *p; p++) {
        if (*p >= '0' && *p <= '9')
            digits++;
        else if (*p == '.')
            dots++;
        if ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
            alnum++;
    }
    if (tn == 6 && alnum == 6) return 1;                                           /* mkstemp */
    return dots == 1 && digits == tn - 1 && tail[0] != '.' && tail[tn - 1] != '.'; /* PID.N */
}

int kvf_fuzz_remove_stale_temps(const char *dir, double min_age_s) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_temp_name(e->d_name)) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (difftime(now, st.st_mtime) < min_age_s) continue;
        if (unlink(path) == 0) removed++;
    }
    closedir(d);
    return removed;
}

int kvf_fuzz_check_writable(const char *dir, kvf_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/.kvfuzz-write-check.XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0)
        return kvf_error_set(err, KVF_EIO, "the findings folder %s is not writable: %s", dir,
                             strerror(errno));
    int bad = write(fd, "x", 1) != 1;
    int saved = errno;
    close(fd);
    unlink(path);
    if (bad)
        return kvf_error_set(err, KVF_EIO, "the findings folder %s is not writable: %s", dir,
                             strerror(saved));
    return 0;
}
