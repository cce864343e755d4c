/* SPDX-License-Identifier: MIT */
/* moecache-bench --policy: the cost of a replacement policy per access, natively. */
#ifndef MOECACHE_TOOLS_BENCH_POLICY_H
#define MOECACHE_TOOLS_BENCH_POLICY_H

/* argv[0] is "--policy". Returns the process exit status (0, 1 on failure, 2 on usage). */
int bench_policy_main(int argc, char **argv);

#endif /* MOECACHE_TOOLS_BENCH_POLICY_H */
