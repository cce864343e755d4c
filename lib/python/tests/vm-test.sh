#!/bin/sh
# SPDX-License-Identifier: MIT
# moecache-python-vmtest: the Python binding against the driver, in the test
# VM booted with MOECACHE_VM_HOST_USR=1 (Python and PyTorch from the host's
# /usr, run through host-run):
#   - lib/python/tests/vm_client.py: moecache.Client's calls, errors,
#     buffers, lifetime and permissions on a synthetic pool;
#   - lib/python/tests/vm_cuda.py: a CUDA bank exported through DLPack, on
#     the unit tests' fake CUDA driver (moecached --backend cuda);
#   - tools/python/moecache-torch-decode multi: four processes decoding
#     different prompts with the torch MoE model through one pool whose bank
#     holds 25% of the experts, served by moecached, each checking every
#     step's logits against the in-memory model bit for bit (one of them
#     computing cold experts from the host pages); all four pause mid-run,
#     the agent is killed with SIGKILL, they go on with no agent, and a new
#     agent is started: they must finish verified.
# Prints "ok N - name # description" per test and ends with
# "python-vm: P passed, F failed" (exit 1 on any failure).
set -u

work=$(mktemp -d "${TMPDIR:-/tmp}/pyvm.XXXXXX")
n=0
passed=0
failed=0
agent=
api_agent=
PYTEST_POOL=py-api
PYTEST_PRIV=py-priv
PYTEST_RANGE=py-range
pool=py-torch
export PYTEST_POOL PYTEST_PRIV PYTEST_RANGE

ok()
{
	n=$((n + 1))
	passed=$((passed + 1))
	echo "ok $n - $1 # $2"
}

not_ok()
{
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $1 # $2"
	shift 2
	[ $# -eq 0 ] || echo "    $*"
}

finish()
{
	for pid in $agent $api_agent; do
		kill -TERM "$pid" 2>/dev/null && wait "$pid"
	done
	echo "python-vm: $passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
}

# A key=value field of the last line matching $2 in file $3.
field()
{
	grep -- "$2" "$3" | tail -n 1 | sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p"
}

# Waits up to $2 seconds for file $1.
wait_file()
{
	i=0
	while [ ! -e "$1" ] && [ $i -lt $(($2 * 10)) ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -e "$1" ]
}

if ! host-run /usr/bin/python3 -c 'import moecache, moecache.table' 2>"$work/import.err"; then
	not_ok basic_import "moecache imports in the host's userland (MOECACHE_VM_HOST_USR=1)" \
		"$(tail -n 3 "$work/import.err")"
	finish
fi

# ---- the Client against the driver ---------------------------------------
if ! { moecachectl pool create $PYTEST_POOL --layers 2 --experts 8 --expert-bytes 4096 \
	--slots 4 && moecachectl load $PYTEST_POOL --synthetic --quiet &&
	moecachectl pool create $PYTEST_PRIV --layers 1 --experts 2 --expert-bytes 4096 \
		--slots 1 --mode 0600 &&
	moecachectl pool create $PYTEST_RANGE --layers 2 --experts 8 --expert-bytes 4096 \
		--slots 2 --range 4:8 && moecachectl load $PYTEST_RANGE --synthetic --quiet; } \
	>"$work/api-setup.log" 2>&1; then
	not_ok api_setup "the API test pools" "$(tail -n 3 "$work/api-setup.log")"
	finish
fi
moecached --pool $PYTEST_POOL --foreground 2>"$work/api-agent.log" &
api_agent=$!
# Runs lib/python/tests/run.py on the files $1 (environment: the rest) and
# counts its lines as this suite's.
run_py_tests()
{
	pattern=$1
	shift
	host-run env "$@" /usr/bin/python3 -B /opt/moecache/tests/run.py "$pattern" \
		>"$work/py.out" 2>&1
	py_rc=$?
	while IFS= read -r line; do
		case $line in
		"ok "*) name=${line#ok * - }; ok "${name%% \#*}" "${name#* \# }" ;;
		"not ok "*) name=${line#not ok * - }; not_ok "${name%% \#*}" "${name#* \# }" ;;
		"    "*) echo "$line" ;;
		esac
	done <"$work/py.out"
	grep -q '^Synthesis: ' "$work/py.out" ||
		not_ok "runner_$pattern" "$pattern ran to the end (exit $py_rc)" \
			"$(tail -n 5 "$work/py.out")"
}

run_py_tests vm_client.py PYTEST_POOL=$PYTEST_POOL PYTEST_PRIV=$PYTEST_PRIV \
	PYTEST_RANGE=$PYTEST_RANGE
kill -TERM "$api_agent" && wait "$api_agent"
api_agent=
moecachectl pool destroy $PYTEST_POOL
moecachectl pool destroy $PYTEST_PRIV
moecachectl pool destroy $PYTEST_RANGE

# ---- a CUDA bank through DLPack, on the fake CUDA driver ------------------
# The unit tests' fake libcuda (device memory is host memory), for the agent
# here and for the client in /host (through /tmp, which both see).
fake_cuda=/usr/bin/libmoecache-fakecuda.so
if [ -f $fake_cuda ] && cp $fake_cuda /tmp/libmoecache-fakecuda.so &&
	moecachectl pool create py-cuda --layers 2 --experts 8 --expert-bytes 4096 --slots 4 \
		>"$work/cuda-setup.log" 2>&1 &&
	moecachectl load py-cuda --synthetic --quiet >>"$work/cuda-setup.log" 2>&1; then
	MOECACHE_LIBCUDA=/tmp/libmoecache-fakecuda.so moecached --pool py-cuda --backend cuda \
		--foreground 2>"$work/cuda-agent.log" &
	api_agent=$!
	# The agent sets the bank once it started.
	i=0
	until moecachectl pool info py-cuda --json 2>/dev/null | grep -q '"bank"' ||
		[ $i -gt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	run_py_tests vm_cuda.py MOECACHE_LIBCUDA=/tmp/libmoecache-fakecuda.so \
		PYTEST_CUDA_POOL=py-cuda
	kill -TERM "$api_agent" && wait "$api_agent"
	api_agent=
	moecachectl pool destroy py-cuda
else
	not_ok cuda_setup "a pool served by moecached --backend cuda on the fake driver" \
		"$(tail -n 3 "$work/cuda-setup.log" 2>/dev/null)"
fi

# ---- four torch decoders on one pool, through an agent kill -9 ------------
# One interpreter writes the checkpoint, waits for the pool to be loaded,
# then forks the four decoders, which pause at step 6 until told to go.
host-run moecache-torch-decode multi --procs 4 --write-checkpoint "$work/model.safetensors" \
	--pool $pool --checkpoint "$work/model.safetensors" --prompt-len 6 --tokens 12 \
	--sync-dir "$work" --sync-step 6 --label proc >"$work/multi.out" 2>&1 &
multi=$!
if ! wait_file "$work/gen.out" 900; then
	not_ok decode_setup "the checkpoint was written" "$(tail -n 5 "$work/multi.out")"
	kill -KILL $multi
	finish
fi
layers=$(field layers gen: "$work/gen.out")
experts=$(field experts gen: "$work/gen.out")
expert_bytes=$(field expert_bytes gen: "$work/gen.out")
slots=$(field slots gen: "$work/gen.out")
if moecachectl pool create $pool --layers "$layers" --experts "$experts" \
	--expert-bytes "$expert_bytes" --slots "$slots" >"$work/load.log" 2>&1 &&
	moecachectl load $pool --safetensors "$work/model.safetensors" --quiet >>"$work/load.log" 2>&1; then
	ok basic_load_safetensors "moecachectl load reads the seeded torch checkpoint into a pool of $layers x $experts experts, a bank of $slots slots (25%)"
else
	not_ok basic_load_safetensors "moecachectl load of the torch checkpoint" \
		"$(tail -n 3 "$work/load.log")"
	kill -KILL $multi
	finish
fi
moecached --pool $pool --foreground 2>"$work/agent1.log" &
agent=$!
touch "$work/loaded"

# All four mid-run: kill the agent, let them go on without one for a while
# (misses wait; the cold-from-host decoder computes them), then restart it.
all_at=1
for i in 0 1 2 3; do
	wait_file "$work/proc$i.at" 900 || all_at=0
done
kill -KILL "$agent"
wait "$agent" 2>/dev/null
agent=
touch "$work/go"
sleep 10
moecachectl stats $pool --json >"$work/down.json" 2>/dev/null
state()
{
	grep -o "\"$1\": *[0-9]*" "$work/down.json" | grep -o '[0-9]*$' | head -n 1
}
agent_pid_down=$(state agent_pid)
# Misses asked for while no agent ran: decoders were held up by the outage.
queued_down=$(state queued)
moecached --pool $pool --foreground 2>"$work/agent2.log" &
agent=$!
wait $multi
multi_rc=$?
cat "$work/multi.out"

verified=$(grep -c '^decode: label=proc[0-3] .*verified=ok$' "$work/multi.out")
if [ "$multi_rc" = 0 ] && [ "$verified" = 4 ] && grep -q 'verified=ok$' "$work/multi.out"; then
	ok decode_four_processes_bit_exact \
		"4 processes, different prompts, one pool: every step's logits equal the in-memory model's"
else
	not_ok decode_four_processes_bit_exact "4 verified decoders (exit $multi_rc, $verified verified)"
fi
host_steps=$(field host 'label=proc2 ' "$work/multi.out")
if grep -q '^decode: label=proc2 .*wait=no .*verified=ok$' "$work/multi.out" &&
	[ "${host_steps:-0}" -gt 0 ]; then
	ok decode_cold_from_host "wait=False: $host_steps cold experts computed from the host pages, logits still bit for bit"
else
	not_ok decode_cold_from_host "a wait=False decoder computing cold experts from .host" \
		"host=${host_steps:-none}"
fi
if [ "$all_at" = 1 ] && [ "$multi_rc" = 0 ] && [ "${agent_pid_down:-x}" = 0 ] &&
	[ "${queued_down:-0}" -gt 0 ]; then
	ok lifetime_agent_kill9_midrun "SIGKILL of moecached with 4 decoders mid-run ($queued_down misses queued while it was down), a new agent: all finish verified"
else
	not_ok lifetime_agent_kill9_midrun "the decoders outlive an agent kill -9" \
		"all mid-run: $all_at, agent_pid while down: ${agent_pid_down:-none}," \
		"queued: ${queued_down:-none}, exit $multi_rc"
fi
# One host copy: the driver's host pages for the pool, not one per process.
host_bytes=$(moecachectl pool info $pool --json 2>/dev/null | grep -o '"host_bytes": *[0-9]*' |
	grep -o '[0-9]*$')
want=$((layers * experts * expert_bytes))
if [ "${host_bytes:-0}" = "$want" ]; then
	ok basic_one_host_copy "the pool holds one host copy ($host_bytes bytes) for 4 processes"
else
	not_ok basic_one_host_copy "one host copy of $want bytes" "pool info says ${host_bytes:-none}"
fi
kill -TERM "$agent" && wait "$agent"
agent=
moecachectl pool destroy $pool
finish
