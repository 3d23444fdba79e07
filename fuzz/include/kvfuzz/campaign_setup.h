/* What a campaign needs before it runs, decided from a command line (`kvfuzz fuzz`): the kernel
 * when none is named (also replay's), a seed drawn from the clock, a tag that fits one line, the
 * campaign's command line for the statistics' provenance, the default statistics file, and the
 * corpus and findings folders checked and made. The campaign itself is kvfuzz/campaign.h.
 *
 * Ownership: kvf_campaign_command_line returns a malloc'd string the caller frees; everything
 * else writes into the caller's buffers or returns static descriptors. Errors: 0 or a negative
 * KVF_E* code with one sentence in err: KVF_EINVAL (a corpus that is not a folder), KVF_EIO (a
 * findings folder that cannot be made or written). */
#ifndef KVFUZZ_CAMPAIGN_SETUP_H
#define KVFUZZ_CAMPAIGN_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/error.h"
#include "kvfuzz/kernel.h"

/* The kernel a run gets when none is named: cuda when a GPU is usable (asked in a child
 * process, so that this one stays fork-safe for the kernel workers), else cpu-splitkv. */
const kvf_kernel *kvf_default_kernel(void);

/* A campaign seed when none is given: the clock and the process id, so that campaigns started
 * together differ. */
uint64_t kvf_campaign_clock_seed(void);

/* Whether a --tag value can be one line of the summary and of the report's provenance: 1 to 200
 * characters, none of them a control character. */
int kvf_campaign_tag_ok(const char *tag);

/* The statistics' provenance ("command"): "kvfuzz" and the arguments argv[0..argc) (argv[0] the
 * subcommand), with " --seed N" added when the seed was drawn rather than given, so that among
 * many runs merged into one report (the tasks of a batch array, say) each can be told apart and
 * its random choices repeated. Arguments that are not plain words are single-quoted as a POSIX
 * shell reads them. NULL when memory runs out. */
char *kvf_campaign_command_line(int argc, char *const *argv, int seed_given, uint64_t seed);

/* The default statistics file, one per campaign so that campaigns sharing a findings folder keep
 * their own (`kvfuzz report DIR` merges them): DIR/stats-HOST-PID-START.json, the host name kept
 * to letters, digits, '-' and '.' (others become '_'), START the UTC time as 20260101T000000Z. */
void kvf_campaign_stats_path(char *out, size_t size, const char *dir);

/* A corpus path that exists and is not a folder: KVF_EINVAL, "DIR is not a folder". A missing
 * one is fine (the campaign creates it). */
int kvf_campaign_check_corpus(const char *dir, kvf_error *err);

/* Makes the findings folder (mkdir -p) and checks that a file can be written there; then removes
 * the temporary files an earlier campaign left when it was killed mid-write (older than a
 * minute) there and in the corpus folder (NULL: none), their count in *stale. */
int kvf_campaign_prepare_dirs(const char *findings_dir, const char *corpus_dir, int *stale,
                              kvf_error *err);

#endif
