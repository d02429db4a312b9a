#!/bin/sh
# run.sh DIR TARGET LIBFUZZER-OPTION...: runs DIR/TARGET on a working corpus
# DIR/corpus/TARGET seeded from tests/fuzz/corpus/TARGET (plus the Makefile's
# FUZZ_SEEDS_<target> directories, passed in FUZZ_SEEDS), with the target's
# dictionary when there is one. New inputs go to the working corpus, never
# into the tree; a crash leaves DIR/crash-TARGET-* and fails. The log is
# DIR/log/TARGET.log.
# run.sh DIR --summary TARGET...: a table of the executions each log reached.
set -u
dir=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
if [ "$1" = --summary ]; then
	shift
	printf '%-24s %12s %8s %s\n' target executions seconds crashes
	for t in "$@"; do
		log=$dir/log/$t.log
		runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$log" 2>/dev/null)
		secs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" 2>/dev/null)
		# shellcheck disable=SC2012 # crash-<target>-<sha1>: plain names
		crashes=$(ls "$dir"/crash-"$t"-* 2>/dev/null | wc -l)
		printf '%-24s %12s %8s %s\n' "$t" "${runs:-?}" "${secs:-?}" "$crashes"
	done
	exit 0
fi
t=$1
shift
work=$dir/corpus/$t
mkdir -p "$work" "$dir/log"
set -- "$@" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$dir/crash-$t-"
[ -f "$here/$t.dict" ] && set -- "$@" -dict="$here/$t.dict"
[ -n "${FUZZ_MAXLEN:-}" ] && set -- "$@" -max_len="$FUZZ_MAXLEN"
seeds=${FUZZ_SEEDS:-}
[ -d "$here/corpus/$t" ] && seeds="$here/corpus/$t $seeds"
# Targets that write their input to a file do it in TMPDIR: memory is faster.
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm
echo "=== $t $*"
# shellcheck disable=SC2086 # seeds is a list of directories
"$dir/$t" "$@" "$work" $seeds > "$dir/log/$t.log" 2>&1
rc=$?
grep -E '^(Done|stat::number_of_executed_units|#[0-9]+ *DONE)' "$dir/log/$t.log" | tail -n 2
if [ "$rc" -ne 0 ]; then
	tail -n 60 "$dir/log/$t.log"
	echo "$t: libFuzzer exited with status $rc (inputs: $dir/crash-$t-*)"
	exit 1
fi
