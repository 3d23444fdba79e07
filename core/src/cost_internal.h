/* The cost model's core-internal part: the budget check that ends kvf_recipe_check (recipe_check.c).
 * It lives with the cost model (cost.c) because its sentences name the estimates and the
 * variables that raise the budgets; recipe_check.c only decides when it runs.
 *
 * Ownership: nothing allocates. Errors: KVF_ELIMIT with one sentence when the recipe's memory
 * or work estimate is past its budget; KVF_EINVAL from kvf_limits_budgets (a budget variable
 * that is not a decimal integer in its range). */
#ifndef KVFUZZ_COST_INTERNAL_H
#define KVFUZZ_COST_INTERNAL_H

#include "kvfuzz/spec.h"

int kvf__recipe_check_budgets(const kvf_recipe *rp, const kvf_limits *lim, kvf_error *err);

#endif
