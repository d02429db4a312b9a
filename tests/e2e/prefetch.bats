#!/usr/bin/env bats
# Downloads for later stages start while earlier stages apply: the cuDNN
# tarball is fetched in the background while the nouveau stage runs
# update-initramfs. No sleeps: the loopback server holds the tarball's
# request (hold=1) and announces it on a fifo; the update-initramfs stub
# waits (bounded) for that announcement before it releases the answer and
# finishes. Without prefetching nobody asks for the tarball while the stub
# runs, the stub gives up after 20 s and says so.

load helpers

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --cuda --ldconfig-cache
	HTTPD_ARGS="--notify $R/tmp/httpd-seen --release $R/tmp/httpd-release"
	start_https_server
	make_tarball "$WWW/cudnn.tar.xz"
	SHA=$(sha256sum < "$WWW/cudnn.tar.xz" | cut -d' ' -f1)
	write_profile "$SHA" "https://127.0.0.1:$PORT/cudnn.tar.xz?hold=1"
	# update-initramfs (stage nouveau) waits for the tarball's request.
	stub=$R/usr/sbin/update-initramfs
	{
		head -n 2 "$stub"
		cat <<-'EOF'
		exec 8<> /tmp/httpd-seen
		if read -r -t 20 line <&8; then
			echo "seen while update-initramfs ran: $line" >> /var/log/prefetch.log
		else
			echo "no request while update-initramfs ran" >> /var/log/prefetch.log
		fi
		echo go > /tmp/httpd-release
		EOF
		tail -n +3 "$stub"
	} > "$BATS_TEST_TMPDIR/stub"
	cat "$BATS_TEST_TMPDIR/stub" > "$stub"
}

teardown() {
	stop_https_server
}

requests() {
	grep -c '^GET' "$BATS_TEST_TMPDIR/httpd.log" || true
}

# The cudnn stage used the background download: it waited for it, or
# extracted while it was still running.
took_background_download() {
	grep -Eq "cudnn: (download .*: fetched in the background|extract .* while it downloads)" \
		"$R/var/log/gpuprov.log" ||
		fail "cudnn did not take the background download:" "$(cat "$R/var/log/gpuprov.log")"
}

@test "prefetch: cuDNN downloads while the nouveau stage applies, once" {
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only nouveau,cudnn
	# nouveau asks for a reboot; cudnn does not need it and goes on.
	assert_status 5
	[ "$(cat "$R/var/log/prefetch.log")" = \
		"seen while update-initramfs ran: GET /cudnn.tar.xz?hold=1 range=-" ] ||
		fail "the tarball was not requested while update-initramfs ran:" \
			"$(cat "$R/var/log/prefetch.log")"
	[ "$(requests)" = 1 ] || fail "expected one request, got $(requests)"
	grep -q "downloading in the background: cudnn 8.9.7.29" "$R/var/log/gpuprov.log" ||
		fail "no background download in the run log"
	took_background_download
	[ -f "$R/usr/local/cuda-11.8/cudnn-8.9.7.29/include/cudnn_version.h" ] ||
		fail "cuDNN not installed"
	assert_journal_true "$R"
}

@test "prefetch: a 404 is reported for the artifact when cudnn needs it; nouveau applied" {
	write_profile "$SHA" "https://127.0.0.1:$PORT/missing.tar.xz?hold=1"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only nouveau,cudnn
	assert_status 1
	assert_stderr_has "cudnn: cudnn 8.9.7.29 (https://127.0.0.1:$PORT/missing.tar.xz?hold=1): HTTP 404 from the server; check the URL"
	[ "$(cat "$R/var/log/prefetch.log")" = \
		"seen while update-initramfs ran: GET /missing.tar.xz?hold=1 range=-" ] ||
		fail "not requested while update-initramfs ran:" "$(cat "$R/var/log/prefetch.log")"
	[ "$(requests)" = 1 ] || fail "expected one request, got $(requests)"
	took_background_download
	[ -f "$R/etc/modprobe.d/blacklist-nouveau.conf" ] &&
		grep -q "^/usr/sbin/update-initramfs" "$R/var/log/stub-commands.log" ||
		fail "nouveau did not apply"
	[ ! -e "$R/usr/local/cuda-11.8/cudnn-8.9.7.29" ] || fail "cudnn installed something"
}

@test "prefetch: never in a dry run, nor offline" {
	gp --root "$R" --ca-file "$CA" plan --profile "$P" --only nouveau,cudnn
	assert_status 5
	gp --root "$R" --ca-file "$CA" --offline install --profile "$P" --only nouveau,cudnn
	assert_status 1
	assert_stderr_has "offline, and cudnn 8.9.7.29"
	[ "$(requests)" = 0 ] || fail "the network was used: $(cat "$BATS_TEST_TMPDIR/httpd.log")"
}

@test "prefetch: SIGTERM during a background download stops the run at once" {
	# This time update-initramfs says when the held request arrived, then
	# blocks until it is killed; the request is never released.
	stub=$R/usr/sbin/update-initramfs
	cat > "$stub" <<-'EOF'
	#!/bin/sh
	exec 8<> /tmp/httpd-seen
	read -r -t 20 line <&8 || line="no request"
	echo "$line" > /tmp/prefetch-ready
	exec 9<> /tmp/prefetch-block
	read -r _ <&9
	EOF
	mkfifo "$R/tmp/prefetch-ready" "$R/tmp/prefetch-block"
	local fifo=$BATS_TEST_TMPDIR/gp-watch w watch line rc=0
	open_fifo_reader "$fifo" watch
	exec {w}> "$fifo"
	"$GPUPROV" --root "$R" --ca-file "$CA" install --profile "$P" --only nouveau,cudnn \
		9>&"$w" {w}>&- {watch}<&- 3>&- > "$BATS_TEST_TMPDIR/out" 2>&1 &
	local pid=$!
	exec {w}>&-
	line=$(read_fifo_line "$R/tmp/prefetch-ready" "$pid" 30) ||
		fail "update-initramfs did not start:" "$(cat "$BATS_TEST_TMPDIR/out")"
	[ "$line" = "GET /cudnn.tar.xz?hold=1 range=-" ] || fail "update-initramfs saw: $line"
	kill -TERM "$pid"
	await_eof "$watch" 10 ||
		fail "gpuprov still runs 10 s after SIGTERM:" "$(cat "$BATS_TEST_TMPDIR/out")"
	exec {watch}<&-
	wait "$pid" || rc=$?
	[ "$rc" = 143 ] || fail "exit $rc, want 143:" "$(cat "$BATS_TEST_TMPDIR/out")"
	grep -q "stopped because gpuprov received signal 15" "$BATS_TEST_TMPDIR/out" ||
		fail "no word of the signal:" "$(cat "$BATS_TEST_TMPDIR/out")"
	[ -e "$R/var/cache/gpuprov/$SHA.part" ] || fail "the partial download is gone"
	[ ! -e "$R/var/cache/gpuprov/$SHA" ] || fail "the download finished"
	for p in $(procs_in_root "$R"); do
		kill -KILL "$p"
		fail "still running in the root: $p"
	done
}

@test "prefetch: one download at a time, in the order the stages apply" {
	# The driver's runfile and cuDNN's tarball on one link: the runfile,
	# which the earlier stage needs, is fetched whole before the tarball
	# starts (shared, it would arrive late with the other). The run's
	# --json events say when each transfer started and ended.
	rm -rf "$R"
	mkroot "$R" --cuda --ldconfig-cache --nouveau unloaded --pkg-stubs
	local ver=580.95.05
	cat > "$WWW/NVIDIA-Linux-x86_64-$ver.run" <<-EOF
	#!/bin/sh
	echo "runfile \$*" >> /var/log/stub-commands.log
	mkdir -p /usr/lib/x86_64-linux-gnu
	echo stand-in > /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.$ver
	EOF
	local dsha
	dsha=$(sha256sum < "$WWW/NVIDIA-Linux-x86_64-$ver.run" | cut -d' ' -f1)
	P=$BATS_TEST_TMPDIR/order.json
	cat > "$P" <<-JSON
	{ "name": "prefetch-order", "extends": "distro/ubuntu2204",
	  "stages": {
	    "driver": { "method": "runfile", "version": "$ver", "modules": "open",
	                "url": "https://127.0.0.1:$PORT/NVIDIA-Linux-x86_64-$ver.run", "sha256": "$dsha" },
	    "cuda": { "method": "repo", "version": "11.8", "path": "/usr/local/cuda-11.8" },
	    "cudnn": { "method": "tarball", "version": "8.9.7.29", "cuda": "11",
	               "url": "https://127.0.0.1:$PORT/cudnn.tar.xz", "sha256": "$SHA" } } }
	JSON
	gp --root "$R" --ca-file "$CA" --json install --profile "$P" --only driver,cudnn
	assert_status 5
	local events
	events=$(printf '%s\n' "$stderr" | jq -rc 'select(.event | test("^download_(start|done)$")) | "\(.event) \(.name)"' 2> /dev/null | uniq | tr '\n' ';')
	[ "$events" = "download_start NVIDIA-Linux-x86_64-$ver.run;download_done NVIDIA-Linux-x86_64-$ver.run;download_start cudnn 8.9.7.29;download_done cudnn 8.9.7.29;" ] ||
		fail "downloads not one after the other in stage order: $events" "$stderr"
	grep -q "downloading in the background: NVIDIA-Linux-x86_64-$ver.run, cudnn 8.9.7.29" "$R/var/log/gpuprov.log" ||
		fail "not both in the background:" "$(cat "$R/var/log/gpuprov.log")"
	grep -q "^runfile --silent" "$R/var/log/stub-commands.log" || fail "the runfile did not run"
	took_background_download
	[ -f "$R/usr/local/cuda-11.8/cudnn-8.9.7.29/include/cudnn_version.h" ] || fail "cuDNN not installed"
	[ "$(requests)" = 2 ] || fail "expected two requests, got $(requests)"
}
