// SPDX-License-Identifier: MIT
/*
 * moecache._moecache: the CPython binding of libmoecache (the public API of
 * lib/include/libmoecache.h and nothing else).
 *
 * A Client is one handle attached to one pool as a client. Its bank and host
 * pages are exported as Region objects: read-only buffers (the buffer
 * protocol, so memoryview and numpy.frombuffer see them) and DLPack capsules
 * (torch.from_dlpack), device memory for a CUDA or ROCm bank.
 *
 * A pool of several banks (tiers, devices) is exported bank by bank
 * (Client.banks), and Client.route groups the experts of an acquire by the
 * bank they are resident in (libmoecache's route, not a copy of it).
 *
 * Lifetime: a Region keeps its Client alive, and every exported buffer or
 * capsule is counted. close() drops every pin at once; the handle itself
 * (and so the mappings) is closed when the last export is released, so no
 * view is ever left pointing at unmapped memory.
 *
 * Threads: a waiting acquire releases the GIL. close() while another thread
 * is inside such a call is refused (EBUSY) rather than freeing the handle
 * under it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmoecache.h>

#include "dlpack_abi.h"

/* ---- errors ------------------------------------------------------------- */

/* Raises OSError(err, "<what>: <strerror>[: <hint>]"); returns NULL. */
static PyObject *raise_errno(int err, const char *what, const char *hint)
{
	char msg[512];
	PyObject *args;

	if (err < 0)
		err = -err;
	snprintf(msg, sizeof(msg), "%s: %s%s%s", what, strerror(err), hint && *hint ? ": " : "",
		 hint ? hint : "");
	args = Py_BuildValue("(is)", err, msg);
	if (args) {
		/* OSError's constructor picks the subclass (FileNotFoundError...). */
		PyErr_SetObject(PyExc_OSError, args);
		Py_DECREF(args);
	}
	return NULL;
}

/* ---- Client ------------------------------------------------------------- */

typedef struct {
	PyObject_HEAD struct moecache *mc;
	char pool_name[MOECACHE_NAME_LEN];
	struct moecache_pool_info pool; /* a copy: valid after close */
	uint32_t max_batch;
	pid_t pid;	 /* the process that attached: handles do not survive fork */
	bool fast_pins;
	bool closed;	 /* close() was called; mc stays open while exports > 0 */
	int busy;	 /* calls in flight with the GIL released */
	long exports;	 /* buffers and capsules handed out over bank and host */
	bool bank_ok;	 /* bank imported */
	struct moecache_bank_map bank;
	struct moecache_bank_map *banks; /* every bank, once Client.banks imported them */
	uint32_t n_banks;		 /* entries of banks imported */
} ClientObject;

static PyTypeObject ClientType;
static PyTypeObject RegionType;
static PyTypeObject PoolInfoType;

static void client_shutdown(ClientObject *c)
{
	if (c->mc && c->pid != getpid()) {
		/*
		 * A forked child's copy: closing would act on the parent's file
		 * (a fast-pin handle reports the parent's hits on close). The
		 * descriptors and mappings go when the child exits.
		 */
		c->mc = NULL;
		c->bank_ok = false;
		c->n_banks = 0;
		return;
	}
	if (c->bank_ok) {
		moecache_bank_release_flush(&c->bank);
		moecache_bank_unimport(&c->bank);
		c->bank_ok = false;
	}
	for (uint32_t b = 0; b < c->n_banks; b++) {
		moecache_bank_release_flush(&c->banks[b]);
		moecache_bank_unimport(&c->banks[b]);
	}
	c->n_banks = 0;
	PyMem_Free(c->banks);
	c->banks = NULL;
	if (c->mc) {
		moecache_close(c->mc);
		c->mc = NULL;
	}
}

/* The check every call makes first; -1 with an exception set. */
static int client_usable(ClientObject *c)
{
	if (!c->mc || c->closed) {
		PyErr_SetString(PyExc_ValueError, "operation on a closed moecache.Client");
		return -1;
	}
	if (c->pid != getpid()) {
		PyErr_SetString(PyExc_RuntimeError,
				"a moecache.Client does not survive fork: open a new one in the child");
		return -1;
	}
	return 0;
}

static void export_put(ClientObject *c)
{
	if (--c->exports == 0 && c->closed)
		client_shutdown(c);
}

static PyObject *client_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
	ClientObject *c = (ClientObject *)type->tp_alloc(type, 0);

	if (c)
		c->pid = getpid();
	return (PyObject *)c;
}

static const char *attach_hint(int err, const char *pool, const char *device, char *buf,
			       size_t len)
{
	switch (err) {
	case ENOENT:
		snprintf(buf, len, "no pool named '%s' (moecachectl pool list)", pool);
		break;
	case EACCES:
		snprintf(buf, len, "no read permission on pool '%s'", pool);
		break;
	case EINVAL:
		snprintf(buf, len, "'%s' is not a valid pool name, or the driver refused the flags",
			 pool);
		break;
	default:
		buf[0] = 0;
	}
	(void)device;
	return buf;
}

static int client_init(ClientObject *c, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"pool", "fast_pins", "device", NULL};
	const char *pool, *device = NULL;
	int fast_pins = 1, ret;
	struct moecache *mc = NULL;
	struct moecache_info info;
	char what[160], hint[200];
	Py_ssize_t pool_len;
	PyThreadState *ts;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|pz:Client", kwlist, &pool, &fast_pins,
					 &device))
		return -1;
	pool_len = (Py_ssize_t)strlen(pool);
	if (c->mc) {
		PyErr_SetString(PyExc_RuntimeError, "moecache.Client.__init__ called twice");
		return -1;
	}
	if (pool_len == 0 || pool_len >= MOECACHE_NAME_LEN) {
		snprintf(what, sizeof(what), "pool name '%.80s'", pool);
		snprintf(hint, sizeof(hint), "a name has 1 to %d characters", MOECACHE_NAME_LEN - 1);
		raise_errno(EINVAL, what, hint);
		return -1;
	}
	ts = PyEval_SaveThread();
	ret = moecache_open(device, &mc);
	PyEval_RestoreThread(ts);
	if (ret) {
		snprintf(what, sizeof(what), "open %s", device ? device : MOECACHE_DEVICE);
		raise_errno(ret, what,
			    -ret == ENOENT ? "no such device: is the moecache module loaded?" : NULL);
		return -1;
	}
	ret = moecache_get_info(mc, &info);
	if (!ret) {
		ts = PyEval_SaveThread();
		ret = moecache_attach_flags(mc, pool, MOECACHE_ROLE_CLIENT,
					    fast_pins ? MOECACHE_ATTACH_FAST_PINS : 0);
		PyEval_RestoreThread(ts);
	}
	if (ret) {
		moecache_close(mc);
		snprintf(what, sizeof(what), "attach to pool '%s'", pool);
		raise_errno(ret, what, attach_hint(-ret, pool, device, hint, sizeof(hint)));
		return -1;
	}
	c->mc = mc;
	c->pool = *moecache_pool(mc);
	snprintf(c->pool_name, sizeof(c->pool_name), "%s", pool);
	c->max_batch = info.max_batch;
	c->fast_pins = fast_pins;
	c->pid = getpid();
	return 0;
}

static void client_dealloc(ClientObject *c)
{
	/* Regions and capsules hold a reference: none is left here. */
	client_shutdown(c);
	Py_TYPE(c)->tp_free((PyObject *)c);
}

/* ---- id lists ----------------------------------------------------------- */

struct id_list {
	uint32_t *ids;
	uint32_t n;
};

static void id_list_free(struct id_list *l)
{
	PyMem_Free(l->ids);
	l->ids = NULL;
	l->n = 0;
}

/* One integer of a list argument; negative ones are -1 (NONE) only if allowed. */
static int id_value(long long v, const char *what, Py_ssize_t i, bool allow_none, uint32_t *out)
{
	if (allow_none && v == -1) {
		*out = MOECACHE_NONE;
		return 0;
	}
	if (v < 0 || v > (long long)UINT32_MAX - 1) {
		PyErr_Format(PyExc_ValueError, "%s[%zd] = %lld is out of range", what, i, v);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

/* A 1-D integer buffer (numpy array, array.array, memoryview). */
static int id_list_from_buffer(PyObject *obj, const char *what, bool allow_none,
			       struct id_list *l)
{
	Py_buffer view;
	const char *fmt;
	char code;
	bool is_signed;
	int ret = -1;

	if (PyObject_GetBuffer(obj, &view, PyBUF_FORMAT | PyBUF_STRIDES) < 0)
		return -1;
	fmt = view.format ? view.format : "B";
	if (*fmt == '@' || *fmt == '=' || *fmt == '<')
		fmt++;
	code = fmt[0];
	if (view.ndim != 1 || !code || fmt[1] || !strchr("bBhHiIlLqQnN", code) ||
	    view.itemsize > 8) {
		PyErr_Format(PyExc_TypeError, "%s: a buffer of integers of one dimension is needed "
					      "(got format '%s', %d dimensions)",
			     what, view.format ? view.format : "B", view.ndim);
		goto out;
	}
	is_signed = strchr("bhilqn", code) != NULL;
	if (view.shape[0] > UINT32_MAX) {
		PyErr_Format(PyExc_OverflowError, "%s: too many entries", what);
		goto out;
	}
	l->n = (uint32_t)view.shape[0];
	l->ids = PyMem_Malloc((l->n ? l->n : 1) * sizeof(uint32_t));
	if (!l->ids) {
		PyErr_NoMemory();
		goto out;
	}
	for (Py_ssize_t i = 0; i < view.shape[0]; i++) {
		const char *p = (const char *)view.buf + i * view.strides[0];
		long long v;

		if (is_signed) {
			int64_t s = 0;

			switch (view.itemsize) {
			case 1: s = *(const int8_t *)p; break;
			case 2: { int16_t t; memcpy(&t, p, 2); s = t; break; }
			case 4: { int32_t t; memcpy(&t, p, 4); s = t; break; }
			default: memcpy(&s, p, 8); break;
			}
			v = s;
		} else {
			uint64_t u = 0;

			switch (view.itemsize) {
			case 1: u = *(const uint8_t *)p; break;
			case 2: { uint16_t t; memcpy(&t, p, 2); u = t; break; }
			case 4: { uint32_t t; memcpy(&t, p, 4); u = t; break; }
			default: memcpy(&u, p, 8); break;
			}
			v = u > (uint64_t)INT64_MAX ? INT64_MAX : (long long)u;
		}
		if (id_value(v, what, i, allow_none, &l->ids[i]) < 0)
			goto out;
	}
	ret = 0;
out:
	if (ret)
		id_list_free(l);
	PyBuffer_Release(&view);
	return ret;
}

/*
 * An id list argument: any iterable of ints, or a 1-D integer buffer.
 * allow_none: -1 stands for "no slot" (release lists).
 */
static int id_list_parse(PyObject *obj, const char *what, bool allow_none, struct id_list *l)
{
	PyObject *seq;
	Py_ssize_t n;

	l->ids = NULL;
	l->n = 0;
	if (PyLong_Check(obj) || PyUnicode_Check(obj) || PyBytes_Check(obj)) {
		PyErr_Format(PyExc_TypeError, "%s must be a sequence of ints, not %.100s", what,
			     Py_TYPE(obj)->tp_name);
		return -1;
	}
	if (PyObject_CheckBuffer(obj))
		return id_list_from_buffer(obj, what, allow_none, l);
	seq = PySequence_Fast(obj, "");
	if (!seq) {
		PyErr_Format(PyExc_TypeError, "%s must be a sequence of ints, not %.100s", what,
			     Py_TYPE(obj)->tp_name);
		return -1;
	}
	n = PySequence_Fast_GET_SIZE(seq);
	if (n > UINT32_MAX) {
		Py_DECREF(seq);
		PyErr_Format(PyExc_OverflowError, "%s: too many entries", what);
		return -1;
	}
	l->n = (uint32_t)n;
	l->ids = PyMem_Malloc((n ? n : 1) * sizeof(uint32_t));
	if (!l->ids) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
		long long v;
		int overflow;

		if (!PyIndex_Check(item)) {
			PyErr_Format(PyExc_TypeError, "%s[%zd] must be an int, not %.100s", what, i,
				     Py_TYPE(item)->tp_name);
			goto fail;
		}
		item = PyNumber_Index(item);
		if (!item)
			goto fail;
		v = PyLong_AsLongLongAndOverflow(item, &overflow);
		Py_DECREF(item);
		if (overflow) {
			PyErr_Format(PyExc_ValueError, "%s[%zd] is out of range", what, i);
			goto fail;
		}
		if (v == -1 && PyErr_Occurred())
			goto fail;
		if (id_value(v, what, i, allow_none, &l->ids[i]) < 0)
			goto fail;
	}
	Py_DECREF(seq);
	return 0;
fail:
	Py_DECREF(seq);
	id_list_free(l);
	return -1;
}

/* A list of slots, MOECACHE_NONE as -1. */
static PyObject *slots_to_list(const uint32_t *slots, uint32_t n)
{
	PyObject *list = PyList_New(n);

	if (!list)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		PyObject *v = PyLong_FromLong(slots[i] == MOECACHE_NONE ? -1 : (long)slots[i]);

		if (!v) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, i, v);
	}
	return list;
}

/*
 * The driver's checks on (layer, experts), made here first so that the
 * message names the culprit; the errno is the one the driver would give.
 */
static int check_layer(ClientObject *c, const char *op, long layer)
{
	char what[160], hint[160];

	if (layer >= 0 && layer < (long)c->pool.n_layers)
		return 0;
	snprintf(what, sizeof(what), "%s on pool '%s'", op, c->pool_name);
	snprintf(hint, sizeof(hint), "layer %ld is out of range: the pool has %u layers", layer,
		 c->pool.n_layers);
	raise_errno(EINVAL, what, hint);
	return -1;
}

static int check_experts(ClientObject *c, const char *op, long layer, const struct id_list *l)
{
	const struct moecache_pool_info *pi = &c->pool;
	char what[160], hint[200];
	uint8_t *seen;

	if (check_layer(c, op, layer) < 0)
		return -1;
	snprintf(what, sizeof(what), "%s on pool '%s'", op, c->pool_name);
	if (c->max_batch && l->n > c->max_batch) {
		snprintf(hint, sizeof(hint), "%u experts in one call, the driver takes at most %u",
			 l->n, c->max_batch);
		raise_errno(E2BIG, what, hint);
		return -1;
	}
	seen = PyMem_Calloc(pi->n_local ? pi->n_local : 1, 1);
	if (!seen) {
		PyErr_NoMemory();
		return -1;
	}
	for (uint32_t i = 0; i < l->n; i++) {
		uint32_t e = l->ids[i];

		if (e < pi->expert_begin || e >= pi->expert_end) {
			snprintf(hint, sizeof(hint),
				 "expert %u is outside the pool's experts [%u, %u)", e,
				 pi->expert_begin, pi->expert_end);
			break;
		}
		if (seen[e - pi->expert_begin]++) {
			snprintf(hint, sizeof(hint), "expert %u is listed twice", e);
			break;
		}
		hint[0] = 0;
	}
	PyMem_Free(seen);
	if (l->n && hint[0]) {
		raise_errno(EINVAL, what, hint);
		return -1;
	}
	return 0;
}

/* Slots to release: in the bank, or -1. Returns how many are real, or -1. */
static int check_slots(ClientObject *c, const char *op, const struct id_list *l)
{
	char what[160], hint[160];
	int n = 0;

	for (uint32_t i = 0; i < l->n; i++) {
		if (l->ids[i] == MOECACHE_NONE)
			continue;
		if (l->ids[i] >= c->pool.n_slots) {
			snprintf(what, sizeof(what), "%s on pool '%s'", op, c->pool_name);
			snprintf(hint, sizeof(hint), "slot %u is out of range: the bank has %u slots",
				 l->ids[i], c->pool.n_slots);
			raise_errno(EINVAL, what, hint);
			return -1;
		}
		n++;
	}
	return n;
}

static PyObject *client_fail(ClientObject *c, int ret, const char *op, uint32_t timeout_ms)
{
	char what[160], hint[200];

	snprintf(what, sizeof(what), "%s on pool '%s'", op, c->pool_name);
	hint[0] = 0;
	switch (-ret) {
	case ETIMEDOUT:
		snprintf(hint, sizeof(hint), "the misses were not loaded within %u ms", timeout_ms);
		break;
	case EPIPE:
		snprintf(hint, sizeof(hint),
			 "the pool has no agent (start moecached, or wait with keep_waiting=True)");
		break;
	case EIO:
		snprintf(hint, sizeof(hint), "the agent failed to load an expert");
		break;
	case ENODATA:
		snprintf(hint, sizeof(hint), "the pool has no bank yet: its agent has not set one");
		break;
	case EPERM:
		snprintf(hint, sizeof(hint), "a client may not do this");
		break;
	}
	return raise_errno(ret, what, hint);
}

/* ---- Client methods ----------------------------------------------------- */

static PyObject *client_close(ClientObject *c, PyObject *unused)
{
	if (!c->mc || c->closed)
		Py_RETURN_NONE;
	if (c->busy) {
		return raise_errno(EBUSY, "close",
				   "another thread is inside a call on this client");
	}
	c->closed = true;
	if (c->exports && c->pid == getpid()) {
		/* Views of the bank or host pages are alive: keep the mappings. */
		moecache_release_all(c->mc);
	} else {
		client_shutdown(c);
	}
	Py_RETURN_NONE;
}

static PyObject *client_enter(ClientObject *c, PyObject *unused)
{
	if (client_usable(c) < 0)
		return NULL;
	Py_INCREF(c);
	return (PyObject *)c;
}

static PyObject *client_exit(ClientObject *c, PyObject *args)
{
	return client_close(c, NULL);
}

static PyObject *client_fileno(ClientObject *c, PyObject *unused)
{
	if (client_usable(c) < 0)
		return NULL;
	return PyLong_FromLong(moecache_fd(c->mc));
}

static PyObject *client_lookup(ClientObject *c, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"layer", "experts", NULL};
	long layer;
	PyObject *experts, *res = NULL;
	struct id_list l;
	uint32_t *slots;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "lO:lookup", kwlist, &layer, &experts))
		return NULL;
	if (client_usable(c) < 0 || id_list_parse(experts, "experts", false, &l) < 0)
		return NULL;
	if (check_experts(c, "lookup", layer, &l) < 0)
		goto out;
	if (!l.n) {
		res = PyList_New(0);
		goto out;
	}
	slots = PyMem_Malloc(l.n * sizeof(uint32_t));
	if (!slots) {
		PyErr_NoMemory();
		goto out;
	}
	ret = moecache_map_lookup(moecache_map(c->mc), (uint32_t)layer, l.ids, l.n, slots);
	res = ret < 0 ? client_fail(c, ret, "lookup", 0) : slots_to_list(slots, l.n);
	PyMem_Free(slots);
out:
	id_list_free(&l);
	return res;
}

/* acquire and acquire_release: one body. */
static PyObject *do_acquire(ClientObject *c, PyObject *release_obj, long layer, PyObject *experts,
			    int wait, long timeout_ms, int keep_waiting, int queue, const char *op)
{
	struct id_list rel = {0}, l = {0};
	struct moecache_acquire_result res;
	uint32_t flags = 0, *slots = NULL;
	PyObject *out = NULL;
	int ret;

	if (client_usable(c) < 0)
		return NULL;
	if (timeout_ms < 0 || timeout_ms > UINT32_MAX) {
		PyErr_Format(PyExc_ValueError, "timeout_ms = %ld is out of range", timeout_ms);
		return NULL;
	}
	if (keep_waiting && !wait) {
		PyErr_SetString(PyExc_ValueError, "keep_waiting needs wait=True");
		return NULL;
	}
	if (!queue && wait) {
		PyErr_SetString(PyExc_ValueError, "queue=False needs wait=False");
		return NULL;
	}
	flags = (wait ? MOECACHE_ACQ_WAIT : 0) | (keep_waiting ? MOECACHE_ACQ_KEEP_WAITING : 0) |
		(queue ? 0 : MOECACHE_ACQ_NO_QUEUE);
	if (release_obj && id_list_parse(release_obj, "release_slots", true, &rel) < 0)
		return NULL;
	if (id_list_parse(experts, "experts", false, &l) < 0)
		goto out;
	if (check_experts(c, op, layer, &l) < 0)
		goto out;
	if (check_slots(c, op, &rel) < 0)
		goto out;
	slots = PyMem_Malloc((l.n ? l.n : 1) * sizeof(uint32_t));
	if (!slots) {
		PyErr_NoMemory();
		goto out;
	}
	if (!l.n) {
		/* Nothing to pin: only the release, if any. */
		ret = check_slots(c, op, &rel) > 0 ? moecache_release(c->mc, rel.ids, rel.n) : 0;
		if (ret < 0) {
			client_fail(c, ret, "release", 0);
			goto out;
		}
		out = PyList_New(0);
		goto out;
	}
	for (;;) {
		PyThreadState *ts;

		c->busy++;
		ts = PyEval_SaveThread();
		if (rel.n)
			ret = moecache_acquire_release(c->mc, rel.ids, rel.n, (uint32_t)layer, l.ids,
						       l.n, slots, flags, (uint32_t)timeout_ms, &res);
		else
			ret = moecache_acquire(c->mc, (uint32_t)layer, l.ids, l.n, slots, flags,
					       (uint32_t)timeout_ms, &res);
		PyEval_RestoreThread(ts);
		c->busy--;
		if (ret != -EINTR)
			break;
		/* PEP 475: retry, unless a signal handler raised. The release is done. */
		if (PyErr_CheckSignals() < 0)
			goto out;
		rel.n = 0;
	}
	if (ret < 0)
		client_fail(c, ret, op, (uint32_t)timeout_ms);
	else
		out = slots_to_list(slots, l.n);
out:
	PyMem_Free(slots);
	id_list_free(&rel);
	id_list_free(&l);
	return out;
}

static PyObject *client_acquire(ClientObject *c, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"layer",	 "experts", "wait", "timeout_ms",
				 "keep_waiting", "queue",   NULL};
	long layer, timeout_ms = 0;
	PyObject *experts;
	int wait = 1, keep_waiting = 0, queue = 1;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "lO|$plpp:acquire", kwlist, &layer, &experts,
					 &wait, &timeout_ms, &keep_waiting, &queue))
		return NULL;
	return do_acquire(c, NULL, layer, experts, wait, timeout_ms, keep_waiting, queue,
			  "acquire");
}

static PyObject *client_acquire_release(ClientObject *c, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"release_slots", "layer",	  "experts", "wait",
				 "timeout_ms",	  "keep_waiting", "queue",   NULL};
	long layer, timeout_ms = 0;
	PyObject *experts, *rel;
	int wait = 1, keep_waiting = 0, queue = 1;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "OlO|$plpp:acquire_release", kwlist, &rel,
					 &layer, &experts, &wait, &timeout_ms, &keep_waiting,
					 &queue))
		return NULL;
	return do_acquire(c, rel, layer, experts, wait, timeout_ms, keep_waiting, queue,
			  "acquire_release");
}

static PyObject *client_release(ClientObject *c, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"slots", NULL};
	PyObject *obj;
	struct id_list l;
	int n_real, ret;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:release", kwlist, &obj))
		return NULL;
	if (client_usable(c) < 0 || id_list_parse(obj, "slots", true, &l) < 0)
		return NULL;
	n_real = check_slots(c, "release", &l);
	if (n_real < 0) {
		id_list_free(&l);
		return NULL;
	}
	ret = n_real ? moecache_release(c->mc, l.ids, l.n) : 0;
	id_list_free(&l);
	if (ret < 0)
		return client_fail(c, ret, "release", 0);
	Py_RETURN_NONE;
}

/* A call that takes nothing but the handle. */
static PyObject *client_call(ClientObject *c, int (*fn)(struct moecache *), const char *op)
{
	int ret;

	if (client_usable(c) < 0)
		return NULL;
	ret = fn(c->mc);
	if (ret < 0)
		return client_fail(c, ret, op, 0);
	Py_RETURN_NONE;
}

static PyObject *client_release_all(ClientObject *c, PyObject *unused)
{
	return client_call(c, moecache_release_all, "release_all");
}

static PyObject *client_prefetch(ClientObject *c, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"layer", "experts", NULL};
	long layer;
	PyObject *experts;
	struct id_list l;
	uint32_t queued = 0;
	int ret = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "lO:prefetch", kwlist, &layer, &experts))
		return NULL;
	if (client_usable(c) < 0 || id_list_parse(experts, "experts", false, &l) < 0)
		return NULL;
	if (check_experts(c, "prefetch", layer, &l) < 0) {
		id_list_free(&l);
		return NULL;
	}
	if (l.n)
		ret = moecache_prefetch(c->mc, (uint32_t)layer, l.ids, l.n, &queued);
	id_list_free(&l);
	if (ret < 0)
		return client_fail(c, ret, "prefetch", 0);
	return PyLong_FromUnsignedLong(queued);
}

static PyObject *client_report_flush(ClientObject *c, PyObject *unused)
{
	return client_call(c, moecache_report_flush, "report_flush");
}

static int dict_set_u64(PyObject *d, const char *key, uint64_t v)
{
	PyObject *o = PyLong_FromUnsignedLongLong(v);
	int ret;

	if (!o)
		return -1;
	ret = PyDict_SetItemString(d, key, o);
	Py_DECREF(o);
	return ret;
}

static PyObject *client_stats(ClientObject *c, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"layer", NULL};
	PyObject *layer_obj = Py_None, *d, *hist;
	struct moecache_stats st;
	uint32_t layer = MOECACHE_NONE;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:stats", kwlist, &layer_obj))
		return NULL;
	if (client_usable(c) < 0)
		return NULL;
	if (layer_obj != Py_None) {
		long v = PyLong_AsLong(layer_obj);

		if (v == -1 && PyErr_Occurred())
			return NULL;
		if (check_layer(c, "stats", v) < 0)
			return NULL;
		layer = (uint32_t)v;
	}
	ret = moecache_stats(c->mc, layer, &st);
	if (ret < 0)
		return client_fail(c, ret, "stats", 0);
	d = PyDict_New();
	if (!d)
		return NULL;
#define STAT(f)                                                                                    \
	if (dict_set_u64(d, #f, st.f) < 0)                                                         \
	goto fail
	STAT(hits);
	STAT(misses);
	STAT(prefetch_hits);
	STAT(prefetches);
	STAT(evictions);
	STAT(commits);
	STAT(aborts);
	STAT(bytes_copied);
	STAT(waits);
	STAT(wait_ns);
	STAT(resident);
	STAT(filling);
	STAT(pinned_slots);
	STAT(pins);
	STAT(queued);
	STAT(inflight);
	STAT(n_clients);
	STAT(agent_pid);
#undef STAT
	hist = PyList_New(MOECACHE_WAIT_BUCKETS);
	if (!hist)
		goto fail;
	for (int i = 0; i < MOECACHE_WAIT_BUCKETS; i++) {
		PyObject *v = PyLong_FromUnsignedLongLong(st.wait_hist[i]);

		if (!v) {
			Py_DECREF(hist);
			goto fail;
		}
		PyList_SET_ITEM(hist, i, v);
	}
	ret = PyDict_SetItemString(d, "wait_hist", hist);
	Py_DECREF(hist);
	if (ret < 0)
		goto fail;
	if (layer_obj != Py_None && PyDict_SetItemString(d, "layer", layer_obj) < 0)
		goto fail;
	return d;
fail:
	Py_DECREF(d);
	return NULL;
}

/* ---- Region: the bank or the host pages, exported -------------------------------------- */

enum region_kind { REGION_BANK, REGION_HOST };

typedef struct {
	PyObject_HEAD ClientObject *client;
	enum region_kind kind;
	void *base;	   /* host-visible address; NULL for device memory */
	uint64_t dev_addr; /* device address of byte 0 (CUDA, ROCm) */
	int64_t nbytes;
	uint32_t backend; /* MOECACHE_BACKEND_*; CPU for the host pages */
	uint32_t device;
	uint32_t n_slots;
	uint64_t stride; /* bytes per slot (bank) or per record (host) */
	uint32_t index;	     /* a bank's index in the pool (0 for the host pages) */
	uint32_t tier;	     /* a bank's tier */
	uint32_t slot_begin; /* a bank's first global slot */
} RegionObject;

static PyObject *region_make(ClientObject *c, enum region_kind kind)
{
	RegionObject *r = PyObject_New(RegionObject, &RegionType);

	if (!r)
		return NULL;
	Py_INCREF(c);
	r->client = c;
	r->kind = kind;
	r->base = NULL;
	r->dev_addr = 0;
	r->nbytes = 0;
	r->backend = MOECACHE_BACKEND_CPU;
	r->device = 0;
	r->n_slots = 0;
	r->stride = c->pool.expert_bytes;
	r->index = 0;
	r->tier = 0;
	r->slot_begin = 0;
	return (PyObject *)r;
}

/* A Region over an imported bank. */
static PyObject *region_of_bank(ClientObject *c, const struct moecache_bank_map *b)
{
	RegionObject *r = (RegionObject *)region_make(c, REGION_BANK);

	if (!r)
		return NULL;
	r->backend = b->backend;
	r->device = b->desc.device;
	r->n_slots = b->n_slots;
	r->stride = b->slot_stride;
	r->nbytes = (int64_t)(b->slot_stride * b->n_slots);
	r->index = b->index;
	r->tier = b->tier;
	r->slot_begin = b->slot_begin;
	if (b->backend == MOECACHE_BACKEND_CPU)
		r->base = b->base;
	else
		r->dev_addr = moecache_bank_slot_addr(b, b->slot_begin);
	return (PyObject *)r;
}

static PyObject *client_get_bank(ClientObject *c, void *closure)
{
	int ret;

	if (client_usable(c) < 0)
		return NULL;
	if (!c->bank_ok) {
		ret = moecache_bank_import(c->mc, &c->bank);
		if (ret < 0) {
			const char *why = moecache_bank_import_error();

			if (-ret == EOPNOTSUPP || (why && *why))
				return raise_errno(ret, "import the bank", why);
			return client_fail(c, ret, "import the bank", 0);
		}
		c->bank_ok = true;
	}
	return region_of_bank(c, &c->bank);
}

static PyObject *client_get_n_banks(ClientObject *c, void *closure)
{
	if (client_usable(c) < 0)
		return NULL;
	return PyLong_FromUnsignedLong(moecache_map_n_banks(moecache_map(c->mc)));
}

static PyObject *client_get_banks(ClientObject *c, void *closure)
{
	PyObject *t;
	uint32_t n;
	int ret;

	if (client_usable(c) < 0)
		return NULL;
	if (!c->n_banks) {
		n = moecache_map_n_banks(moecache_map(c->mc));
		c->banks = PyMem_Calloc(n ? n : 1, sizeof(*c->banks));
		if (!c->banks)
			return PyErr_NoMemory();
		ret = moecache_bank_import_all(c->mc, c->banks, n);
		if (ret < 0) {
			const char *why = moecache_bank_import_error();

			PyMem_Free(c->banks);
			c->banks = NULL;
			if (-ret == EOPNOTSUPP || (why && *why))
				return raise_errno(ret, "import the banks", why);
			return client_fail(c, ret, "import the banks", 0);
		}
		c->n_banks = (uint32_t)ret;
	}
	t = PyTuple_New(c->n_banks);
	if (!t)
		return NULL;
	for (uint32_t b = 0; b < c->n_banks; b++) {
		PyObject *r = region_of_bank(c, &c->banks[b]);

		if (!r) {
			Py_DECREF(t);
			return NULL;
		}
		PyTuple_SET_ITEM(t, b, r);
	}
	return t;
}

/* A backend's name (libmoecache's table: cpu, cuda, rocm, auto), or backend-N. */
static PyObject *backend_str(uint32_t backend)
{
	const char *name = moecache_backend_name(backend);

	if (name)
		return PyUnicode_FromString(name);
	return PyUnicode_FromFormat("backend-%u", backend);
}

static PyObject *client_get_bank_layout(ClientObject *c, void *closure)
{
	const struct moecache_map *m;
	PyObject *t;
	uint32_t n;

	if (client_usable(c) < 0)
		return NULL;
	m = moecache_map(c->mc);
	n = moecache_map_n_banks(m);
	t = PyTuple_New(n);
	if (!t)
		return NULL;
	for (uint32_t b = 0; b < n; b++) {
		struct moecache_map_bank mb;
		PyObject *d;

		if (moecache_map_bank(m, b, &mb)) {
			Py_DECREF(t);
			return raise_errno(EPROTO, "read the bank table", NULL);
		}
		d = Py_BuildValue("{sIsIsIsIsNsIsO}", "index", b, "tier", mb.tier, "slot_begin",
				  mb.slot_begin, "n_slots", mb.n_slots, "backend",
				  backend_str(mb.backend), "device", mb.device, "set",
				  (mb.flags & MOECACHE_MAP_BANK_SET) ? Py_True : Py_False);
		if (!d) {
			Py_DECREF(t);
			return NULL;
		}
		PyTuple_SET_ITEM(t, b, d);
	}
	return t;
}

static PyObject *client_slot_bank(ClientObject *c, PyObject *arg)
{
	long long slot = PyLong_AsLongLong(arg);
	uint32_t b;

	if (slot == -1 && PyErr_Occurred())
		return NULL;
	if (client_usable(c) < 0)
		return NULL;
	if (slot < 0 || slot >= (long long)c->pool.n_slots)
		return PyLong_FromLong(-1);
	b = moecache_map_slot_bank(moecache_map(c->mc), (uint32_t)slot);
	return PyLong_FromLong(b == MOECACHE_NONE ? -1 : (long)b);
}

/* (pos, expert, slot, local) of a route entry; slot and local -1 when cold. */
static PyObject *route_entry_tuple(const struct moecache_route_entry *e)
{
	return Py_BuildValue("(IIll)", e->pos, e->expert,
			     e->slot == MOECACHE_NONE ? -1L : (long)e->slot,
			     e->local == MOECACHE_NONE ? -1L : (long)e->local);
}

static PyObject *route_group_list(const struct moecache_route *r, uint32_t g)
{
	uint32_t n;
	const struct moecache_route_entry *e = moecache_route_group(r, g, &n);
	PyObject *list = PyList_New(n);

	if (!list)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		PyObject *t = route_entry_tuple(&e[i]);

		if (!t) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, i, t);
	}
	return list;
}

static PyObject *client_route(ClientObject *c, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"experts", "slots", NULL};
	PyObject *experts_obj, *slots_obj, *banks = NULL, *cold = NULL, *res = NULL;
	struct id_list experts = {0}, slots = {0};
	struct moecache_route *r = NULL;
	const struct moecache_map *m;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:route", kwlist, &experts_obj, &slots_obj))
		return NULL;
	if (client_usable(c) < 0)
		return NULL;
	if (id_list_parse(experts_obj, "experts", false, &experts) < 0)
		return NULL;
	if (id_list_parse(slots_obj, "slots", true, &slots) < 0)
		goto out;
	if (experts.n != slots.n) {
		PyErr_Format(PyExc_ValueError, "route: %u experts but %u slots", experts.n,
			     slots.n);
		goto out;
	}
	m = moecache_map(c->mc);
	ret = moecache_route_new(m, experts.n ? experts.n : 1, &r);
	if (!ret)
		ret = moecache_route_build(m, experts.ids, slots.ids, experts.n, r);
	if (ret) {
		raise_errno(ret, "route", -ret == EINVAL ? "a slot is out of the pool's range" : NULL);
		goto out;
	}
	banks = PyList_New(r->n_banks);
	if (!banks)
		goto out;
	for (uint32_t b = 0; b < r->n_banks; b++) {
		PyObject *g = route_group_list(r, b);

		if (!g)
			goto out;
		PyList_SET_ITEM(banks, b, g);
	}
	cold = route_group_list(r, r->n_banks);
	if (cold)
		res = PyTuple_Pack(2, banks, cold);
out:
	Py_XDECREF(banks);
	Py_XDECREF(cold);
	moecache_route_free(r);
	id_list_free(&experts);
	id_list_free(&slots);
	return res;
}

static PyObject *client_get_host(ClientObject *c, void *closure)
{
	RegionObject *r;
	void *base;
	size_t size;
	int ret;

	if (client_usable(c) < 0)
		return NULL;
	ret = moecache_host_map(c->mc, false, &base, &size);
	if (ret < 0)
		return client_fail(c, ret, "map the host pages", 0);
	r = (RegionObject *)region_make(c, REGION_HOST);
	if (!r)
		return NULL;
	r->base = base;
	r->n_slots = c->pool.n_layers * c->pool.n_local;
	r->nbytes = (int64_t)((uint64_t)r->n_slots * c->pool.expert_bytes);
	if ((uint64_t)r->nbytes > size)
		r->nbytes = (int64_t)size;
	return (PyObject *)r;
}

static PyObject *client_get_info(ClientObject *c, void *closure)
{
	const struct moecache_pool_info *pi = &c->pool;
	PyObject *t = PyStructSequence_New(&PoolInfoType);
	int i = 0;

	if (!t)
		return NULL;
#define SET(v)                                                                                     \
	do {                                                                                       \
		PyObject *o_ = (v);                                                                \
		if (!o_) {                                                                         \
			Py_DECREF(t);                                                              \
			return NULL;                                                               \
		}                                                                                  \
		PyStructSequence_SET_ITEM(t, i++, o_);                                             \
	} while (0)
	SET(PyUnicode_FromString(pi->name));
	SET(PyLong_FromUnsignedLong(pi->n_layers));
	SET(PyLong_FromUnsignedLong(pi->n_experts));
	SET(PyLong_FromUnsignedLong(pi->expert_begin));
	SET(PyLong_FromUnsignedLong(pi->expert_end));
	SET(PyLong_FromUnsignedLong(pi->n_local));
	SET(PyLong_FromUnsignedLong(pi->n_slots));
	SET(PyLong_FromUnsignedLongLong(pi->expert_bytes));
	SET(PyLong_FromUnsignedLong(pi->pool_flags));
	SET(PyLong_FromUnsignedLong(c->max_batch));
#undef SET
	return t;
}

static PyObject *client_get_closed(ClientObject *c, void *closure)
{
	return PyBool_FromLong(!c->mc || c->closed);
}

static PyObject *client_get_fast_pins(ClientObject *c, void *closure)
{
	return PyBool_FromLong(c->fast_pins);
}

static PyObject *client_repr(ClientObject *c)
{
	return PyUnicode_FromFormat("<moecache.Client pool='%s'%s>", c->pool_name,
				    !c->mc || c->closed ? " closed" : "");
}

static void region_dealloc(RegionObject *r)
{
	Py_DECREF(r->client);
	PyObject_Free(r);
}

static int region_getbuffer(RegionObject *r, Py_buffer *view, int flags)
{
	if (!r->base) {
		PyErr_SetString(PyExc_BufferError,
				"the bank is device memory: use __dlpack__ (torch.from_dlpack)");
		view->obj = NULL;
		return -1;
	}
	if (!r->client->mc) {
		PyErr_SetString(PyExc_BufferError, "the client is closed");
		view->obj = NULL;
		return -1;
	}
	/* readonly=1: a writable request fails with BufferError. */
	if (PyBuffer_FillInfo(view, (PyObject *)r, r->base, (Py_ssize_t)r->nbytes, 1, flags) < 0)
		return -1;
	r->client->exports++;
	return 0;
}

static void region_releasebuffer(RegionObject *r, Py_buffer *view)
{
	export_put(r->client);
}

static PyBufferProcs region_as_buffer = {
    .bf_getbuffer = (getbufferproc)region_getbuffer,
    .bf_releasebuffer = (releasebufferproc)region_releasebuffer,
};

static int32_t region_dl_device_type(const RegionObject *r)
{
	switch (r->backend) {
	case MOECACHE_BACKEND_CUDA:
		return kDLCUDA;
	case MOECACHE_BACKEND_ROCM:
		return kDLROCM;
	default:
		return kDLCPU;
	}
}

static PyObject *region_dlpack_device(RegionObject *r, PyObject *unused)
{
	int32_t type = region_dl_device_type(r);

	return Py_BuildValue("(ii)", type, type == kDLCPU ? 0 : (int)r->device);
}

struct region_dl {
	DLManagedTensor managed;
	int64_t shape[1];
};

static void region_dl_deleter(DLManagedTensor *m)
{
	PyGILState_STATE st = PyGILState_Ensure();
	RegionObject *r = m->manager_ctx;

	export_put(r->client);
	Py_DECREF(r);
	PyMem_RawFree(m);
	PyGILState_Release(st);
}

static void region_capsule_destructor(PyObject *capsule)
{
	DLManagedTensor *m;

	/* Consumed capsules are renamed "used_dltensor": the consumer owns them. */
	if (!PyCapsule_IsValid(capsule, "dltensor"))
		return;
	m = PyCapsule_GetPointer(capsule, "dltensor");
	if (m && m->deleter)
		m->deleter(m);
}

static PyObject *region_dlpack(RegionObject *r, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"stream", NULL};
	PyObject *stream = Py_None, *capsule;
	struct region_dl *dl;

	/* Slots are published only once their copy completed: no stream to order. */
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$O:__dlpack__", kwlist, &stream))
		return NULL;
	if (!r->client->mc) {
		PyErr_SetString(PyExc_BufferError, "the client is closed");
		return NULL;
	}
	if (!r->base && !r->dev_addr) {
		PyErr_SetString(PyExc_BufferError, "the bank has no address in this process");
		return NULL;
	}
	dl = PyMem_RawCalloc(1, sizeof(*dl));
	if (!dl)
		return PyErr_NoMemory();
	dl->shape[0] = r->nbytes;
	dl->managed.dl_tensor.data = r->base ? r->base : (void *)(uintptr_t)r->dev_addr;
	dl->managed.dl_tensor.device.device_type = region_dl_device_type(r);
	dl->managed.dl_tensor.device.device_id =
	    dl->managed.dl_tensor.device.device_type == kDLCPU ? 0 : (int32_t)r->device;
	dl->managed.dl_tensor.ndim = 1;
	dl->managed.dl_tensor.dtype.code = kDLUInt;
	dl->managed.dl_tensor.dtype.bits = 8;
	dl->managed.dl_tensor.dtype.lanes = 1;
	dl->managed.dl_tensor.shape = dl->shape;
	dl->managed.dl_tensor.strides = NULL;
	dl->managed.dl_tensor.byte_offset = 0;
	dl->managed.manager_ctx = r;
	dl->managed.deleter = region_dl_deleter;
	capsule = PyCapsule_New(&dl->managed, "dltensor", region_capsule_destructor);
	if (!capsule) {
		PyMem_RawFree(dl);
		return NULL;
	}
	Py_INCREF(r);
	r->client->exports++;
	return capsule;
}

static PyObject *region_slot_address(RegionObject *r, PyObject *arg)
{
	long slot = PyLong_AsLong(arg);

	if (slot == -1 && PyErr_Occurred())
		return NULL;
	if (slot < 0 || (uint64_t)slot >= r->n_slots) {
		PyErr_Format(PyExc_IndexError, "slot %ld is out of range [0, %u)", slot, r->n_slots);
		return NULL;
	}
	if (r->base)
		return PyLong_FromUnsignedLongLong((uintptr_t)r->base + (uint64_t)slot * r->stride);
	return PyLong_FromUnsignedLongLong(r->dev_addr + (uint64_t)slot * r->stride);
}

static PyObject *region_get_backend(RegionObject *r, void *closure)
{
	if (r->kind == REGION_HOST)
		return PyUnicode_FromString("host");
	return backend_str(r->backend);
}

static PyObject *region_get_u64(RegionObject *r, void *closure)
{
	switch ((intptr_t)closure) {
	case 0:
		return PyLong_FromLongLong(r->nbytes);
	case 1:
		return PyLong_FromUnsignedLong(r->n_slots);
	case 2:
		return PyLong_FromUnsignedLongLong(r->stride);
	case 3:
		return PyLong_FromUnsignedLong(r->device);
	case 5:
		return PyLong_FromUnsignedLong(r->index);
	case 6:
		return PyLong_FromUnsignedLong(r->tier);
	case 7:
		return PyLong_FromUnsignedLong(r->slot_begin);
	default:
		return PyLong_FromUnsignedLongLong(r->client->pool.expert_bytes);
	}
}

static PyObject *region_get_readonly(RegionObject *r, void *closure)
{
	Py_RETURN_TRUE;
}

static PyObject *region_repr(RegionObject *r)
{
	PyObject *backend = region_get_backend(r, NULL), *s;

	if (!backend)
		return NULL;
	s = PyUnicode_FromFormat("<moecache.Region %s of pool '%s': %u x %llu bytes, %U>",
				 r->kind == REGION_BANK ? "bank" : "host", r->client->pool_name,
				 r->n_slots, (unsigned long long)r->stride, backend);
	Py_DECREF(backend);
	return s;
}

static Py_ssize_t region_len(RegionObject *r)
{
	return (Py_ssize_t)r->nbytes;
}

static PySequenceMethods region_as_sequence = {
    .sq_length = (lenfunc)region_len,
};

PyDoc_STRVAR(region_doc,
	     "A read-only region of a pool: a bank (Client.bank, Client.banks) or the\n"
	     "host pages (Client.host).\n\n"
	     "On the CPU it is a buffer: memoryview(region), numpy.frombuffer(region).\n"
	     "Every region is also a DLPack producer (torch.from_dlpack(region) gives a\n"
	     "uint8 tensor of nbytes on the bank's device). The memory is mapped\n"
	     "read-only: writing through a DLPack view faults.\n\n"
	     "Slot s of the bank starts at byte s * stride; record (layer, expert) of\n"
	     "the host pages at (layer * n_local + expert - expert_begin) * stride.\n"
	     "A bank of several holds its own slots: global slot g is its slot\n"
	     "g - slot_begin (Client.route gives it as local).");

static PyMethodDef region_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))region_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None) -> PyCapsule\n\nA DLPack capsule of the whole region "
     "(uint8, one dimension). stream is accepted and ignored: slots are published only "
     "once their copy has completed."},
    {"__dlpack_device__", (PyCFunction)region_dlpack_device, METH_NOARGS,
     "__dlpack_device__() -> (device_type, device_id)\n\nkDLCPU (1), kDLCUDA (2) or "
     "kDLROCM (10), and the device ordinal the bank's agent reported."},
    {"slot_address", (PyCFunction)region_slot_address, METH_O,
     "slot_address(slot) -> int\n\nThe address of slot (or host record) slot in this "
     "process: a host address, or a device address for a CUDA or ROCm bank. A bank's "
     "slot is its own: global slot minus slot_begin."},
    {NULL}};

static PyGetSetDef region_getset[] = {
    {"backend", (getter)region_get_backend, NULL,
     "'cpu', 'cuda' or 'rocm' for the bank; 'host' for the host pages", NULL},
    {"nbytes", (getter)region_get_u64, NULL, "bytes in the region", (void *)0},
    {"n_slots", (getter)region_get_u64, NULL, "slots (bank) or records (host pages)",
     (void *)1},
    {"stride", (getter)region_get_u64, NULL, "bytes from one slot or record to the next",
     (void *)2},
    {"device", (getter)region_get_u64, NULL, "the bank's device ordinal (0 on the CPU)",
     (void *)3},
    {"expert_bytes", (getter)region_get_u64, NULL, "the pool's bytes per expert", (void *)4},
    {"index", (getter)region_get_u64, NULL, "a bank's index in the pool (0 for the host pages)",
     (void *)5},
    {"tier", (getter)region_get_u64, NULL, "a bank's tier (0 is the fastest)", (void *)6},
    {"slot_begin", (getter)region_get_u64, NULL,
     "a bank's first global slot: slot s of the pool is this bank's s - slot_begin", (void *)7},
    {"readonly", (getter)region_get_readonly, NULL, "always True", NULL},
    {NULL}};

static PyTypeObject RegionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "moecache.Region",
    .tp_basicsize = sizeof(RegionObject),
    .tp_dealloc = (destructor)region_dealloc,
    .tp_repr = (reprfunc)region_repr,
    .tp_as_sequence = &region_as_sequence,
    .tp_as_buffer = &region_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = region_doc,
    .tp_methods = region_methods,
    .tp_getset = region_getset,
};

/* ---- Client type -------------------------------------------------------- */

PyDoc_STRVAR(client_doc,
	     "Client(pool, fast_pins=True, device=None)\n\n"
	     "Attaches to the moecache pool named pool as a client (read permission on\n"
	     "the pool). fast_pins: pin resident experts without a system call\n"
	     "(MOECACHE_ATTACH_FAST_PINS). device: the device node (/dev/moecache).\n\n"
	     "Errors are OSError with the driver's errno. A client is a context manager;\n"
	     "closing it (or the process ending) drops every pin it holds. It does not\n"
	     "survive fork: open a new one in the child.");

static PyMethodDef client_methods[] = {
    {"close", (PyCFunction)client_close, METH_NOARGS,
     "close() -> None\n\nDrops every pin and detaches. The bank and host mappings stay "
     "valid until the last view of them is gone. Closing twice is a no-op."},
    {"__enter__", (PyCFunction)client_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)client_exit, METH_VARARGS, NULL},
    {"fileno", (PyCFunction)client_fileno, METH_NOARGS,
     "fileno() -> int\n\nThe file descriptor of the attached /dev/moecache file."},
    {"lookup", (PyCFunction)(void (*)(void))client_lookup, METH_VARARGS | METH_KEYWORDS,
     "lookup(layer, experts) -> list[int]\n\nThe slot of each expert now, or -1 if it is "
     "not resident: read from the shared map without a system call. A hint only: "
     "acquire pins."},
    {"acquire", (PyCFunction)(void (*)(void))client_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(layer, experts, *, wait=True, timeout_ms=0, keep_waiting=False, queue=True)"
     " -> list[int]\n\nPins the resident experts of one layer and returns their slots. "
     "With wait, returns once every expert is pinned (misses are loaded by the agent; "
     "timeout_ms 0: no limit; keep_waiting: no agent is no error, wait for one), or "
     "raises having pinned nothing. Without wait, misses are -1 and queued for the agent "
     "(queue=False: not queued). Expert ids are global and must be distinct."},
    {"acquire_release", (PyCFunction)(void (*)(void))client_acquire_release,
     METH_VARARGS | METH_KEYWORDS,
     "acquire_release(release_slots, layer, experts, *, wait=True, timeout_ms=0, "
     "keep_waiting=False, queue=True) -> list[int]\n\nDrops one pin on each of "
     "release_slots (-1 entries skipped: an acquire's result can be passed back as is), "
     "then acquires as acquire(), in one system call. The release stays done if a wait "
     "then fails."},
    {"release", (PyCFunction)(void (*)(void))client_release, METH_VARARGS | METH_KEYWORDS,
     "release(slots) -> None\n\nDrops one pin per slot; -1 entries are skipped."},
    {"release_all", (PyCFunction)client_release_all, METH_NOARGS,
     "release_all() -> None\n\nDrops every pin this client holds."},
    {"prefetch", (PyCFunction)(void (*)(void))client_prefetch, METH_VARARGS | METH_KEYWORDS,
     "prefetch(layer, experts) -> int\n\nHints the agent to load experts of a layer soon; "
     "returns how many requests were queued (resident or already queued ones are not)."},
    {"report_flush", (PyCFunction)client_report_flush, METH_NOARGS,
     "report_flush() -> None\n\nReports the hits of fast pins not reported yet, so that "
     "stats and the agent's policy see them."},
    {"stats", (PyCFunction)(void (*)(void))client_stats, METH_VARARGS | METH_KEYWORDS,
     "stats(layer=None) -> dict\n\nThe driver's counters of the pool, or of one layer "
     "(hits, misses, prefetch_hits, prefetches, evictions, commits, aborts, bytes_copied, "
     "waits, wait_ns, wait_hist), and the pool's state (resident, filling, pinned_slots, "
     "pins, queued, inflight, n_clients, agent_pid)."},
    {"slot_bank", (PyCFunction)client_slot_bank, METH_O,
     "slot_bank(slot) -> int\n\nThe bank whose slot range holds a global slot, or -1 "
     "(-1 or out of range)."},
    {"route", (PyCFunction)(void (*)(void))client_route, METH_VARARGS | METH_KEYWORDS,
     "route(experts, slots) -> (list[list[tuple]], list[tuple])\n\nGroups the experts of "
     "an acquire by the bank they are resident in: slots as acquire() returned them. "
     "Returns (banks, cold): banks[b] lists, in the acquire's order, (pos, expert, slot, "
     "local) for each expert resident in bank b (pos: its index in experts; slot: global; "
     "local: slot - the bank's slot_begin, its index into banks[b]); cold lists (pos, "
     "expert, -1, -1) for the experts with no slot, to run from the host pages."},
    {NULL}};

static PyGetSetDef client_getset[] = {
    {"info", (getter)client_get_info, NULL,
     "The pool's geometry (PoolInfo): name, n_layers, n_experts, expert_begin, expert_end, "
     "n_local, n_slots, expert_bytes, flags, max_batch.",
     NULL},
    {"bank", (getter)client_get_bank, NULL,
     "The bank (Region), imported on first use: read-only, n_slots slots of stride bytes. "
     "OSError ENODATA while the pool's agent has set none. With several banks, bank 0 "
     "(Client.banks has them all).",
     NULL},
    {"n_banks", (getter)client_get_n_banks, NULL,
     "The pool's banks (1 or more), from the map: no import needed.", NULL},
    {"banks", (getter)client_get_banks, NULL,
     "Every bank (a tuple of Region, by index), imported on first use: read-only, each of "
     "its own n_slots slots from slot_begin, on its own backend and device. OSError ENODATA "
     "until the agent has set every one.",
     NULL},
    {"bank_layout", (getter)client_get_bank_layout, NULL,
     "The pool's bank table as the map gives it: a tuple of dicts (index, tier, slot_begin, "
     "n_slots, backend, device, set), by index; set is True once the agent has set the "
     "bank.",
     NULL},
    {"host", (getter)client_get_host, NULL,
     "The host pages (Region), read-only: one record of expert_bytes per local expert, the "
     "source for computing cold experts on the CPU.",
     NULL},
    {"closed", (getter)client_get_closed, NULL, "True once close() was called", NULL},
    {"fast_pins", (getter)client_get_fast_pins, NULL, "True if attached with fast pins", NULL},
    {NULL}};

static PyTypeObject ClientType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "moecache.Client",
    .tp_basicsize = sizeof(ClientObject),
    .tp_dealloc = (destructor)client_dealloc,
    .tp_repr = (reprfunc)client_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = client_doc,
    .tp_methods = client_methods,
    .tp_getset = client_getset,
    .tp_init = (initproc)client_init,
    .tp_new = client_new,
};

static PyStructSequence_Field pool_info_fields[] = {
    {"name", "the pool's name"},
    {"n_layers", "layers with routed experts"},
    {"n_experts", "experts per layer in the model"},
    {"expert_begin", "first global expert id of the pool's local range"},
    {"expert_end", "end of the local range (exclusive)"},
    {"n_local", "experts per layer in the pool: expert_end - expert_begin"},
    {"n_slots", "slots in the bank"},
    {"expert_bytes", "bytes per expert record"},
    {"flags", "MOECACHE_POOL_* flags at attach (1 loaded, 2 agent, 4 bank)"},
    {"max_batch", "most entries the driver takes in one list"},
    {NULL}};

static PyStructSequence_Desc pool_info_desc = {
    "moecache.PoolInfo", "A pool's geometry, as attach returned it.", pool_info_fields, 10};

/* ---- module ------------------------------------------------------------- */

static PyObject *mod_driver_info(PyObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"device", NULL};
	const char *device = NULL;
	struct moecache *mc;
	struct moecache_info info;
	PyObject *d;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "|z:driver_info", kwlist, &device))
		return NULL;
	ret = moecache_open(device, &mc);
	if (ret)
		return raise_errno(ret, device ? device : MOECACHE_DEVICE,
				   -ret == ENOENT ? "no such device: is the moecache module loaded?"
						  : NULL);
	ret = moecache_get_info(mc, &info);
	moecache_close(mc);
	if (ret)
		return raise_errno(ret, "GET_INFO", NULL);
	d = Py_BuildValue("{sIsIsIsIsIsIsIsIsKsKsK}", "abi_version", info.abi_version, "flags",
			  info.flags, "max_pools", info.max_pools, "max_layers", info.max_layers,
			  "max_experts", info.max_experts, "max_slots", info.max_slots, "max_batch",
			  info.max_batch, "n_pools", info.n_pools, "max_host_bytes",
			  (unsigned long long)info.max_host_bytes, "host_bytes_used",
			  (unsigned long long)info.host_bytes_used, "max_expert_bytes",
			  (unsigned long long)info.max_expert_bytes);
	return d;
}

static PyMethodDef module_methods[] = {
    {"driver_info", (PyCFunction)(void (*)(void))mod_driver_info, METH_VARARGS | METH_KEYWORDS,
     "driver_info(device=None) -> dict\n\nThe driver's limits (GET_INFO): abi_version, "
     "max_pools, max_layers, max_experts, max_slots, max_batch, n_pools, max_host_bytes, "
     "host_bytes_used, max_expert_bytes."},
    {NULL}};

static struct PyModuleDef moecache_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "moecache._moecache",
    .m_doc = "The C binding of libmoecache; use the moecache package.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__moecache(void);
PyMODINIT_FUNC PyInit__moecache(void)
{
	PyObject *m;

	if (PyType_Ready(&ClientType) < 0 || PyType_Ready(&RegionType) < 0)
		return NULL;
	if (!PoolInfoType.tp_name && PyStructSequence_InitType2(&PoolInfoType, &pool_info_desc) < 0)
		return NULL;
	m = PyModule_Create(&moecache_module);
	if (!m)
		return NULL;
	Py_INCREF(&ClientType);
	Py_INCREF(&RegionType);
	Py_INCREF(&PoolInfoType);
	if (PyModule_AddObject(m, "Client", (PyObject *)&ClientType) < 0 ||
	    PyModule_AddObject(m, "Region", (PyObject *)&RegionType) < 0 ||
	    PyModule_AddObject(m, "PoolInfo", (PyObject *)&PoolInfoType) < 0 ||
	    PyModule_AddIntConstant(m, "NONE", -1) < 0 ||
	    PyModule_AddIntConstant(m, "ABI_VERSION", MOECACHE_ABI_VERSION) < 0 ||
	    PyModule_AddStringConstant(m, "DEFAULT_DEVICE", MOECACHE_DEVICE) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
