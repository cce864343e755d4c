// SPDX-License-Identifier: MIT
/*
 * The fill decisions of moecached (agent/fill.h): which copy class a fill
 * of each kind goes to its engine in, how it is committed, and what
 * becomes of a finished copy. The pool's use of them, end to end:
 * tests/vm-agent (cpu_admission_*).
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "agent/fill.h"

Test(fill, basic_cpu_admission_yields_and_commits_as_demand,
     .description = "a CPU admission is copied in the class that yields to demand copies and is "
		    "committed without MOECACHE_FILL_PREFETCH")
{
	cr_expect_eq(agent_fill_copy_flags(AGENT_FILL_CPU), MOECACHE_FILL_PREFETCH);
	cr_expect_eq(agent_fill_commit_flags(AGENT_FILL_CPU), 0);
}

Test(fill, basic_demand_copied_first_prefetch_committed_as_one,
     .description = "a demand copy is in the first class; a prefetch yields and is committed as "
		    "a prefetch")
{
	cr_expect_eq(agent_fill_copy_flags(AGENT_FILL_DEMAND), 0);
	cr_expect_eq(agent_fill_commit_flags(AGENT_FILL_DEMAND), 0);
	cr_expect_eq(agent_fill_copy_flags(AGENT_FILL_PREFETCH), MOECACHE_FILL_PREFETCH);
	cr_expect_eq(agent_fill_commit_flags(AGENT_FILL_PREFETCH), MOECACHE_FILL_PREFETCH);
}

Test(fill, basic_asked_since_mark,
     .description = "a client asked for the expert when its access counter moved, across a wrap")
{
	cr_expect_not(agent_fill_asked_since(7, 7));
	cr_expect(agent_fill_asked_since(7, 8));
	cr_expect(agent_fill_asked_since(UINT32_MAX, 0));
}

struct finished_case {
	enum agent_fill_kind kind;
	int status;
	bool asked;
	enum agent_fill_next want;
	const char *what;
};

static const struct finished_case finished_cases[] = {
    {AGENT_FILL_DEMAND, 0, false, AGENT_FILL_COMMIT, "a whole demand copy"},
    {AGENT_FILL_CPU, 0, true, AGENT_FILL_COMMIT, "a whole CPU admission, asked for"},
    {AGENT_FILL_PREFETCH, 0, false, AGENT_FILL_COMMIT, "a whole prefetch"},
    {AGENT_FILL_DEMAND, -EIO, false, AGENT_FILL_ABORT, "a failed demand copy"},
    {AGENT_FILL_CPU, -EIO, true, AGENT_FILL_ABORT, "a failed CPU admission"},
    {AGENT_FILL_DEMAND, -ECANCELED, true, AGENT_FILL_ABORT, "a demand copy is never cancelled"},
    {AGENT_FILL_NONE, -ECANCELED, false, AGENT_FILL_ABORT, "a copy the pool did not start"},
    {AGENT_FILL_CPU, -ECANCELED, false, AGENT_FILL_DROPPED,
     "a CPU admission cancelled for a starved demand is dropped, not an error"},
    {AGENT_FILL_CPU, -ECANCELED, true, AGENT_FILL_RECOPY,
     "a CPU admission a client asked for is copied again as a demand (promotion)"},
    {AGENT_FILL_PREFETCH, -ECANCELED, false, AGENT_FILL_CANCELLED,
     "a cancelled prefetch gives its slot back"},
    {AGENT_FILL_PREFETCH, -ECANCELED, true, AGENT_FILL_RECOPY,
     "a cancelled prefetch a client asked for is not aborted under the client"},
};

Test(fill, basic_finished_table,
     .description = "what becomes of a finished copy, by kind, status and whether a client asked")
{
	for (size_t i = 0; i < sizeof(finished_cases) / sizeof(finished_cases[0]); i++) {
		const struct finished_case *c = &finished_cases[i];

		cr_expect_eq(agent_fill_finished(c->kind, c->status, c->asked), c->want, "%s",
			     c->what);
	}
}
