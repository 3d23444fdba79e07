/* Replay: case files judged by several kernels, each in a worker of its own (kvfuzz/replay.h). */
#include "kvfuzz/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kvfuzz/spec.h"

/* Each worker holds a socket in this process: a plugin of thousands of kernels needs more
 * descriptors than the common soft limit of 1024, so the soft limit is raised toward the hard
 * one. Returns 0, or -1 with *allowed set when the hard limit is too low, so the run stops
 * with one sentence before it starts hundreds of workers. */
static int raise_fd_limit(size_t nkernels, size_t *allowed) {
    struct rlimit rl;
    const rlim_t want = (rlim_t)nkernels * 2 + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
        return 0;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= want) return 0;
    *allowed = (size_t)rl.rlim_max;
    return -1;
}

int kvf_replay_start(kvf_replay *r, const kvf_replay_opts *o, size_t *failed, kvf_error *err) {
    memset(r, 0, sizeof *r);
    r->o = *o;
    const size_t nk = o->nkernels;
    *failed = nk;
    size_t allowed = 0;
    if (raise_fd_limit(nk, &allowed))
        return kvf_error_set(err, KVF_ELIMIT,
                             "%zu kernels need %zu open files (a worker each), and the limit is "
                             "%zu: raise it with ulimit -n",
                             nk, nk * 2 + 64, allowed);
    r->runners = calloc(nk ? nk : 1, sizeof *r->runners);
    if (!r->runners) return kvf_error_set(err, KVF_ENOMEM, "out of memory for %zu kernels", nk);
    for (size_t k = 0; k < nk; k++) {
        kvf_runner_opts ro = {
            .kernel = o->kernels[k], .limits = o->limits, .deadline_s = o->deadline_s, .lanes = 1};
        int rc = kvf_runner_create(&r->runners[k], &ro, err);
        if (rc == 0) rc = kvf_runner_start(r->runners[k], err);
        if (rc) {
            *failed = k;
            return rc;
        }
    }
    kvf_oracle_opts_default(&r->oracle);
    r->oracle.threads = o->oracle_threads;
    r->oracle.path = o->oracle_path;
    return 0;
}

void kvf_replay_stop(kvf_replay *r) {
    for (size_t k = 0; r->runners && k < r->o.nkernels; k++)
        kvf_runner_destroy(r->runners[k]);
    free(r->runners);
    r->runners = NULL;
}

kvf_replay_case_status kvf_replay_case_open(kvf_replay *r, kvf_replay_case *rc, const char *path,
                                            kvf_error *err) {
    memset(rc, 0, sizeof *rc);
    rc->path = path;
    rc->name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    kvf_spec spec;
    if (kvf_case_load(path, &spec, &rc->c, &r->o.limits, err)) {
        r->t.bad_inputs++;
        return KVF_REPLAY_CASE_BAD_INPUT;
    }
    rc->have_case = 1;
    r->t.cases_ok++;
    /* The statistics identify a case by its canonical bytes (the file's, for any file that
     * decodes) so their worst elements can be replayed from the report. */
    if (r->o.keep_bytes && kvf_spec_encode(&spec, &rc->kvfz, &rc->kvfz_size, NULL)) {
        rc->kvfz = NULL;
        rc->kvfz_size = 0;
    }
    kvf_spec_free(&spec);
    if (kvf_oracle_run(&rc->oracle, &rc->c, &r->oracle, err)) {
        r->t.not_judged++;
        return KVF_REPLAY_CASE_ORACLE_FAILED;
    }
    rc->have_oracle = 1;
    if (kvf_trial_buffers_alloc(&rc->b, &rc->c, NULL)) {
        r->t.not_judged++;
        return KVF_REPLAY_CASE_NO_MEMORY;
    }
    return KVF_REPLAY_CASE_READY;
}

void kvf_replay_case_close(kvf_replay_case *rc) {
    kvf_trial_buffers_free(&rc->b);
    if (rc->have_oracle) kvf_oracle_result_free(&rc->oracle);
    if (rc->have_case) kvf_case_free(&rc->c);
    free(rc->kvfz);
    rc->kvfz = NULL;
    rc->have_oracle = rc->have_case = 0;
}

kvf_replay_run_kind kvf_replay_run(kvf_replay *r, const kvf_replay_case *rc, size_t k,
                                   kvf_replay_result *res) {
    r->t.runs++;
    kvf_error err = {0};
    if (kvf_runner_run(r->runners[k], &rc->c, rc->b.o, rc->b.lse, &res->run, &err)) {
        res->run.status = KVF_RUN_KERNEL_ERROR;
        snprintf(res->run.message, sizeof res->run.message, "%s", err.msg);
    }
    kvf_outcome_from_run(&res->out, res->run.status, res->run.message);
    res->run_class = res->out.finding;
    if (res->run.status == KVF_RUN_UNSUPPORTED) {
        r->t.unsupported++;
        return res->kind = KVF_REPLAY_UNSUPPORTED;
    }
    if (res->run.status != KVF_RUN_OK) {
        r->t.failed_runs++;
        return res->kind = KVF_REPLAY_RUN_FAILED;
    }
    return res->kind = KVF_REPLAY_RAN;
}

int kvf_replay_judge(kvf_replay *r, const kvf_replay_case *rc, size_t k,
                     const kvf_judge_hooks *hooks, kvf_replay_result *res) {
    const kvf_rule *rules = r->o.rules + k * KVF_MAX_RULES;
    const int n = r->o.nrules;
    const kvf_trial_rules tr = {.rules = rules,
                                .nrules = n,
                                .require_overflow = r->o.require_overflow,
                                .attribute_class = KVF_FINDING_NONE};
    kvf_error err = {0};
    res->failed = 0;
    res->error[0] = 0;
    int jrc = kvf_trial_judge(&res->out, &tr, &rc->c, &rc->oracle, rc->b.o, rc->b.lse, hooks, &err);
    if (jrc) {
        snprintf(res->error, sizeof res->error, "%s", err.msg);
        r->t.failed_runs++;
        return jrc;
    }
    for (int j = 0; j < n; j++) {
        const kvf_verdict *v = &res->out.verdicts[j];
        res->status[j] = kvf_verdict_status_of(v, r->o.require_overflow);
        memset(&res->attr[j], 0, sizeof res->attr[j]);
        res->attr_error[j][0] = 0;
        kvf_error aerr = {0};
        if (res->status[j] == KVF_VERDICT_FAIL &&
            kvf_attribute(&res->attr[j], v, &rc->c, &rc->oracle, rc->b.o, rc->b.lse, &aerr))
            snprintf(res->attr_error[j], sizeof res->attr_error[j], "%s", aerr.msg);
        if (res->status[j] == KVF_VERDICT_FAIL) res->failed = 1;
        res->repeats[j] = 0;
        for (int i = 0; i < j && !res->repeats[j]; i++)
            res->repeats[j] = strcmp(rules[i].name, rules[j].name) == 0;
    }
    if (res->failed) r->t.failed_runs++;
    return 0;
}

size_t kvf_replay_clean_runs(const kvf_replay_tally *t) {
    return t->runs - t->failed_runs - t->unsupported;
}

int64_t kvf_replay_relate(kvf_replay *r, const kvf_replay_case *rc, size_t k, kvf_relation rel,
                          uint64_t seed, kvf_outcome *out, char *why, size_t why_size) {
    kvf_relation_pair p;
    kvf_error err = {0};
    kvf_outcome_from_run(out, KVF_RUN_OK, NULL);
    if (kvf_relation_is_replay(rel) && !kvf_kernel_can_graph_replay(r->o.kernels[k])) {
        snprintf(why, why_size, "graph replay applies to CUDA kernels run through the buffer host");
        return -1;
    }
    if (kvf_relation_derive(&p, rel, &rc->c, seed, &r->o.limits, &err)) {
        snprintf(why, why_size, "%s", err.msg);
        return -1;
    }
    kvf_trial_buffers b = {NULL, NULL};
    kvf_run_result res;
    int64_t n = -1;
    if (kvf_trial_buffers_alloc(&b, &p.derived, &err) ||
        kvf_runner_run_relation(r->runners[k], &rc->c, &p, b.o, b.lse, &res, &err)) {
        snprintf(why, why_size, "%s", err.msg);
    } else if (res.status != KVF_RUN_OK) {
        snprintf(why, why_size, "the transformed case's run ended: %s: %s",
                 kvf_run_status_name(res.status), res.message);
    } else {
        const int promised = (kvf_kernel_promises(r->o.kernels[k]) & KVF_RELATION_BIT(rel)) != 0;
        n = kvf_outcome_relate(out, &p, promised, &rc->c, rc->b.o, rc->b.lse, b.o, b.lse);
        r->t.relation_pairs++;
        if (n > 0 && promised) r->t.relations_broken++;
        if (!out->relation_broken)
            snprintf(out->relation_what, sizeof out->relation_what, "%s", p.what);
    }
    kvf_trial_buffers_free(&b);
    kvf_relation_pair_free(&p);
    return n;
}
