#!/usr/bin/env bats
# install applies the nouveau and env stages on an Ubuntu 22.04 + A100 root:
# the files, the command log, the exit code, the journal and the status
# match what the contract says.

load helpers

setup() {
	setup_ubuntu_root
}

@test "install: writes the expected files and runs update-initramfs -u then ldconfig" {
	assert_plan_matches_run "$R" --profile "$PROFILE" --only "$ONLY"
	assert_status 5
	assert_same_file "$EXPECTED/ubuntu2204/blacklist-nouveau.conf" \
		"$R/etc/modprobe.d/blacklist-nouveau.conf"
	assert_same_file "$EXPECTED/ubuntu2204/gpuprov-cuda.sh" "$R/etc/profile.d/gpuprov-cuda.sh"
	assert_same_file "$EXPECTED/ubuntu2204/gpuprov-cuda.conf" \
		"$R/etc/ld.so.conf.d/gpuprov-cuda.conf"
	# The command log: update-initramfs -u, then ldconfig, nothing else.
	assert_same_file "$EXPECTED/ubuntu2204/stub-commands.log" "$R/var/log/stub-commands.log"
	# The stub rewrote the initramfs from the modprobe configuration gpuprov wrote.
	assert_same_file "$EXPECTED/ubuntu2204/initrd.img" "$R/boot/initrd.img-5.15.0-91-generic"
	# ldconfig ran after the ld.so.conf.d file was in place.
	grep -qx /usr/local/cuda-11.8/lib64 "$R/etc/ld.so.cache"
	# Written with the mode and owner they should have.
	for f in etc/modprobe.d/blacklist-nouveau.conf etc/profile.d/gpuprov-cuda.sh \
		etc/ld.so.conf.d/gpuprov-cuda.conf; do
		[ "$(stat -c '%a %U:%G' "$R/$f")" = "644 root:root" ] ||
			fail "$f: mode/owner $(stat -c '%a %U:%G' "$R/$f"), want 644 root:root"
	done
	# Nothing half-done left behind: no temp files next to the written ones.
	leftovers=$(find "$R/etc" "$R/var/lib/gpuprov" -name '.#*')
	[ -z "$leftovers" ] || fail "temp files left behind:" "$leftovers"
	# The unrelated configuration is untouched.
	[ "$(cat "$R/etc/modprobe.d/alsa-base.conf")" = "# unrelated configuration that gpuprov must leave alone
options snd-hda-intel power_save=1" ]
}

@test "install: exits 5 with one line on stderr because nouveau is loaded" {
	install_ubuntu
	assert_status 5
	assert_one_stderr_line
	assert_stderr_has "reboot"
	assert_stderr_has "install --profile $PROFILE"
	assert_stdout_has "nouveau is loaded"
}

@test "install: the journal records every file written with its sha256" {
	install_ubuntu
	assert_status 5
	j=$R/var/lib/gpuprov/state.json
	[ -f "$j" ] || fail "no journal at $j"
	[ "$(json_get "$j" 'd["profile"]["name"]')" = "$PROFILE" ]
	for f in /etc/modprobe.d/blacklist-nouveau.conf /etc/profile.d/gpuprov-cuda.sh \
		/etc/ld.so.conf.d/gpuprov-cuda.conf; do
		want=$(sha256sum < "$R$f" | cut -d' ' -f1)
		got=$(json_get "$j" "d['files'].get('$f', {}).get('sha256')")
		[ "$got" = "$want" ] || fail "journal sha256 of $f: got $got, want $want"
	done
	[ "$(json_get "$j" 'd["files"]["/etc/modprobe.d/blacklist-nouveau.conf"]["stage"]')" = nouveau ]
	[ "$(json_get "$j" 'd["files"]["/etc/profile.d/gpuprov-cuda.sh"]["stage"]')" = env ]
	# Nothing was replaced, so nothing was backed up.
	[ "$(json_get "$j" 'sorted(k for f in d["files"].values() for k in f if k == "backup")')" = "[]" ]
	[ ! -e "$R/var/lib/gpuprov/backup" ] || fail "backup directory created with nothing to back up"
	# The pending reboot is recorded with the boot id it was asked in.
	[ "$(json_get "$j" 'd["reboot"]["boot_id"]')" = 11111111-2222-4333-8444-555555555555 ]
	# (state names: "reboot pending" or "reboot_pending")
	json_get "$j" 'd["stages"]["nouveau"]["state"]' | grep -Eqx 'reboot[ _]pending' ||
		fail "journal: nouveau is not reboot pending"
	[ "$(json_get "$j" 'd["stages"]["env"]["state"]')" = "done" ]
	# The run log names what was written and run.
	grep -q 'wrote /etc/modprobe.d/blacklist-nouveau.conf' "$R/var/log/gpuprov.log"
	grep -q 'run update-initramfs -u' "$R/var/log/gpuprov.log"
}

@test "install: status shows the pending reboot" {
	install_ubuntu
	assert_status 5
	gp --root "$R" status
	assert_status 0
	assert_stdout_has "profile: $PROFILE"
	assert_stdout_has "reboot pending: nouveau"
	! printf '%s\n' "$output" | grep -qx "reboot pending: no" || fail "status says no reboot is pending"
	printf '%s\n' "$output" | grep -Eq '^  nouveau +reboot[ _]pending' ||
		fail "status does not show nouveau as reboot pending:" "$output"
	printf '%s\n' "$output" | grep -Eq '^  env +done' ||
		fail "status does not show env as done:" "$output"
	printf '%s\n' "$output" | grep -Eq "^  pytorch +never run" ||
		fail "status does not show pytorch as never run:" "$output"
	assert_stdout_has "files written: 5"  # blacklist, 2 env files, reboot-required and its .pkgs

	gp --root "$R" --json status
	assert_status 0
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/status.json"
	[ "$(json_get "$BATS_TEST_TMPDIR/status.json" '[s["name"] for s in d["stages"]]')" = \
		"$(stage_names_json)" ]
	[ "$(json_get "$BATS_TEST_TMPDIR/status.json" 'd["reboot"] is not None')" = true ]
}

@test "install: the profile script sourced twice in busybox sh adds each directory once" {
	install_ubuntu
	assert_status 5
	# -eu: the script must also be safe under errexit and nounset.
	run chroot "$R" /bin/env -i PATH=/usr/bin:/bin /bin/sh -eu -c '
		. /etc/profile.d/gpuprov-cuda.sh
		. /etc/profile.d/gpuprov-cuda.sh
		echo "PATH=$PATH"
		echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
		echo "CUDA_HOME=$CUDA_HOME"
		echo "NCCL_DEBUG=$NCCL_DEBUG"
		echo "CUDA_CACHE_PATH=$CUDA_CACHE_PATH"
		echo "CUDA_CACHE_MAXSIZE=$CUDA_CACHE_MAXSIZE"'
	[ "$status" -eq 0 ] || fail "sourcing failed ($status): $output"
	[ "${lines[0]}" = "PATH=/usr/local/cuda-11.8/bin:/usr/bin:/bin" ] || fail "got ${lines[0]}"
	[ "${lines[1]}" = "LD_LIBRARY_PATH=/usr/local/cuda-11.8/lib64" ] || fail "got ${lines[1]}"
	[ "${lines[2]}" = "CUDA_HOME=/usr/local/cuda-11.8" ]
	[ "${lines[3]}" = "NCCL_DEBUG=WARN" ]
	[ "${lines[4]}" = "CUDA_CACHE_PATH=/var/cache/cuda" ]
	[ "${lines[5]}" = "CUDA_CACHE_MAXSIZE=4294967296" ]

	# With the directories already present (a login shell that sourced it
	# before, or an existing LD_LIBRARY_PATH), nothing is added twice.
	run chroot "$R" /bin/env -i PATH=/bin:/usr/local/cuda-11.8/bin \
		LD_LIBRARY_PATH=/opt/lib /bin/sh -c '
		. /etc/profile.d/gpuprov-cuda.sh
		. /etc/profile.d/gpuprov-cuda.sh
		echo "$PATH"
		echo "$LD_LIBRARY_PATH"'
	[ "$status" -eq 0 ] || fail "sourcing failed ($status): $output"
	[ "${lines[0]}" = "/bin:/usr/local/cuda-11.8/bin" ] || fail "PATH: ${lines[0]}"
	[ "${lines[1]}" = "/usr/local/cuda-11.8/lib64:/opt/lib" ] || fail "LD_LIBRARY_PATH: ${lines[1]}"
}

@test "install: verify right after the install fails only on the nouveau still loaded" {
	install_ubuntu
	assert_status 5
	gp --root "$R" verify --only "$ONLY"
	assert_status 3
	assert_stdout_has "fail  nouveau not loaded"
	assert_stdout_has "pass  blacklist"
	assert_stdout_has "pass  initramfs"
	refute_stdout_has "fail  linker configuration"
}

@test "install: the report says what the run changed; plan and --json keep 'needed'" {
	gp --root "$R" plan --profile "$PROFILE" --only "$ONLY"
	assert_stdout_has "nouveau: needed - "
	assert_stdout_has "summary: 2 needed"
	install_ubuntu
	assert_status 5
	assert_stdout_has "gpuprov install: profile"
	assert_stdout_has "nouveau: changed - "
	assert_stdout_has "env: changed - "
	assert_stdout_has "summary: 2 changed"
	refute_stdout_has "needed"
	# JSON: "state" stays what check said, "changed" is what the run did.
	rm -rf "$R"
	setup_ubuntu_root
	gp --root "$R" install --json --profile "$PROFILE" --only "$ONLY"
	assert_status 5
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/run.json"
	[ "$(json_get "$BATS_TEST_TMPDIR/run.json" '[(s["name"], s["state"], s["changed"]) for s in d["stages"] if s["name"] in ("nouveau", "driver")]')" = '[["nouveau", "needed", true], ["driver", "skipped", false]]' ] ||
		fail "stages: $(json_get "$BATS_TEST_TMPDIR/run.json" 'd["stages"]')"
}
