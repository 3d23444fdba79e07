/* Dispatcher threads (campaign_internal.h): one per kernel worker process. Each keeps its
 * worker's launches in flight, collects them in order, re-runs sampled cases (determinism) and
 * crashed ones (confirmation), and hands outputs to the oracle pool. Where it waits (for the
 * generators, the kernel, or room in the oracle queue) names the stage that sets the pace. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "campaign_internal.h"

enum { RECHECK_NONE, RECHECK_DETERMINISM, RECHECK_CRASH, RECHECK_RELATION };

static void set_fatal(struct kvf_campaign *cp, const kvf_error *err) {
    pthread_mutex_lock(&cp->mu);
    if (!cp->fatal) {
        cp->fatal = err->code ? err->code : KVF_EIO;
        cp->fatal_err = *err;
    }
    pthread_mutex_unlock(&cp->mu);
    kvf__campaign_stop(cp, KVF__DROP);
}

/* A worker that cannot start while others still serve: with several devices, that device
 * (or its driver) failed, and the campaign goes on without it. The last one's failure is the
 * campaign's (set_fatal). Returns whether the dispatcher was retired. */
static int retire(kvf__dispatcher *d, const kvf_error *err) {
    struct kvf_campaign *cp = d->cp;
    if (d->device < 0) return 0;
    int left = atomic_load(&cp->serving);
    while (left > 1 && !atomic_compare_exchange_weak(&cp->serving, &left, left - 1)) {
    }
    if (left <= 1) return 0;
    pthread_mutex_lock(&cp->mu); /* the dispatchers' retired flags are read under it */
    d->retired = 1;
    kvf_campaign_device *dev = &cp->stats->device[d->device];
    int device_left = 0;
    for (int i = 0; i < cp->nworkers; i++)
        if (cp->worker_device[i] == d->device && !cp->disps[i].retired) device_left = 1;
    if (!device_left) {
        dev->retired = 1;
        dev->active_s = kvf__now_s() - cp->start;
    }
    snprintf(dev->why, sizeof dev->why, "%s", err->msg);
    fprintf(kvf__log(cp),
            "kvfuzz fuzz: device %d: %s; its worker stops, the campaign goes on with %d "
            "worker(s)\n",
            dev->ordinal, err->msg, left - 1);
    pthread_mutex_unlock(&cp->mu);
    return 1;
}

/* The runner's counters into the statistics: worker starts, lanes, failures re-run alone. */
static void note_runner(kvf__dispatcher *d) {
    struct kvf_campaign *cp = d->cp;
    pthread_mutex_lock(&cp->mu);
    cp->worker_starts[d->id] = kvf_runner_starts(d->runner);
    cp->worker_reruns[d->id] = kvf_runner_reruns(d->runner);
    cp->worker_unrepeated[d->id] = kvf_runner_unrepeated(d->runner);
    kvf_campaign_stats *st = cp->stats;
    st->worker_starts = st->reruns_alone = st->unrepeated_alone = 0;
    for (int i = 0; i < cp->nworkers; i++) {
        st->worker_starts += cp->worker_starts[i];
        st->reruns_alone += cp->worker_reruns[i];
        st->unrepeated_alone += cp->worker_unrepeated[i];
    }
    if (kvf_runner_lanes(d->runner) > st->lanes) st->lanes = kvf_runner_lanes(d->runner);
    pthread_mutex_unlock(&cp->mu);
}

/* Submits c, or with a relation pair p the relation's second run of c. */
static int submit_case(kvf__dispatcher *d, const kvf_case *c, const kvf_relation_pair *p,
                       double *wait_kernel) {
    struct kvf_campaign *cp = d->cp;
    kvf_error err = {0};
    if (d->retired) return KVF_EDEVICE;
    /* Counted as waiting for the kernel: a case larger than the socket buffer goes out only
     * as fast as the worker takes it in. */
    double t0 = kvf__now_s();
    int rc = p ? kvf_runner_submit_relation(d->runner, c, p, &err)
               : kvf_runner_submit(d->runner, c, &err);
    *wait_kernel += kvf__now_s() - t0;
    note_runner(d);
    /* Stopping on a signal kills the worker, also one still starting: that is not the
     * kernel's failure to start. */
    if (rc && atomic_load(&cp->stop) < KVF__DROP && !retire(d, &err)) set_fatal(cp, &err);
    return rc;
}

static int submit(kvf__dispatcher *d, kvf__job *j, double *wait_kernel) {
    return submit_case(d, &j->c, NULL, wait_kernel);
}

/* Submits the relation's second run of j, with room for its outputs in o2 and lse2. */
static int submit_derived(kvf__dispatcher *d, kvf__job *j, double *wait_kernel) {
    const kvf_case *c = &j->pair->derived;
    j->o2 = malloc((size_t)(kvf_case_o_elems(c) + 1) * sizeof *j->o2);
    j->lse2 = malloc((size_t)(kvf_case_lse_elems(c) + 1) * sizeof *j->lse2);
    return j->o2 && j->lse2 ? submit_case(d, &j->c, j->pair, wait_kernel) : KVF_ENOMEM;
}

/* Submits a case taken from the generators. When that retires this dispatcher (its device is
 * gone), the case goes back to the queue for the other workers instead of being lost. */
static int submit_new(kvf__dispatcher *d, kvf__job *j, double *wait_kernel) {
    int rc = submit(d, j, wait_kernel);
    if (rc && (!d->retired || kvf__queue_push_sized(&d->cp->ready, j, kvf__job_bytes(j))))
        kvf__job_free(j);
    return rc;
}

/* The dispatcher's blocking calls, timed: where it waits names what limits the campaign. */
static kvf__job *timed_ready_pop(struct kvf_campaign *cp, double *wait_s) {
    double t0 = kvf__now_s();
    kvf__job *j = kvf__queue_pop(&cp->ready);
    *wait_s += kvf__now_s() - t0;
    return j;
}

static void timed_judge_push(struct kvf_campaign *cp, kvf__job *j, double *wait_s) {
    double t0 = kvf__now_s();
    if (kvf__queue_push_sized(&cp->judged, j, kvf__job_bytes(j)))
        kvf__job_free(j); /* stopping: nobody will judge it */
    *wait_s += kvf__now_s() - t0;
}

/* The named counts the summary, the progress line and the statistics file read, from the
 * counts by class they are part of. */
static void name_run_counts(int64_t *crashes, int64_t *hangs, int64_t *kernel_errors,
                            const int64_t *by_class) {
    *crashes = by_class[KVF_FINDING_CRASH];
    *hangs = by_class[KVF_FINDING_HANG];
    *kernel_errors = by_class[KVF_FINDING_KERNEL_ERROR];
}

/* Files the finding of a launch that produced no output (the first run's, for a confirmed
 * crash), which counts it by class in the campaign's by_class, counts it for its device, and
 * tells the statistics. */
static void run_failed(kvf__dispatcher *d, const kvf_run_result *res, const kvf__job *j) {
    struct kvf_campaign *cp = d->cp;
    kvf_outcome out;
    kvf_outcome_from_run(&out, res->status, res->message);
    kvf__record_run_finding(cp, res, j);
    pthread_mutex_lock(&cp->mu);
    kvf_campaign_stats *st = cp->stats;
    name_run_counts(&st->crashes, &st->hangs, &st->kernel_errors, st->by_class);
    if (d->device >= 0) {
        kvf_campaign_device *dev = &st->device[d->device];
        dev->run_findings[out.finding]++;
        name_run_counts(&dev->crashes, &dev->hangs, &dev->kernel_errors, dev->run_findings);
    }
    pthread_mutex_unlock(&cp->mu);
    const kvf_campaign_opts *o = cp->opts;
    if (o->run_observer && out.finding != KVF_FINDING_NONE)
        o->run_observer(o->observer_ctx, (int)out.finding);
}

static void run_unsupported(struct kvf_campaign *cp) {
    const kvf_campaign_opts *o = cp->opts;
    if (o->run_observer) o->run_observer(o->observer_ctx, -1);
}

/* The re-run of a case that crashed: a second crash files the finding (with the first run's
 * signal); anything else means the first was not the kernel's doing, and is only reported. */
static void crash_confirmed(kvf__dispatcher *d, kvf__job *j, const kvf_run_result *res) {
    struct kvf_campaign *cp = d->cp;
    if (res->status == KVF_RUN_CRASH) {
        run_failed(d, &j->first_crash, j);
        return;
    }
    pthread_mutex_lock(&cp->mu);
    cp->stats->crashes_unconfirmed++;
    fprintf(kvf__log(cp),
            "kvfuzz fuzz: case %" PRIu64 " crashed the worker (%s) but ran cleanly again: not "
            "filed (a worker killed from outside, or a flaky crash)\n",
            j->index, j->first_crash.message);
    pthread_mutex_unlock(&cp->mu);
}

/* A determinism re-run came back: compare its bits with the first run's. */
static void recheck_done(kvf__dispatcher *d, kvf__job *j, const kvf_run_result *res) {
    struct kvf_campaign *cp = d->cp;
    pthread_mutex_lock(&cp->mu);
    cp->stats->determinism_checks++;
    pthread_mutex_unlock(&cp->mu);
    if (res->status == KVF_RUN_OK) {
        kvf_outcome out;
        kvf_outcome_from_run(&out, KVF_RUN_OK, NULL);
        if (kvf_outcome_compare(&out, &j->c, j->o, j->lse, j->o2, j->lse2)) {
            pthread_mutex_lock(&cp->mu);
            kvf__record_finding(cp, &out, j);
            pthread_mutex_unlock(&cp->mu);
        }
    } else if (res->status != KVF_RUN_UNSUPPORTED) {
        run_failed(d, res, j);
    }
}

typedef struct slot {
    kvf__job *j;
    int recheck; /* RECHECK_DETERMINISM: the second run of a sampled case; RECHECK_CRASH: the
                    re-run that confirms a crash; RECHECK_RELATION: the relation's derived case */
} slot;

/* Keeps the runner's launches in flight (one running, the next on its way), collects them in
 * order, and hands outputs to the oracle pool. Every determinism_every-th case goes through
 * the worker a second time, with another case run in between (stale scratch and races show up
 * there), before it is judged. */
void *kvf__dispatcher_main(void *arg) {
    kvf__dispatcher *d = arg;
    struct kvf_campaign *cp = d->cp;
    const kvf_campaign_opts *o = cp->opts;
    double wait_cases = 0, wait_kernel = 0, wait_oracle = 0;
    if (o->oracle_only) { /* no kernel: straight from the generators to the oracle pool */
        kvf__job *j;
        while ((j = timed_ready_pop(cp, &wait_cases))) {
            pthread_mutex_lock(&cp->mu);
            cp->stats->cases++;
            pthread_mutex_unlock(&cp->mu);
            timed_judge_push(cp, j, &wait_oracle);
        }
        goto done;
    }
    /* Launches in the runner, oldest first: kept full so the worker never waits for us. */
    slot fifo[KVF_RUNNER_MAX_INFLIGHT];
    int n = 0;
    while (kvf_runner_has_room(d->runner) && atomic_load(&cp->stop) == KVF__RUN) {
        kvf__job *j = timed_ready_pop(cp, &wait_cases);
        if (!j) break;
        if (submit_new(d, j, &wait_kernel)) break;
        fifo[n++] = (slot){j, 0};
    }
    while (n > 0) {
        slot s0 = fifo[0];
        n--;
        memmove(fifo, fifo + 1, (size_t)n * sizeof *fifo);
        kvf__job *j = s0.j;
        kvf_run_result res;
        double t0 = kvf__now_s();
        const int second = s0.recheck == RECHECK_DETERMINISM || s0.recheck == RECHECK_RELATION;
        kvf_runner_collect(d->runner, second ? j->o2 : j->o, second ? j->lse2 : j->lse, &res);
        wait_kernel += kvf__now_s() - t0;
        if (atomic_load(&cp->stop) >= KVF__DROP) { /* interrupted: the result may be our kill */
            kvf__job_free(j);
            for (int i = 0; i < n; i++)
                if (fifo[i].j != j) kvf__job_free(fifo[i].j);
            n = 0;
            break;
        }
        int sampled =
            !s0.recheck && res.status == KVF_RUN_OK && o->determinism_every > 0 &&
            j->index % (uint64_t)o->determinism_every == (uint64_t)o->determinism_every - 1;
        if (sampled) {
            j->o2 = malloc((size_t)(kvf_case_o_elems(&j->c) + 1) * sizeof *j->o2);
            j->lse2 = malloc((size_t)(kvf_case_lse_elems(&j->c) + 1) * sizeof *j->lse2);
            sampled = j->o2 && j->lse2 && submit(d, j, &wait_kernel) == 0;
            if (sampled) fifo[n++] = (slot){j, RECHECK_DETERMINISM};
        }
        /* A case chosen for a relation runs again as its derived case, judged after it. */
        int related = !s0.recheck && !sampled && res.status == KVF_RUN_OK && j->pair &&
                      submit_derived(d, j, &wait_kernel) == 0;
        if (related) {
            fifo[n++] = (slot){j, RECHECK_RELATION};
            sampled = 1; /* judged after the second run, as a sampled case is */
        }
        /* A crash is filed only once the same case crashes again: a worker killed from outside
         * (the OOM killer, kill -9) must not become a finding that never replays. */
        int confirming = !s0.recheck && res.status == KVF_RUN_CRASH &&
                         atomic_load(&cp->stop) == KVF__RUN && submit(d, j, &wait_kernel) == 0;
        if (confirming) {
            j->first_crash = res;
            fifo[n++] = (slot){j, RECHECK_CRASH};
        }
        /* Keep it full: usually one in for the one out, more when the worker came back with
         * more lanes than the first submit could know of. */
        while (kvf_runner_has_room(d->runner) && !d->retired &&
               atomic_load(&cp->stop) == KVF__RUN) {
            kvf__job *next = timed_ready_pop(cp, &wait_cases);
            if (!next || submit_new(d, next, &wait_kernel) != 0) break;
            fifo[n++] = (slot){next, 0};
        }
        if (s0.recheck == RECHECK_RELATION) {
            kvf__relation_done(cp, j, &res);
            timed_judge_push(cp, j, &wait_oracle);
            continue;
        }
        if (s0.recheck == RECHECK_DETERMINISM) {
            recheck_done(d, j, &res);
            timed_judge_push(cp, j, &wait_oracle);
            continue;
        }
        if (s0.recheck == RECHECK_CRASH) {
            crash_confirmed(d, j, &res);
            kvf__job_free(j);
            continue;
        }
        pthread_mutex_lock(&cp->mu);
        cp->stats->cases++;
        cp->stats->kernel_s += res.kernel_s;
        if (d->device >= 0) {
            cp->stats->device[d->device].cases++;
            cp->stats->device[d->device].kernel_s += res.kernel_s;
        }
        if (res.status == KVF_RUN_UNSUPPORTED) cp->stats->unsupported++;
        pthread_mutex_unlock(&cp->mu);
        j->kernel_s = res.kernel_s;
        if (res.status == KVF_RUN_OK) snprintf(j->plan, sizeof j->plan, "%s", res.plan);
        if (res.status == KVF_RUN_OK) {
            if (!sampled) /* a sampled case is judged after its re-run */
                timed_judge_push(cp, j, &wait_oracle);
        } else if (!confirming) {
            if (res.status == KVF_RUN_UNSUPPORTED)
                run_unsupported(cp);
            else
                run_failed(d, &res, j);
            kvf__job_free(j);
        }
    }
done:
    if (!o->oracle_only) note_runner(d);
    pthread_mutex_lock(&cp->mu);
    cp->stats->wait_cases_s += wait_cases;
    cp->stats->wait_kernel_s += wait_kernel;
    cp->stats->wait_oracle_s += wait_oracle;
    if (!o->oracle_only) cp->stats->wait_worker_idle_s += kvf_runner_idle_s(d->runner);
    pthread_mutex_unlock(&cp->mu);
    if (atomic_fetch_sub(&cp->live_dispatchers, 1) == 1) {
        /* The last dispatcher out: whatever the generators still hold is dropped, and the
         * oracle pool finishes what it has. */
        kvf__campaign_stop(cp, KVF__FINISH);
        kvf__queue_close(&cp->judged);
        atomic_store(&cp->dispatcher_done, 1);
    }
    return NULL;
}
