/* fuzz_decode_cpu: on every case the input decodes to, the CPU kernels' o and lse stay within
 * the tolerance rules (strict by default) of the MPFR oracle's correctly rounded answer. */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    kvf_harness_init(argc, argv, KVF_HARNESS_CPU, "fuzz_decode_cpu");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return kvf_harness_exec(data, size);
}
