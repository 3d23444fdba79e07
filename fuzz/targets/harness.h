/* The harness shared by fuzz_decode_cpu and fuzz_decode_cuda: options, one execution (decode,
 * build, kernels, oracle, judge), the error buckets turned into libFuzzer coverage, and the
 * abort on a finding from a call site specific to its class.
 *
 * Options come as arguments starting with "--" (libFuzzer passes those through) or from the
 * environment:
 *   --kernel=K[,K]      KVF_FUZZ_KERNEL        kernels to fuzz (default: per target)
 *   --rule=R            KVF_FUZZ_RULES (R,R..) rules (default strict, fa; repeatable)
 *   --precision=MODEL   KVF_FUZZ_PRECISION     the precision model strict and fa judge every
 *                                              kernel under (default: the model each kernel
 *                                              declares, else f32; a rule naming its own keeps it)
 *   --require-overflow  KVF_FUZZ_REQUIRE_OVERFLOW=1  overflow-class violations are findings
 *   --keep-going        KVF_FUZZ_KEEP_GOING=1  report findings without aborting (replays)
 *   --allow-nonfinite   KVF_FUZZ_ALLOW_NONFINITE=1  judge cases whose inputs hold NaN/inf where
 *                                              a sequence reads them (else they are skipped)
 *   --max-work=N        KVF_FUZZ_MAX_WORK      reject cases above N tokens x Hq x D (0: none)
 *   --jobs=N            KVF_FUZZ_JOBS          oracle threads (default 1)
 * Nothing here is thread-safe: libFuzzer runs one input at a time. */
#ifndef KVFUZZ_FUZZ_HARNESS_H
#define KVFUZZ_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/mutate.h"

/* Which registered kernels a target fuzzes when none is named. */
typedef enum kvf_harness_device { KVF_HARNESS_CPU, KVF_HARNESS_CUDA } kvf_harness_device;

/* Parses options; on a bad one prints one sentence and exits with status 2. */
void kvf_harness_init(int *argc, char ***argv, kvf_harness_device device, const char *target);

/* One input. Returns 0, or -1 for an input that is not a usable case (libFuzzer then keeps it
 * out of the corpus). Aborts on a finding unless keep-going. */
int kvf_harness_exec(const uint8_t *data, size_t size);

/* Findings seen in keep-going mode (the regression driver's exit status). */
int kvf_harness_findings(void);

/* The limits a case must fit (the mutator keeps to them). */
const kvf_limits *kvf_harness_case_limits(void);
const kvf_mutate_limits *kvf_harness_mutate_limits(void);

/* The custom mutator builds each case it emits to check it; it hands the built case over so
 * the execution that follows need not build it again. Takes ownership of *c. */
void kvf_harness_stash(const uint8_t *data, size_t size, kvf_case *c);

#endif
