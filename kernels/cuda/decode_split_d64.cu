// Split-KV kernel instances for head dim 64, groups 1..16 (see decode.cuh). One file per head
// dim so the instances compile in parallel.
#include "decode.cuh"

KVF_SPLIT_TABLE(64);
