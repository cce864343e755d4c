/* SPDX-License-Identifier: MIT */
/* The tests of moecache-ctltest (tests.c lists them). */
#ifndef MOECACHE_CTLTEST_TESTS_H
#define MOECACHE_CTLTEST_TESTS_H

#include "harness.h"

void nl_create_info(struct ct_ctx *ctx);
void nl_create_defaults(struct ct_ctx *ctx);
void nl_list(struct ct_ctx *ctx);
void nl_stats_dump(struct ct_ctx *ctx);
void nl_stats_dump_all_layers(struct ct_ctx *ctx);
void nl_stats_one_layer(struct ct_ctx *ctx);
void nl_flush(struct ct_ctx *ctx);
void nl_flush_fast_pins(struct ct_ctx *ctx);
void nl_destroy(struct ct_ctx *ctx);
void nl_events_pools(struct ct_ctx *ctx);
void nl_events_agent(struct ct_ctx *ctx);
void nl_events_eviction(struct ct_ctx *ctx);
void nl_events_miss_storm(struct ct_ctx *ctx);
void nl_unprivileged_reads(struct ct_ctx *ctx);
void nl_destroy_owner(struct ct_ctx *ctx);
void nl_flush_owner(struct ct_ctx *ctx);
void nl_create_unprivileged(struct ct_ctx *ctx);
void nl_create_root_socket_unprivileged(struct ct_ctx *ctx);
void nl_destroy_not_owner(struct ct_ctx *ctx);
void nl_flush_not_owner(struct ct_ctx *ctx);
void nl_destroy_attached(struct ct_ctx *ctx);
void nl_create_exists(struct ct_ctx *ctx);
void nl_create_bad_geometry(struct ct_ctx *ctx);
void nl_create_missing_attr(struct ct_ctx *ctx);
void nl_name_missing(struct ct_ctx *ctx);
void nl_name_oversized(struct ct_ctx *ctx);
void nl_name_unterminated(struct ct_ctx *ctx);
void nl_wrong_width(struct ct_ctx *ctx);
void nl_reply_attr_in_request(struct ct_ctx *ctx);
void nl_unknown_attr(struct ct_ctx *ctx);
void nl_out_of_range(struct ct_ctx *ctx);
void nl_stats_bad_layer(struct ct_ctx *ctx);
void nl_stats_dump_args(struct ct_ctx *ctx);
void nl_list_takes_nothing(struct ct_ctx *ctx);
void nl_unknown_command(struct ct_ctx *ctx);
void nl_header_reserved(struct ct_ctx *ctx);
void nl_info_unknown_pool(struct ct_ctx *ctx);
void nl_dumps_while_pools_change(struct ct_ctx *ctx);
void load_synthetic(struct ct_ctx *ctx);
void load_direct_block_device(struct ct_ctx *ctx);
void load_safetensors(struct ct_ctx *ctx);
void load_safetensors_index(struct ct_ctx *ctx);
void load_gguf(struct ct_ctx *ctx);
void load_local_range(struct ct_ctx *ctx);
void load_replaces_previous(struct ct_ctx *ctx);
void load_owner_unprivileged(struct ct_ctx *ctx);
void load_unprivileged(struct ct_ctx *ctx);
void load_truncated(struct ct_ctx *ctx);
void load_wrong_geometry(struct ct_ctx *ctx);
void load_record_too_small(struct ct_ctx *ctx);
void load_failure_after_begin(struct ct_ctx *ctx);
void load_killed(struct ct_ctx *ctx);
void cli_exit_codes(struct ct_ctx *ctx);
void cli_help(struct ct_ctx *ctx);
void cli_pool_lifecycle(struct ct_ctx *ctx);
void cli_create_unprivileged(struct ct_ctx *ctx);
void cli_stats(struct ct_ctx *ctx);
void cli_top(struct ct_ctx *ctx);
void cli_events(struct ct_ctx *ctx);
void cli_events_timeout(struct ct_ctx *ctx);
void cli_flush(struct ct_ctx *ctx);
void cli_bank(struct ct_ctx *ctx);
void cli_profile_save(struct ct_ctx *ctx);
void cli_profile_load(struct ct_ctx *ctx);
void cli_policy_set_signals_agent(struct ct_ctx *ctx);
void cli_policy_unknown_pool(struct ct_ctx *ctx);
void cli_policy_names(struct ct_ctx *ctx);

#endif /* MOECACHE_CTLTEST_TESTS_H */
