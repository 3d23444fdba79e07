/* The statistics of a multi-threaded run (a fuzz campaign): one shard of statistics per judging
 * thread, so that the threads count without contending, drained into the run's statistics and
 * written atomically at most every flush interval and at the end.
 *
 * Per judged case, from the thread that judges it:
 *
 *     kvf_stats_sink_case_begin(sink, thread, kernel, rules, nrules, c, &ref);
 *     for each rule r:
 *         kvf_stats_scope *sc = kvf_stats_sink_rule_begin(sink, thread, r);
 *         kvf_judge_observe_runs(&v, &rules[r], c, oracle, o, lse,
 *                                sc ? kvf_stats_observe_element : NULL,
 *                                sc ? kvf_stats_observe_exact_run : NULL, sc, &err);
 *         kvf_stats_sink_rule_end(sink, thread, sc, ok ? &v : NULL);
 *
 * so each element is counted as the judge computes it and every case is judged once.
 *
 * Threads: calls with the same `thread` must not overlap; different threads may call at the
 * same time. Ownership: the sink copies what it keeps (the case's bytes, names); rules, c and
 * ref are borrowed during the calls that take them, and until the case's last rule_end.
 * Errors: create returns KVF_EINVAL, KVF_ENOMEM or KVF_EIO (the path cannot be written) with
 * one sentence; later write failures are reported once on stderr and the run goes on; memory
 * lost while counting marks the statistics incomplete. */
#ifndef KVFUZZ_STATS_SINK_H
#define KVFUZZ_STATS_SINK_H

#include "kvfuzz/stats.h"

typedef struct kvf_stats_sink kvf_stats_sink;

/* A sink for up to `threads` judging threads, writing to path; writes the (empty) statistics
 * once, so that a path that cannot be written fails before any work. */
int kvf_stats_sink_create(kvf_stats_sink **out, const kvf_stats_opts *opts, const char *path,
                          int threads, kvf_error *err);
void kvf_stats_sink_free(kvf_stats_sink *s); /* NULL is fine */

/* Starts one case on `thread`: counts a run of the kernel, remembers the case and its identity
 * (ref's bytes are copied) for the rules that follow, and writes the file when the flush
 * interval has passed. */
void kvf_stats_sink_case_begin(kvf_stats_sink *s, int thread, const char *kernel,
                               const kvf_rule *rules, int nrules, const kvf_case *c,
                               const kvf_stats_case *ref);

/* The observer context for rule r of the current case (NULL when nothing is counted: memory
 * ran out). The thread's shard stays locked until kvf_stats_sink_rule_end. */
kvf_stats_scope *kvf_stats_sink_rule_begin(kvf_stats_sink *s, int thread, int rule);
/* Counts the verdict (NULL: the judge failed, nothing is counted) and unlocks the shard. */
void kvf_stats_sink_rule_end(kvf_stats_sink *s, int thread, kvf_stats_scope *scope,
                             const kvf_verdict *v);

/* Counts a kernel run that was not judged (KVF_STATS_UNSUPPORTED, or a run-level finding
 * class such as a crash or a hang; kvf_stats_count_run lists them). Any thread may call: these
 * are rare, and go straight into the run's statistics under the sink's write lock. */
void kvf_stats_sink_count_run(kvf_stats_sink *s, const char *kernel, int outcome);

/* Drains every shard and writes the file; call when no thread counts any more. Returns the
 * error of the write (KVF_EIO), or KVF_ENOMEM when the statistics are incomplete. */
int kvf_stats_sink_finish(kvf_stats_sink *s, kvf_error *err);

/* The run's per-device figures (kvf_stats_set_devices), written with the next flush. */
int kvf_stats_sink_set_devices(kvf_stats_sink *s, const kvf_stats_device *d, size_t n,
                               kvf_error *err);

/* The run's statistics (complete after kvf_stats_sink_finish). */
const kvf_stats *kvf_stats_sink_stats(const kvf_stats_sink *s);

#endif
