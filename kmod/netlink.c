// SPDX-License-Identifier: GPL-2.0
/*
 * moecache generic netlink family: placeholder until the family lands.
 */
#include "moecache.h"

void moecache_nl_event(enum moecache_event ev, const char *pool_name,
		       u32 arg0, u32 arg1)
{
}

int moecache_nl_init(void)
{
	return 0;
}

void moecache_nl_exit(void)
{
}
