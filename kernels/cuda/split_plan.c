/* The production split-KV plan (split_plan.h): split_plan_algo.h with no mutant. Plain C, built
 * in every configuration (with or without CUDA) so that its unit tests run without nvcc. */
#define KVF_MUT_ACTIVE KVF__MUT_NONE
#include "split_plan.h" /* the declarations the definitions must match */
#include "split_plan_algo.h"
