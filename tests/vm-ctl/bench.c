// SPDX-License-Identifier: MIT
/* moecache-bench as `make bench` runs it, shortened: every figure measured, exit 0. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "harness.h"
#include "tests.h"

/*
 * The miss round trip serves requests from a forked agent process, which
 * must attach itself: a child's use of an agent file it inherited is
 * refused. A run with any figure that could not be measured exits 1.
 */
void bench_short_run(struct ct_ctx *ctx)
{
	const char *out = ct_file(ctx, "results.json");
	const char *err = ct_file(ctx, "bench.err");
	struct json_object *root, *miss, *ratio;
	char text[4096] = "";
	int fd, status;
	ssize_t n;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		CT_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, STDERR_FILENO) < 0 || dup2(fd, STDOUT_FILENO) < 0)
			_exit(126);
		execlp("moecache-bench", "moecache-bench", "--out", out, "--iters", "50",
		       "--miss-iters", "20", "--copy-mib", "4", "--client-secs", "0.1",
		       (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		CT_FAIL("waitpid: %s", strerror(errno));
	fd = open(err, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		text[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		CT_FAIL("moecache-bench: status %#x: %s", status, text);
	root = json_object_from_file(out);
	if (!root)
		CT_FAIL("%s: not JSON", out);
	if (!json_object_object_get_ex(root, "miss_rtt_vs_pipe_pingpong", &miss) ||
	    !json_object_object_get_ex(miss, "ratio", &ratio))
		CT_FAIL("no miss_rtt_vs_pipe_pingpong ratio in %s",
			json_object_to_json_string(root));
	CT_ASSERT(json_object_get_double(ratio) > 0);
	json_object_put(root);
}
