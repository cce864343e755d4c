// SPDX-License-Identifier: GPL-2.0
/*
 * moecache-fuzz --seed S --ops N [--lanes L] [--prefix NAME] [--trace]
 * moecache-fuzz            (no arguments: the regression runs, as a VM suite)
 *
 * Runs N operations in all, split between L processes (lanes): lanes 0 and
 * 1 run as root, the others as uid 1000 and 1001 without capabilities. At
 * the end every file is closed, so each pool of the run must be destroyable
 * and the driver's pool count must be back where it was. Exit status 0: no
 * report; 1: reports (on stderr); 2: bad usage or setup.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

static const char usage[] =
    "usage: moecache-fuzz   (no arguments: the regression runs, as a VM test suite)\n"
    "       moecache-fuzz --seed S --ops N [--lanes L] [--prefix NAME] [--max-reports K] "
    "[--no-bad-out] [--no-netlink] [--no-fast-pins] [--trace]\n"
    "  --seed S         the generator's seed (the run is fixed by it)\n"
    "  --ops N          operations in all lanes together\n"
    "  --lanes L        processes issuing them (1..8, default 4; 1 also checks pins,\n"
    "                   requests and counters exactly)\n"
    "  --prefix NAME    pools are NAME-0..NAME-3 (default fz<seed>)\n"
    "  --max-reports K  a lane stops after K reports (default 10)\n"
    "  --no-bad-out     never pass a reply pointer the kernel cannot write (EVICT,\n"
    "                   ATTACH, ACQUIRE and PREFETCH change the pool before failing)\n"
    "  --no-netlink     no netlink messages: the sequences of the fuzzer before it sent\n"
    "                   them (the regression seeds run with it)\n"
    "  --no-fast-pins   no fast pins nor REPORT: the sequences of the fuzzer before them\n"
    "  --trace          print every operation\n";

/* Per-lane results, in memory shared with the parent. */
struct lane_result {
	uint64_t counts[FZ_OP_SLOTS];
	uint64_t ok_counts[FZ_OP_SLOTS];
	uint64_t child_ops;
	uint64_t excused;
	unsigned int reports;
	int done;
};

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno || !*s || *end ? -EINVAL : 0;
}

static int setup_junk(struct fz_config *c)
{
	long page = c->page;
	uint8_t *area;
	int memfd;

	/* [rw][none][ro view][spare]; the ro view shows ro_src's memfd page. */
	area = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return -errno;
	c->rw = area;
	c->none = area + page;
	if (mprotect(c->none, page, PROT_NONE) < 0)
		return -errno;
	memfd = memfd_create("moecache-fuzz-ro", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, page) < 0)
		return -errno;
	c->ro = mmap(area + 2 * page, page, PROT_READ, MAP_SHARED | MAP_FIXED, memfd, 0);
	c->ro_src = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	close(memfd);
	if (c->ro == MAP_FAILED || c->ro_src == MAP_FAILED)
		return -errno;
	return 0;
}

static int drop_privileges(uid_t uid, gid_t gid)
{
	int cap;

	for (cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return -errno;
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return -errno;
	return 0;
}

static void lane_main(const struct fz_config *shared_cfg, unsigned int id, uint64_t ops,
		      struct lane_result *res)
{
	struct fz_lane *l = calloc(1, sizeof(*l));
	struct fz_config *cfg = malloc(sizeof(*cfg));
	unsigned int i;
	int ret;

	if (!l || !cfg)
		_exit(2);
	/* Each lane has its own junk pages: the read-only one is written before each use. */
	*cfg = *shared_cfg;
	if (setup_junk(cfg)) {
		fprintf(stderr, "moecache-fuzz: lane %u: setting up memory: %s\n", id,
			fz_errname(errno));
		_exit(2);
	}
	l->cfg = cfg;
	l->id = id;
	l->privileged = id < 2;
	l->uid = id < 2 ? 0 : 1000 + id % 2;
	l->gid = l->uid;
	l->nl_fd = -1;
	for (i = 0; i < FZ_MAX_FDS; i++) {
		l->fds[i].fd = -1;
		l->fds[i].bank_fd = -1;
	}
	fz_rng_seed(l, cfg->seed, id);
	if (!l->privileged) {
		ret = drop_privileges(l->uid, l->gid);
		if (ret) {
			fprintf(stderr, "moecache-fuzz: lane %u: dropping privileges: %s\n", id,
				fz_errname(-ret));
			_exit(2);
		}
	}
	fz_lane_run(l, ops);
	fz_lane_close_all(l);
	memcpy(res->counts, l->counts, sizeof(res->counts));
	memcpy(res->ok_counts, l->ok_counts, sizeof(res->ok_counts));
	res->child_ops = l->child_ops;
	res->reports = l->reports;
	res->excused = l->excused;
	res->done = 1;
	_exit(l->reports ? 1 : 0);
}

/* After every file closed: each pool of the run must go, and nothing stays. */
static unsigned int final_checks(const struct fz_config *cfg, uint32_t n_pools_before)
{
	struct moecache_pool_name req;
	struct moecache_info info;
	unsigned int k, reports = 0;
	int fd = open(MOECACHE_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "moecache-fuzz: open: %s\n", fz_errname(errno));
		return 1;
	}
	for (k = 0; k < FZ_MAX_POOLS; k++) {
		memset(&req, 0, sizeof(req));
		fz_pool_name(cfg, k, req.name);
		if (ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &req) < 0 && errno != ENOENT) {
			fprintf(
			    stderr,
			    "moecache-fuzz: REPORT seed %llu: pool %s cannot be destroyed after "
			    "every file was closed: %s\n",
			    (unsigned long long)cfg->seed, req.name, fz_errname(errno));
			reports++;
		}
	}
	memset(&info, 0, sizeof(info));
	if (ioctl(fd, MOECACHE_IOC_GET_INFO, &info) < 0 || info.n_pools != n_pools_before) {
		fprintf(stderr, "moecache-fuzz: REPORT seed %llu: %u pools at the end, %u before\n",
			(unsigned long long)cfg->seed, info.n_pools, n_pools_before);
		reports++;
	}
	close(fd);
	return reports;
}

/*
 * Runs of the fuzzer that once found a driver bug (on the driver of commit
 * 9316423), named after their seed. With one lane a run is fixed by its
 * seed for this version of the generator (ops.c): after changing the
 * generator, check with --trace that each still reaches its operation, or
 * find a new seed.
 */
static const struct fz_regression {
	const char *name;
	uint64_t seed, ops;
	unsigned int lanes;
	bool no_netlink;   /* found before the fuzzer sent netlink: keep that sequence */
	bool no_fast_pins; /* found before fast pins and REPORT: keep that sequence */
	const char *found;
} regressions[] = {
    {"seed-1", 1, 400, 1, true, true,
     "op 155: PREFETCH refused a non-zero n_queued (an out field)"},
    {"seed-4", 4, 900, 1, true, true,
     "op 267: ACQUIRE with an unwritable slots list counted misses, then EFAULT; "
     "op 807: ATTACH with a read-only argument attached the file, then EFAULT"},
    {"seed-6", 6, 700, 1, true, true,
     "op 636: EVICT with a read-only argument evicted, then EFAULT"},
    {"seed-334", 334, 65000, 1, false, true,
     "op 64902: two flag defects made NLM_F_DUMP, and a dump was taken for a defect "
     "(the fuzzer's own bug)"},
    /* Longer runs of every operation, netlink included. */
    {"seed-1000", 1000, 20000, 1, false, false, NULL},
    {"seed-1001", 1001, 40000, 4, false, false, NULL},
};

/* One run: L lanes, then the final checks. 0: clean; 1: reports; 2: setup. */
static int fuzz_run(struct fz_config *cfg)
{
	struct lane_result *res;
	struct timespec t0, t1;
	uint64_t total = 0, ok = 0, excused = 0;
	unsigned int i, op, reports = 0;
	pid_t pids[8];
	double secs;
	int fd, status;

	if (!cfg->prefix[0])
		snprintf(cfg->prefix, sizeof(cfg->prefix), "fz%llu",
			 (unsigned long long)(cfg->seed % 100000000ull));
	cfg->strict = cfg->lanes == 1;
	cfg->page = sysconf(_SC_PAGESIZE);
	fd = open(MOECACHE_DEVICE, O_RDWR | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, MOECACHE_IOC_GET_INFO, &cfg->info) < 0) {
		fprintf(stderr, "moecache-fuzz: %s: %s\n", MOECACHE_DEVICE, fz_errname(errno));
		return 2;
	}
	close(fd);
	res = mmap(NULL, sizeof(*res) * cfg->lanes, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED)
		return 2;
	cfg->flush_gen = mmap(NULL, sizeof(*cfg->flush_gen), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (cfg->flush_gen == MAP_FAILED)
		return 2;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	fflush(NULL);
	for (i = 0; i < cfg->lanes; i++) {
		uint64_t share = cfg->ops / cfg->lanes + (i < cfg->ops % cfg->lanes);

		pids[i] = fork();
		if (pids[i] < 0) {
			perror("moecache-fuzz: fork");
			return 2;
		}
		if (pids[i] == 0)
			lane_main(cfg, i, share, &res[i]);
	}
	for (i = 0; i < cfg->lanes; i++) {
		if (waitpid(pids[i], &status, 0) < 0) {
			perror("moecache-fuzz: waitpid");
			return 2;
		}
		if (WIFSIGNALED(status)) {
			fprintf(stderr,
				"moecache-fuzz: REPORT seed %llu: lane %u died of signal %d\n",
				(unsigned long long)cfg->seed, i, WTERMSIG(status));
			reports++;
		} else if (WEXITSTATUS(status) == 2) {
			return 2;
		} else if (!res[i].done || WEXITSTATUS(status)) {
			reports += res[i].reports ? res[i].reports : 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	reports += final_checks(cfg, cfg->info.n_pools);

	for (op = 0; fz_op_name(op); op++) {
		uint64_t n = 0, n_ok = 0;

		for (i = 0; i < cfg->lanes; i++) {
			n += res[i].counts[op];
			n_ok += res[i].ok_counts[op];
		}
		total += n;
		ok += n_ok;
		if (cfg->trace || getenv("MOECACHE_FUZZ_STATS"))
			printf("  %-16s %10llu (%llu succeeded)\n", fz_op_name(op),
			       (unsigned long long)n, (unsigned long long)n_ok);
	}
	for (i = 0; i < cfg->lanes; i++) {
		total += res[i].child_ops;
		excused += res[i].excused;
	}
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("moecache-fuzz: seed %llu: %llu operations (%llu checked successes) in %u lanes, "
	       "%.1f s, %.0f ops/s, %llu unchecked under another lane's FLUSH, %u reports\n",
	       (unsigned long long)cfg->seed, (unsigned long long)total, (unsigned long long)ok,
	       cfg->lanes, secs, secs > 0 ? (double)total / secs : 0.0, (unsigned long long)excused,
	       reports);
	munmap(res, sizeof(*res) * cfg->lanes);
	return reports ? 1 : 0;
}

/* No arguments: the regressions and two fresh runs, as a suite of the VM tests. */
static int fuzz_suite(void)
{
	const size_t n = sizeof(regressions) / sizeof(regressions[0]);
	unsigned int passed = 0, failed = 0;
	size_t i;
	int status;
	pid_t pid;

	printf("TAP version 13\n1..%zu\n", n);
	for (i = 0; i < n; i++) {
		const struct fz_regression *r = &regressions[i];
		struct fz_config cfg = {.seed = r->seed,
					.ops = r->ops,
					.lanes = r->lanes,
					.max_reports = 10,
					.no_netlink = r->no_netlink,
					.no_fast_pins = r->no_fast_pins};

		fflush(NULL);
		pid = fork();
		if (pid == 0)
			_exit(fuzz_run(&cfg));
		if (pid < 0 || waitpid(pid, &status, 0) < 0)
			status = 2 << 8;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("ok %zu %s\n", i + 1, r->name);
			passed++;
		} else {
			printf("not ok %zu %s%s%s\n", i + 1, r->name,
			       r->found ? " # found before: " : "", r->found ? r->found : "");
			failed++;
		}
	}
	printf("moecache-fuzz: %u passed, %u failed, 0 skipped\n", passed, failed);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"seed", required_argument, NULL, 's'},
	    {"ops", required_argument, NULL, 'n'},
	    {"lanes", required_argument, NULL, 'l'},
	    {"prefix", required_argument, NULL, 'p'},
	    {"max-reports", required_argument, NULL, 'm'},
	    {"trace", no_argument, NULL, 't'},
	    {"no-bad-out", no_argument, NULL, 'o'},
	    {"no-netlink", no_argument, NULL, 'N'},
	    {"no-fast-pins", no_argument, NULL, 'F'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct fz_config cfg = {.lanes = 4, .max_reports = 10};
	bool have_seed = false, have_ops = false;
	uint64_t v;
	int c;

	if (argc == 1)
		return fuzz_suite();
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (parse_u64(optarg, &cfg.seed))
				goto bad_usage;
			have_seed = true;
			break;
		case 'n':
			if (parse_u64(optarg, &cfg.ops))
				goto bad_usage;
			have_ops = true;
			break;
		case 'l':
			if (parse_u64(optarg, &v) || v < 1 || v > 8)
				goto bad_usage;
			cfg.lanes = (unsigned int)v;
			break;
		case 'p':
			if (strlen(optarg) >= sizeof(cfg.prefix) - 4)
				goto bad_usage;
			snprintf(cfg.prefix, sizeof(cfg.prefix), "%s", optarg);
			break;
		case 'm':
			if (parse_u64(optarg, &v) || v < 1)
				goto bad_usage;
			cfg.max_reports = (unsigned int)v;
			break;
		case 't':
			cfg.trace = true;
			break;
		case 'o':
			cfg.no_bad_out = true;
			break;
		case 'N':
			cfg.no_netlink = true;
			break;
		case 'F':
			cfg.no_fast_pins = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			goto bad_usage;
		}
	}
	if (!have_seed || !have_ops || optind != argc)
		goto bad_usage;
	return fuzz_run(&cfg);

bad_usage:
	fputs(usage, stderr);
	return 2;
}
