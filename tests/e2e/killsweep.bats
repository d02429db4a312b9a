#!/usr/bin/env bats
# KILL-POINT SWEEP: gpuprov is SIGKILLed right after its K-th effect call
# (tests/fixtures/killshim.c, LD_PRELOAD: every mkdir, create, rename,
# symlink, unlink and fork of its main thread), for every K up to the N calls
# of the run, in an install before the reboot and in the rerun after it.
# After each kill the same install runs again without the shim, through the
# simulated reboot, and the root must then be exactly what an uninterrupted
# install gives: the same tree (paths, types, modes, owners, sizes, link
# targets, contents), the same journal, no temporary file, nothing running.
#
# Normalised, because two runs differ there legitimately: the journal's
# "time" (when a stage or the reboot was recorded) and "stat" (a file's
# inode and times) members; the run log (var/log/gpuprov.log, times and
# pids) and the stubs' command log (a killed command runs again) are left
# out of the tree. Nothing else is.
#
# KILLSWEEP_STRIDE=S runs every S-th point (K = 1, 1+S, ...; default 5, as
# in make check); `make killsweep` runs all of them (STRIDE=1).

load helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-1800}
STRIDE=${KILLSWEEP_STRIDE:-5}
: "${KILLSHIM:=$REPO_ROOT/build/killshim.so}"
JOURNAL=var/lib/gpuprov/state.json
EXCLUDE="var/log/gpuprov.log var/log/stub-commands.log $JOURNAL"

setup() {
	require_root
	[ -f "$KILLSHIM" ] || fail "no kill shim at $KILLSHIM (make build/killshim.so, or set KILLSHIM)"
	W=$BATS_TEST_TMPDIR
	ARGS=()
	FAILED=()
}

teardown() {
	local p
	for p in $(procs_in_root "$W/point"); do
		kill -KILL "$p" 2> /dev/null || true
	done
	stop_https_server
}

# The nouveau,env scenario: a fresh server (nouveau loaded) with CUDA dirs.
nouveau_env() {
	mkroot "$W/template" --cuda
	ARGS=(install --profile "$PROFILE" --only nouveau,env)
}

# The nouveau,cudnn,env scenario: cuDNN from the loopback HTTPS server, as
# cudnn.bats installs it (the server lives for the whole sweep).
nouveau_cudnn_env() {
	mkroot "$W/template" --cuda --ldconfig-cache
	HTTPD_ARGS="--max-seconds $BATS_TEST_TIMEOUT" start_https_server
	make_tarball "$WWW/cudnn.tar.xz"
	write_profile "$(sha256sum < "$WWW/cudnn.tar.xz" | cut -d' ' -f1)"
	ARGS=(--ca-file "$CA" install --profile "$P" --only nouveau,cudnn,env)
}

# gp_run WANT [ENV...]: the install on $W/point (with ENV set), which must
# exit WANT; else the point fails with the output.
gp_run() {
	local want=$1 rc=0
	shift
	env "$@" "$GPUPROV" --root "$W/point" "${ARGS[@]}" > "$W/out" 2>&1 || rc=$?
	[ "$rc" -eq "$want" ] && return 0
	POINT_ERR="exit $rc, want $want: $(tail -n 5 "$W/out")"
	return 1
}

# killed_run K: the install with the shim set to kill after call K; false
# (nothing killed) once K is past the run's last call.
killed_run() {
	local rc=0
	# (ASan wants to come first; the shim intercepts only libc calls. The
	# outer stderr: bash's "Killed" notice.)
	{
		env LD_PRELOAD="$KILLSHIM" GPUPROV_KILL_AT="$1" GPUPROV_KILL_COUNT="$W/count" \
			ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
			"$GPUPROV" --root "$W/point" "${ARGS[@]}" > "$W/out" 2>&1 || rc=$?
	} 2> /dev/null
	[ "$rc" -eq 137 ]
}

# The tree and the journal of $1, normalised as the header says.
fingerprint_root() {
	# shellcheck disable=SC2086
	manifest "$1" $EXCLUDE
	journal_view "$1/$JOURNAL"
}

# Checks $W/point against the uninterrupted run's $W/ref.fp; false (with
# POINT_ERR) when it differs, a temp file is left or a process still runs.
point_converged() {
	local tmp left
	fingerprint_root "$W/point" > "$W/point.fp"
	if ! diff -u "$W/ref.fp" "$W/point.fp" > "$W/point.diff"; then
		POINT_ERR="differs from the uninterrupted run (- uninterrupted, + killed and rerun): $(tail -n +3 "$W/point.diff" | head -n 30)"
		return 1
	fi
	tmp=$(temp_files "$W/point")
	[ -z "$tmp" ] || { POINT_ERR="temporary files left: $tmp"; return 1; }
	left=$(procs_in_root "$W/point")
	[ -z "$left" ] || { POINT_ERR="still running in the root: $left"; return 1; }
}

# The uninterrupted install (exit 5), the reboot, the install after it (0).
reference() {
	rm -rf "$W/point"
	cp -a "$W/template" "$W/point"
	gp_run 5 || fail "reference install: $POINT_ERR"
	simulate_reboot "$W/point"
	gp_run 0 || fail "reference install after the reboot: $POINT_ERR"
	fingerprint_root "$W/point" > "$W/ref.fp"
}

# sweep PHASE: every STRIDE-th kill point of the install before the reboot
# (PHASE first) or of the one after it (PHASE after-reboot).
sweep() {
	local phase=$1 k points=0
	for ((k = 1; ; k += STRIDE)); do
		rm -rf "$W/point" "$W/count"
		cp -a "$W/template" "$W/point"
		POINT_ERR=
		if [ "$phase" = after-reboot ]; then
			gp_run 5 || fail "install before the reboot: $POINT_ERR"
			simulate_reboot "$W/point"
		fi
		killed_run "$k" || break
		points=$((points + 1))
		if [ "$phase" = first ]; then
			gp_run 5 && simulate_reboot "$W/point" && gp_run 0 && point_converged
		else
			gp_run 0 && point_converged
		fi || FAILED+=("$phase K=$k: $POINT_ERR")
		for p in $(procs_in_root "$W/point"); do
			kill -KILL "$p" 2> /dev/null || true
		done
	done
	[ -s "$W/count" ] || fail "$phase: the shim wrote no call count"
	echo "# $phase: $points kill points of $(cat "$W/count") (stride $STRIDE)" >&3
	[ "$points" -gt 0 ] || fail "$phase: no kill point reached"
}

report() {
	[ "${#FAILED[@]}" -eq 0 ] && return 0
	printf '%s\n' "${#FAILED[@]} kill points did not converge:" "${FAILED[@]}" >&2
	return 1
}

@test "killsweep: --only nouveau,env killed at every effect converges to the uninterrupted run" {
	nouveau_env
	reference
	sweep first
	sweep after-reboot
	report
}

@test "killsweep: --only nouveau,cudnn,env killed at every effect converges to the uninterrupted run" {
	nouveau_cudnn_env
	reference
	sweep first
	sweep after-reboot
	report
}
