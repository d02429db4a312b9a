#!/usr/bin/env bats
# Stage pytorch's verify failures, each with its hint: one Debian root with a
# real venv and the stand-in wheels installed once (setup_file); each test
# changes what the stand-in torch reports (/etc/fake-torch.json) or the
# loaded driver (/proc/driver/nvidia/version) and runs verify.

load helpers

setup_file() {
	BATS_TEST_TMPDIR=$BATS_FILE_TMPDIR
	setup_torch_root
	torch_profile cu128 2.8.0 0.23.0 2.8.0
	"$GPUPROV" --root "$R" install --profile "$P" --only pytorch > "$BATS_FILE_TMPDIR/install.out" 2>&1 ||
		fail "install failed:" "$(cat "$BATS_FILE_TMPDIR/install.out")"
	# A CPU build beside it, in its own venv.
	sed "s|/opt/venv|/opt/cpu|; s|whl/cu128|whl/cpu|; s|2.8.0|2.7.1|g; s|0.23.0|0.22.1|" "$P" > "$BATS_FILE_TMPDIR/cpu.json"
	"$GPUPROV" --root "$R" install --profile "$BATS_FILE_TMPDIR/cpu.json" --only pytorch > "$BATS_FILE_TMPDIR/install.out" 2>&1 ||
		fail "install failed:" "$(cat "$BATS_FILE_TMPDIR/install.out")"
	stop_https_server
	export R P
}

setup() {
	require_root
	[ -f "$R/opt/venv/pyvenv.cfg" ] || skip "no installed root (setup_file skipped or failed)"
	fake_torch '{"available": true, "devices": ["NVIDIA A100-SXM4-80GB"], "cudnn": 90100, "matmul": 8.0}'
	nvidia_driver 570.86.15
}

@test "pytorch verify: everything in place passes" {
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 0
	assert_stdout_has "runs the CUDA 12.8 build"
}

@test "pytorch verify: CPU-only wheel detected, with its hint" {
	gp --root "$R" verify --profile "$BATS_FILE_TMPDIR/cpu.json" --only pytorch
	assert_status 3
	assert_stdout_has "torch 2.7.1+cpu is a CPU-only wheel"
	assert_stdout_has "torch.version.cuda is None"
	assert_stdout_has "set stages.pytorch.index_url to a CUDA wheel index"
}

@test "pytorch verify: driver too old for the wheel, with its hint" {
	nvidia_driver 470.256.02
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 3
	assert_stdout_has "driver 470.256.02 is older than 525.60.13, the least a CUDA 12.8 build"
	assert_stdout_has "driver too old for the wheel: upgrade the driver"
}

@test "pytorch verify: no NVIDIA module loaded, with its hint" {
	nvidia_driver none
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 3
	assert_stdout_has "no NVIDIA kernel module is loaded"
	assert_stdout_has "install the NVIDIA driver ('gpuprov install --profile $P --only driver --root "
	assert_stdout_has "') and reboot"
}

@test "pytorch verify: no GPU visible, with its hint" {
	fake_torch '{"available": false, "devices": [], "cudnn": 90100}'
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 3
	assert_stdout_has "torch.cuda.is_available() is False"
	assert_stdout_has "no GPU visible to PyTorch: check that the NVIDIA driver is loaded"
}

@test "pytorch verify: import failure, with its hint" {
	fake_torch '{"import_error": "libcudart.so.12: cannot open shared object file"}'
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 3
	assert_stdout_has "ImportError: libcudart.so.12: cannot open shared object file"
	assert_stdout_has "the error names the missing module or library"
}

@test "pytorch verify: a wrong tensor result fails" {
	fake_torch '{"available": true, "devices": ["NVIDIA A100-SXM4-80GB"], "cudnn": 90100, "matmul": 7.0}'
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 3
	assert_stdout_has "(ones(2,2) @ ones(2,2)).sum() on cuda gave a wrong result"
}

@test "pytorch verify: a missing environment fails with the install hint" {
	gp --root "$R" verify --profile "$BATS_FILE_TMPDIR/cpu.json" --only pytorch
	sed "s|/opt/cpu|/opt/none|" "$BATS_FILE_TMPDIR/cpu.json" > "$BATS_TEST_TMPDIR/none.json"
	gp --root "$R" verify --profile "$BATS_TEST_TMPDIR/none.json" --only pytorch
	assert_status 3
	assert_stdout_has "no environment at /opt/none"
	assert_stdout_has "run 'gpuprov install --profile $BATS_TEST_TMPDIR/none.json --only pytorch --root "
}

@test "pytorch verify: writes nothing to the target (no bytecode for what it imports)" {
	sp=$(echo "$R"/opt/venv/lib/python3*/site-packages)
	[ -d "$sp/torch" ] || fail "no torch in $sp"
	find "$sp" -name __pycache__ -prune -exec rm -rf {} +
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 0
	left=$(find "$sp" -name __pycache__)
	[ -z "$left" ] || fail "verify wrote bytecode into the target:" "$left"
}

@test "pytorch verify: a pinned package changed since the install is drift (pytorch.drift_pip_package), with the install hint" {
	m=$(echo "$R"/opt/venv/lib/python3*/site-packages/torchaudio-*.dist-info/METADATA)
	[ -f "$m" ] || fail "no torchaudio METADATA in the venv"
	cp "$m" "$BATS_TEST_TMPDIR/METADATA"
	gp --root "$R" --json verify --profile "$P" --only pytorch
	assert_status 0
	[[ $output != *drift_* ]] || fail "drift right after the install:" "$output"
	sed -i 's/^Version: .*/Version: 2.9.0/' "$m"
	gp --root "$R" --json verify --profile "$P" --only pytorch
	cp "$BATS_TEST_TMPDIR/METADATA" "$m"
	assert_status 3
	JSON=$BATS_TEST_TMPDIR/verify.json
	printf '%s\n' "$output" > "$JSON"
	jeq '[f["level"] for f in d["findings"] if f["id"] == "pytorch.drift_pip_package.torchaudio"]' '["warn"]'
	jeq '[f["hint"] for f in d["findings"] if f["id"] == "pytorch.drift_pip_package.torchaudio"]' \
		"[\"'gpuprov install --profile $P --only pytorch --root $R' installs the pinned version again\"]"
}
