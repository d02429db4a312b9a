#!/usr/bin/env bats
# Stage pytorch, method venv, for real: the cached Debian 12 root
# (tests/fixtures/debroot.sh; skipped when it cannot be built), its own
# python3 -m venv and pip, chrooted by gpuprov, against a PEP 503 index of
# stand-in wheels (tests/fixtures/mkwheels.py) served over HTTPS on
# 127.0.0.1. pip trusts the test CA through the environment's pip.conf
# (stages.pytorch.ca_bundle), as it would a private mirror's.

load helpers

V=/opt/venv

setup() {
	setup_torch_root
}

teardown() {
	stop_https_server
}

@test "pytorch venv: dry-run lists the venv, pip.conf and the exact pip command, changes nothing" {
	torch_profile cu118
	snapshot "$R" before
	gp --root "$R" plan --profile "$P" --only pytorch
	assert_status 0
	assert_stdout_has "pytorch: needed - no environment at $V"
	assert_stdout_has "run python3 -m venv $V"
	assert_stdout_has "create $V/pip.conf"
	assert_stdout_has "+index-url = https://127.0.0.1:$PORT/whl/cu118"
	assert_stdout_has "+cert = $ROOT_CA"
	assert_stdout_has "run $V/bin/python -m pip install --no-input --disable-pip-version-check --no-cache-dir --index-url https://127.0.0.1:$PORT/whl/cu118 torch==2.7.1+cu118 torchvision==0.22.1+cu118 torchaudio==2.7.1+cu118"
	assert_unchanged "$R" before
	[ "$(grep -c GET "$BATS_TEST_TMPDIR/httpd.log")" = 0 ] || fail "the dry run used the network"
}

@test "pytorch venv: install pins the wheels; rerun satisfied; verify passes; version change upgrades" {
	torch_profile cu118
	assert_plan_matches_run "$R" --profile "$P" --only pytorch
	assert_status 0
	[ -f "$R$V/pyvenv.cfg" ] || fail "no venv"
	[ "$(dist_version "$R$V" torch)" = 2.7.1+cu118 ] || fail "torch: $(dist_version "$R$V" torch)"
	[ "$(dist_version "$R$V" torchvision)" = 0.22.1+cu118 ] || fail "torchvision"
	[ "$(dist_version "$R$V" torchaudio)" = 2.7.1+cu118 ] || fail "torchaudio"
	grep -qx "cert = $ROOT_CA" "$R$V/pip.conf" || fail "pip.conf: $(cat "$R$V/pip.conf")"
	[ ! -e "$R/root/.config/pip" ] && [ ! -e "$R/etc/pip.conf" ] || fail "pip config outside the env"
	# Second run: satisfied from the metadata, no command, no request.
	gets=$(grep -c GET "$BATS_TEST_TMPDIR/httpd.log")
	snapshot "$R" installed var/log/gpuprov.log var/lib/gpuprov/state.json
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 0
	assert_stdout_has "pytorch: satisfied - $V: Python 3.11."
	assert_stdout_has "torch==2.7.1+cu118, torchvision==0.22.1+cu118, torchaudio==2.7.1+cu118"
	assert_unchanged "$R" installed var/log/gpuprov.log var/lib/gpuprov/state.json
	[ "$(grep -c GET "$BATS_TEST_TMPDIR/httpd.log")" = "$gets" ] || fail "the rerun used the index"
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 0
	assert_stdout_has "torch 2.7.1+cu118"
	assert_stdout_has "driver 570.86.15 runs the CUDA 11.8 build"
	assert_stdout_has "1 device: NVIDIA A100-SXM4-80GB"
	assert_stdout_has "90100 (9.1.0)"
	assert_stdout_has "(ones(2,2) @ ones(2,2)).sum() on cuda is 8"
	# The profile moves to torch 2.8.0 for CUDA 12.8.
	torch_profile cu128 2.8.0 0.23.0 2.8.0
	gp --root "$R" plan --profile "$P" --only pytorch
	assert_stdout_has "to install: torch 2.7.1+cu118 -> 2.8.0+cu128"
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 0
	[ "$(dist_version "$R$V" torch)" = 2.8.0+cu128 ] || fail "torch: $(dist_version "$R$V" torch)"
	[ "$(dist_version "$R$V" torchaudio)" = 2.8.0+cu128 ] || fail "torchaudio"
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 0
	assert_stdout_has "runs the CUDA 12.8 build"
}

@test "pytorch venv: index unreachable fails clearly, exit 1, nothing installed" {
	torch_profile cu118
	sed -i "s|127.0.0.1:$PORT|127.0.0.1:1|" "$P"
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 1
	assert_stderr_has "pip installed nothing: check that the index https://127.0.0.1:1/whl/cu118 is reachable"
	assert_stderr_has "No matching distribution found for torch==2.7.1+cu118"
	[ -z "$(dist_version "$R$V" torch)" ] || fail "torch was installed"
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 3
	assert_stdout_has "installed: none; the profile wants 2.7.1+cu118"
}

@test "pytorch venv: a wrong sha256 in the index is refused by pip, nothing installed" {
	stop_https_server
	rm -rf "$WWW" "$BATS_TEST_TMPDIR"/httpd.*
	BAD_HASH=torchvision setup_torch_root
	torch_profile cu118
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 1
	assert_stderr_has "Expected sha256 0000000000000000000000000000000000000000000000000000000000000000"
	assert_stderr_has "a wheel does not match the sha256 the index https://127.0.0.1:$PORT/whl/cu118 gives for it"
	[ -z "$(dist_version "$R$V" torch)" ] || fail "torch was installed"
}

@test "pytorch venv: python3-venv goes through the package layer when ensurepip is missing" {
	rm -rf "$R"/usr/lib/python3.11/ensurepip
	sed -i '/^Package: python3.11-venv$/,/^$/s/^Status: .*/Status: deinstall ok config-files/;/^Package: python3-venv$/,/^$/s/^Status: .*/Status: deinstall ok config-files/' \
		"$R/var/lib/dpkg/status"
	torch_profile cu118
	gp --root "$R" plan --profile "$P" --only pytorch
	assert_status 0
	printf '%s\n' "$output" | grep -n "python3-venv\|python3 -m venv" > "$BATS_TEST_TMPDIR/order"
	head -1 "$BATS_TEST_TMPDIR/order" | grep -q python3-venv ||
		fail "python3-venv is not installed before the venv:" "$output"
	grep -q "python3 -m venv" "$BATS_TEST_TMPDIR/order" || fail "no venv in the plan"
}

@test "pytorch venv: a python the distro does not have blocks, naming both versions" {
	torch_profile cu118 2.7.1 0.22.1 2.7.1 ', "python": "3.10"'
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 4
	assert_stderr_has "stages.pytorch.python is 3.10, but method venv uses the distro's Python, 3.11"
}

@test "pytorch venv: a plain-http mirror by name (allow_insecure_http) gets trusted-host; https never does" {
	torch_profile cu118
	gp --root "$R" plan --profile "$P" --only pytorch
	assert_status 0
	refute_stdout_has "trusted-host"
	# pip trusts 127.0.0.0/8 by address only: reach the loopback index by a
	# name, as a lab mirror is, over plain HTTP.
	stop_https_server
	rm -f "$BATS_TEST_TMPDIR"/httpd.in "$BATS_TEST_TMPDIR"/httpd.out
	HTTPD_TLS= HTTPD_ARGS=--tree start_https_server
	echo "127.0.0.1 wheels.lab.test" >> "$R/etc/hosts"
	torch_profile cu118
	sed -i "s|https://127.0.0.1:$PORT/|http://wheels.lab.test:$PORT/|; s|^{|{ \"allow_insecure_http\": true,|" "$P"
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 0
	[ "$(dist_version "$R$V" torch)" = 2.7.1+cu118 ] || fail "torch: $(dist_version "$R$V" torch)"
	grep -A1 -x "trusted-host =" "$R$V/pip.conf" | grep -qx "    wheels.lab.test:$PORT" ||
		fail "pip.conf: $(cat "$R$V/pip.conf")"
}

@test "pytorch venv: a pip failure's hint quotes pip's last error lines, bounded, without control characters" {
	# A PEP 503 page whose only link is a wheel the index does not have:
	# pip reports its own error, and gpuprov must pass it on.
	torch_profile cu118 9.9.9
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 1
	assert_stderr_has "pip said: ERROR: Could not find a version that satisfies the requirement torch==9.9.9+cu118"
	assert_stderr_has "ERROR: No matching distribution found for torch==9.9.9+cu118"
	local said=${stderr#*pip said: }
	said=${said%%$'\n'*}
	[ "${#said}" -le 900 ] || fail "the quote is not bounded: ${#said} characters"
	# Control characters in pip's output: tests/unit/test_util.c.
}
