// Production split-KV kernel instances for FP8 caches (no bug), head dim 256, groups 1..16
// (decode.cuh). One file per head dim so the instances compile in parallel.
#include "decode.cuh"

KVF_SPLIT_TABLE_FP8(256);
