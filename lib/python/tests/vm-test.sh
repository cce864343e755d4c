#!/bin/sh
# SPDX-License-Identifier: MIT
# moecache-python-vmtest: the Python binding against the driver, in the test
# VM booted with MOECACHE_VM_HOST_USR=1 (Python and PyTorch from the host's
# /usr, run through host-run):
#   - lib/python/tests/vm_client.py: moecache.Client's calls, errors,
#     buffers, lifetime and permissions on a synthetic pool;
#   - lib/python/tests/vm_gpu.py: CUDA and ROCm banks exported through
#     DLPack, on the unit tests' fake drivers (moecached --backend cuda,
#     --backend rocm with vgem dma-bufs as VRAM);
#   - tools/python/moecache-torch-decode multi: four processes decoding
#     different prompts with the torch MoE model through one pool whose bank
#     holds 25% of the experts, served by moecached, each checking every
#     step's logits against the in-memory model bit for bit (one of them
#     computing cold experts from the host pages); all four pause mid-run,
#     the agent is killed with SIGKILL, they go on with no agent, and a new
#     agent is started: they must finish verified.
# Prints "ok N - name # description" per test and ends with
# "python-vm: P passed, F failed, S skipped" (exit 1 on any failure).
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
	echo "python-vm: $passed passed, $failed failed, 0 skipped"
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

# ---- device banks through DLPack, on the unit tests' fake drivers ---------
# One row per GPU backend: "BACKEND DEVICE FAKE" (DEVICE: the ordinal the
# agent reports, the fakes have one GPU). The fake library goes to /tmp, which
# the agent here and the client in /host both see; gpu_env_BACKEND sets
# what the row needs for both (gpu_env_rocm: the fake's GPU 0 alone, a KFD
# node, a render node and a sysfs tree for it at 0000:03:00.0, and vgem for
# the agent's VRAM).
# shellcheck disable=SC2317 # called as gpu_env_$backend
gpu_env_cuda()
{
	echo "MOECACHE_LIBCUDA=$1"
}

# shellcheck disable=SC2317
gpu_env_rocm()
{
	t=/tmp/fake-rocm
	vgem=
	for card in /sys/class/drm/card*; do
		case $(readlink -f "$card/device") in
		*vgem*) vgem=/dev/dri/${card##*/} ;;
		esac
	done
	if [ -z "$vgem" ] || [ ! -e "$vgem" ]; then
		echo "no vgem device in /sys/class/drm (tools/vm loads vgem with MOECACHE_VM_HOST_USR=1)" >&2
		return 1
	fi
	rm -rf $t && mkdir -p $t/dri $t/class/drm/renderD128 && : >$t/kfd && : >$t/dri/renderD128 &&
		ln -s ../../../devices/pci0000:00/0000:00:01.1/0000:03:00.0 \
			$t/class/drm/renderD128/device || return 1
	echo "MOECACHE_LIBHSAKMT=$1 MOECACHE_LIBDRM_AMDGPU=$1 MOECACHE_KFD_DEVICE=$t/kfd" \
		"MOECACHE_DRI_DIR=$t/dri MOECACHE_SYSFS_ROOT=$t FAKE_ROCM_VGEM=$vgem FAKE_ROCM_GPUS=1"
}

for row in "cuda 0 libmoecache-fakecuda.so" "rocm 0 libmoecache-fakerocm.so"; do
	# shellcheck disable=SC2086 # the row's three words
	set -- $row
	backend=$1 device=$2 fake=$3 gpu_pool=py-$1
	if [ -f "/usr/bin/$fake" ] && cp "/usr/bin/$fake" "/tmp/$fake" &&
		env=$(gpu_env_$backend "/tmp/$fake" 2>"$work/$backend-setup.log") &&
		moecachectl pool create $gpu_pool --layers 2 --experts 8 --expert-bytes 4096 --slots 4 \
			>>"$work/$backend-setup.log" 2>&1 &&
		moecachectl load $gpu_pool --synthetic --quiet >>"$work/$backend-setup.log" 2>&1; then
		# shellcheck disable=SC2086 # env is a list of VAR=value words
		env $env moecached --pool $gpu_pool --backend "$backend" --foreground \
			2>"$work/$backend-agent.log" &
		api_agent=$!
		# The agent sets the bank once it started.
		i=0
		until moecachectl pool info $gpu_pool --json 2>/dev/null | grep -q '"bank"' ||
			[ $i -gt 100 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		# shellcheck disable=SC2086
		run_py_tests vm_gpu.py $env PYTEST_GPU_BACKEND="$backend" PYTEST_GPU_POOL=$gpu_pool \
			PYTEST_GPU_DEVICE="$device"
		kill -TERM "$api_agent" && wait "$api_agent"
		api_agent=
		moecachectl pool destroy $gpu_pool
	else
		not_ok "${backend}_setup" "a pool served by moecached --backend $backend on the fake driver" \
			"$(tail -n 3 "$work/$backend-setup.log" 2>/dev/null)"
	fi
done

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
# One decoder with --no-wait after a flush: its cold experts are computed
# from the host pages while the agent copies them in.
moecachectl flush $pool >/dev/null 2>&1
host-run moecache-torch-decode decode --pool $pool --checkpoint "$work/model.safetensors" \
	--prompt-seed 9 --prompt-len 4 --tokens 6 --no-wait --label nowait >"$work/nowait.out" 2>&1
nowait_rc=$?
nowait_host=$(field host 'label=nowait ' "$work/nowait.out")
if [ "$nowait_rc" = 0 ] && grep -q '^decode: label=nowait .*wait=no .*verified=ok$' "$work/nowait.out" &&
	[ "${nowait_host:-0}" -gt 0 ]; then
	ok basic_torch_decode_no_wait "moecache-torch-decode decode --no-wait: $nowait_host cold experts computed from the host pages, logits bit for bit"
else
	not_ok basic_torch_decode_no_wait "moecache-torch-decode decode --no-wait computes cold experts from the host pages" \
		"exit $nowait_rc, host=${nowait_host:-none}: $(tail -n 3 "$work/nowait.out")"
fi
kill -TERM "$agent" && wait "$agent"
agent=
moecachectl pool destroy $pool
finish
