/* fuzz_decode_cuda: on every case the input decodes to, a GPU kernel (cuda unless --kernel=K or
 * KVF_FUZZ_KERNEL names another) stays within the tolerance rules of the MPFR oracle. */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    kvf_harness_init(argc, argv, KVF_HARNESS_CUDA, "fuzz_decode_cuda");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return kvf_harness_exec(data, size);
}
