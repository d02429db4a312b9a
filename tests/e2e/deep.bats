#!/usr/bin/env bats
# verify --deep end to end, against stand-in NVML, libcuda and cuBLAS
# (tests/fixtures/fakenv/: fakenvml.c + fakenvml_health.c, fakecuda.c +
# fakecuda_deep.c + fakecuda_p2p.c, fakecublas.c, fakecublaslt.c) in one busybox root with two H100s and the
# driver installed, shared by the tests. The fake libcuda reports elapsed
# time from the configured throughput (fakedeep.h), so every figure below
# is exact and the runs take no real GPU time. No test here touches a GPU.

load helpers

FAKENV=$REPO_ROOT/tests/fixtures/fakenv
LIBDIR=usr/lib/x86_64-linux-gnu
NCCL_WHEEL=opt/ncclenv/lib/python3.11/site-packages/nvidia/nccl/lib

setup_file() {
	require_root
	local lib=$BATS_FILE_TMPDIR/fakenv
	mkdir -p "$lib"
	cc -shared -fPIC -o "$lib/libnvidia-ml.so.1" -Wl,-soname,libnvidia-ml.so.1 \
		"$FAKENV/fakenvml.c" "$FAKENV/fakenvml_health.c" "$FAKENV/fakenvml_fabric.c" ||
		fail "cannot build the fake NVML"
	cc -shared -fPIC -o "$lib/libcuda.so.1" -Wl,-soname,libcuda.so.1 \
		"$FAKENV/fakecuda.c" "$FAKENV/fakecuda_deep.c" "$FAKENV/fakecuda_p2p.c" || fail "cannot build the fake libcuda"
	cc -shared -fPIC -o "$lib/libcublas.so.12" -Wl,-soname,libcublas.so.12 \
		"$FAKENV/fakecublas.c" -ldl || fail "cannot build the fake cuBLAS"
	cc -shared -fPIC -o "$lib/libcublasLt.so.12" -Wl,-soname,libcublasLt.so.12 \
		"$FAKENV/fakecublaslt.c" -ldl || fail "cannot build the fake cuBLASLt"
	cc -shared -fPIC -o "$lib/libnccl.so.2" -Wl,-soname,libnccl.so.2 \
		"$FAKENV/fakenccl.c" -ldl || fail "cannot build the fake NCCL"
	export DEEP_ROOT=$BATS_FILE_TMPDIR/root DEEP_PROFILE=$BATS_FILE_TMPDIR/drv.json
	local R=$DEEP_ROOT
	mkroot "$R" --nouveau unloaded --pkg-stubs --gpu 2330 --gpu 2330
	cat > "$DEEP_PROFILE" <<'JSON'
{ "name": "deep-test", "extends": "distro/ubuntu2204",
  "stages": { "driver": { "method": "apt", "branch": "535", "flavor": "server",
                          "modules": "proprietary" } } }
JSON
	# Exit 5: done, reboot required.
	local rc=0
	"$GPUPROV" --root "$R" install --profile "$DEEP_PROFILE" > /dev/null 2>&1 || rc=$?
	[ "$rc" -eq 5 ] || fail "cannot install the driver into the fixture root (exit $rc)"
	mkdir -p "$R/proc/driver/nvidia" "$R/sys/bus/pci/drivers/nvidia" "$R/$LIBDIR"
	printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun Jan 1\n' \
		> "$R/proc/driver/nvidia/version"
	echo "nvidia 56000000 0 - Live 0x0" >> "$R/proc/modules"
	for d in 0000:17:00.0 0000:18:00.0; do
		ln -sfn ../../../bus/pci/drivers/nvidia "$R/sys/bus/pci/devices/$d/driver"
	done
	cp "$lib/libnvidia-ml.so.1" "$lib/libcuda.so.1" "$lib/libcublas.so.12" \
		"$lib/libcublasLt.so.12" "$R/$LIBDIR/"
	# A profile with the pytorch stage, whose environment has NCCL's wheel.
	export DEEP_NCCL_PROFILE=$BATS_FILE_TMPDIR/torch.json NCCL_WHEEL=$NCCL_WHEEL
	mkdir -p "$R/$NCCL_WHEEL"
	cp "$lib/libnccl.so.2" "$R/$NCCL_WHEEL/"
	cat > "$DEEP_NCCL_PROFILE" <<'JSON'
{ "name": "deep-test", "extends": "distro/ubuntu2204",
  "stages": { "driver": { "method": "apt", "branch": "535", "flavor": "server",
                          "modules": "proprietary" },
              "pytorch": { "method": "venv", "prefix": "/opt/ncclenv", "python": "3.11",
                           "packages": ["torch==2.7.1"] } } }
JSON
}

# deep KEY=VALUE... -- ARGS...: /etc/fakenv.conf is a healthy pair of H100
# SXM plus these lines (fakedeep.h), then gpuprov --format FORMAT verify
# ARGS (FORMAT: $DEEP_FORMAT, default json); the root's kernel log is
# $DEEP_KMSG (none when unset).
deep() {
	R=$DEEP_ROOT
	{
		printf '%s\n' mode=ok version=535.183.01 cuda=12020 count=2 persistence=1 \
			"name=NVIDIA H100 80GB HBM3"
		while [ $# -gt 0 ] && [ "$1" != -- ]; do
			printf '%s\n' "$1"
			shift
		done
	} > "$R/etc/fakenv.conf"
	# The kernel log: a regular file stands in for /dev/kmsg in a root.
	rm -f "$R/dev/kmsg"
	[ -z "${DEEP_KMSG-}" ] || mkdir -p "$R/dev"
	[ -z "${DEEP_KMSG-}" ] || printf '%s\n' "$DEEP_KMSG" > "$R/dev/kmsg"
	[ "${1-}" = -- ] && shift
	gp --root "$R" --format "${DEEP_FORMAT:-json}" verify --profile "$DEEP_PROFILE" \
		--only driver "$@"
	assert_documented_status
}

# assert_ids_listed: the report in $output keeps the rules of
# docs/findings.md (findings_check.py: listed, unique, one id per check).
assert_ids_listed() {
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/report.json"
	local out
	out=$("$PYTHON" "$BATS_TEST_DIRNAME/findings_check.py" reports "$REPO_ROOT/docs/findings.md" \
		"$BATS_TEST_TMPDIR/report.json") || fail "finding ids: $out"
}

# finding ID: "LEVEL EVIDENCE" of the finding ID in $output, or "absent".
finding() {
	"$PYTHON" -c 'import json, sys
for f in json.loads(sys.argv[1])["findings"]:
    if f["id"] == sys.argv[2]:
        print(f["level"], f["evidence"]); break
else:
    print("absent")' "$output" "$1"
}

# assert_finding ID LEVEL [TEXT]: the finding ID has LEVEL (and TEXT in its
# evidence).
assert_finding() {
	local got
	got=$(finding "$1")
	case "$got" in
	"$2 "*"${3-}"*) ;;
	*) show_run; fail "finding $1: expected '$2 ...${3-}...', got '$got'" ;;
	esac
}

@test "deep: two healthy H100s pass, every figure measured against the model's" {
	DEEP_KMSG="4,1001,6000,-;NVRM: Xid (PCI:0000:18:00): 13, pid=42, name=python, Graphics Exception" \
		deep -- --deep=quick
	assert_status 0
	for g in 0 1; do
		for c in ecc row_remap pcie_link clocks thermal nvlink verdict; do
			assert_finding "deep.$c.gpu$g" pass
		done
	done
	# 800 TFLOPS against 0.80 x 989; 3000 GB/s (read + written) against
	# 0.80 x 3350; 52 GB/s against the 50 of a Gen5 x16 link.
	assert_finding deep.gemm_bf16.gpu0 pass "800.0 TFLOPS, expected 791.2, 101% of it"
	assert_finding deep.gemm_fp16.gpu1 pass "800.0 TFLOPS"
	assert_finding deep.gemm_tf32.gpu0 pass "400.0 TFLOPS, expected 396.0"
	# 1600 FP8 TFLOPS through cuBLASLt against 0.80 x 1979.
	assert_finding deep.gemm_fp8.gpu1 pass "1600.0 TFLOPS, expected 1583.2, 101% of it"
	assert_finding deep.gemm_fp8.gpu0 pass \
		"cuBLASLt FP8 E4M3 GEMM, BF16 out (/$LIBDIR/libcublasLt.so.12)"
	assert_finding deep.gemm_bf16.gpu0 pass "cuBLAS GEMM (/$LIBDIR/libcublas.so.12)"
	assert_finding deep.memory_bandwidth.gpu0 pass "3000.0 GB/s, expected 2680.0"
	assert_finding deep.memory_bandwidth.gpu0 pass "bytes read plus written"
	assert_finding deep.host_to_device.gpu1 pass "52.0 GB/s, expected 50.0"
	assert_finding deep.device_to_host.gpu1 pass "52.0 GB/s"
	# GPU 0 to GPU 1 over NVLink: 380 GB/s one way against 0.80 x 900 / 2.
	assert_finding deep.p2p.gpu0_gpu1 pass \
		"380.0 GB/s, expected 360.0, 106% of it (cuMemcpyPeerAsync one way, bytes counted once; NVLink"
	[ "$(finding deep.p2p.gpu1_gpu0)" = absent ] || fail "a pair measured twice"
	assert_finding deep.idle pass "no compute process on 2 GPUs"
	assert_finding deep.xid pass "no critical Xid event in the kernel log (1 other"
	assert_finding deep.node pass "2 GPUs, pass; slowest: GPU"
	# The figures as numbers too, in base units.
	"$PYTHON" -c 'import json, sys
f = {f["id"]: f for f in json.loads(sys.argv[1])["findings"]}
m = f["deep.gemm_bf16.gpu0"]["measurement"]
assert m["unit"] == "FLOP/s" and m["measured"] == 8e14, m
assert abs(m["expected"] - 0.8 * 989e12) < 1e6 and abs(m["fraction"] - 8e14 / (0.8 * 989e12)) < 1e-9, m
assert f["deep.memory_bandwidth.gpu1"]["measurement"]["unit"] == "B/s"
assert "measurement" not in f["deep.ecc.gpu0"]' "$output" || fail "measurements in the JSON: $output"
	[ "$(finding deep.child.gpu0)" = absent ] || fail "a child failed: $(finding deep.child.gpu0)"
	assert_ids_listed
}

@test "deep: a slow GPU at 55% fails and the node names it as the slowest" {
	deep deep.gpu1.scale=0.55 -- --deep
	assert_status 3
	assert_finding deep.gemm_bf16.gpu0 pass
	assert_finding deep.gemm_bf16.gpu1 fail "440.0 TFLOPS, expected 791.2, 56% of it"
	assert_finding deep.verdict.gpu1 fail
	assert_finding deep.verdict.gpu0 pass
	assert_finding deep.node fail "slowest: GPU 1 at 56% of expected"
	assert_ids_listed
}

@test "deep: the text report ends with the GPUs side by side" {
	DEEP_FORMAT=text deep deep.gpu1.scale=0.55 -- --deep=quick
	assert_status 3
	[ "$(tail -n 6 <<<"$output" | head -n 1)" = \
		"GPU  verdict  BF16 TFLOPS    FP16 TFLOPS    TF32 TFLOPS    FP8 TFLOPS     memory GB/s    H2D GB/s       D2H GB/s" ] ||
		fail "no table header: $output"
	[ "$(tail -n 4 <<<"$output" | head -n 1 | tr -s ' ')" = \
		"1 fail 440.0 (56%) 440.0 (56%) 220.0 (56%) 880.0 (56%) 1650.0 (62%) 52.0 (104%) 52.0 (104%)" ] ||
		fail "GPU 1's row: $output"
	tail -n 5 <<<"$output" | head -n 1 | grep -q '^0    pass     800\.0 (101%)' || fail "GPU 0's row: $output"
	# Then the pairs.
	[ "$(tail -n 2 <<<"$output")" = "GPU  peer  verdict  P2P GB/s (one way)
0    1     pass     380.0 (106%)" ] || fail "the pairs' table: $output"
}

@test "deep: a slow pair fails, a pair without peer access warns, without NVLink PCIe counts" {
	deep deep.gpu0.peer1_gbps=150 -- --deep=quick
	assert_status 3
	assert_finding deep.p2p.gpu0_gpu1 fail "150.0 GB/s, expected 360.0, 42% of it"
	# The pair counts in both GPUs' verdicts; their own figures pass.
	assert_finding deep.gemm_bf16.gpu1 pass
	assert_finding deep.verdict.gpu1 fail "slowest: peer-to-peer bandwidth"
	assert_finding deep.node fail "slowest: GPU 0 at 42% of expected (peer-to-peer bandwidth)"
	assert_ids_listed
	deep deep.gpu0.peer1_access=0 -- --deep=quick
	assert_finding deep.p2p.gpu0_gpu1 warn \
		"cuDeviceCanAccessPeer: GPU 0 cannot reach GPU 1's memory directly"
	assert_finding deep.verdict.gpu1 warn
	# No NVLink: the narrower PCIe link's figure, GPU 1's Gen5 x8 (25 GB/s).
	deep deep.nvlinks=0 deep.gpu0.peer1_gbps=45 deep.gpu1.pcie_max_width=8 \
		deep.gpu1.pcie_width=8 -- --deep=quick
	assert_finding deep.p2p.gpu0_gpu1 pass "45.0 GB/s, expected 25.0, 180% of it"
	assert_finding deep.p2p.gpu0_gpu1 pass "PCIe: the narrower link's figure"
}

@test "deep: a link downtrained to x8 fails the link and halves the host bandwidth" {
	deep deep.gpu0.pcie_width=8 -- --deep=quick
	assert_status 3
	assert_finding deep.pcie_link.gpu0 fail "PCIe Gen5 x8 under load, the GPU and slot allow Gen5 x16"
	assert_finding deep.host_to_device.gpu0 fail "26.0 GB/s, expected 50.0, 52% of it"
	assert_finding deep.pcie_link.gpu1 pass
	assert_finding deep.node fail "slowest: GPU 0"
}

@test "deep: a pending row remap, an ECC error and an Xid 79 fail the health checks" {
	DEEP_KMSG="4,1001,6000,-;NVRM: Xid (PCI:0000:17:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." \
		deep deep.gpu0.remap_pending=1 deep.gpu1.ecc_unc=2 -- --deep=quick
	assert_status 3
	assert_finding deep.row_remap.gpu0 fail "a row remap is pending"
	assert_finding deep.row_remap.gpu1 pass
	assert_finding deep.ecc.gpu1 fail "2 volatile uncorrectable ECC errors"
	assert_finding deep.ecc.gpu0 pass
	assert_finding deep.verdict.gpu0 fail
	assert_finding deep.verdict.gpu1 fail
	assert_finding deep.xid fail "1 critical Xid event in the kernel log: Xid 79 on 0000:17:00"
}

@test "deep: thermal slowdown under load fails, a power cap warns, idle is normal" {
	deep deep.gpu0.reasons=64 deep.gpu1.reasons=5 -- --deep=quick
	assert_finding deep.clocks.gpu0 fail "0x40 hardware-thermal"
	assert_finding deep.clocks.gpu1 warn "0x5 power-cap"
	deep deep.reasons=1 -- --deep=quick
	assert_status 0
	assert_finding deep.clocks.gpu0 pass "0x1"
}

@test "deep: a GPU that hangs is killed at the timeout, the other one is measured" {
	export GPUPROV_DEEP_TIMEOUT_S=3
	deep deep.gpu1.hang=1 -- --deep=quick
	assert_status 3
	assert_finding deep.child.gpu1 fail "killed after 3 s without a result"
	assert_finding deep.verdict.gpu1 fail
	assert_finding deep.gemm_bf16.gpu0 pass
	assert_ids_listed
	# Its health was read before the measurement hung.
	assert_finding deep.ecc.gpu1 pass
	run pgrep -f "gpuprov --root $DEEP_ROOT"
	[ "$status" -ne 0 ] || fail "a child outlived gpuprov: $output"
}

@test "deep: a crash in the driver library costs only that GPU's measurement" {
	deep deep.gpu0.crash=1 -- --deep=quick
	assert_status 3
	assert_finding deep.child.gpu0 fail "crashed in the driver libraries (signal 6"
	assert_finding deep.ecc.gpu0 pass
	assert_finding deep.gemm_bf16.gpu1 pass
	assert_finding deep.node fail
}

@test "deep: without cuBLAS the GEMMs are skipped with the reason, the rest is measured" {
	mv "$DEEP_ROOT/$LIBDIR/libcublas.so.12" "$BATS_TEST_TMPDIR/"
	deep -- --deep=quick
	mv "$BATS_TEST_TMPDIR/libcublas.so.12" "$DEEP_ROOT/$LIBDIR/"
	assert_status 0
	assert_finding deep.gemm_bf16.gpu0 skip "no libcublas.so.13, .12 or .11"
	assert_finding deep.memory_bandwidth.gpu0 pass
	assert_finding deep.host_to_device.gpu1 pass
}

@test "deep: cuBLAS from the profile's toolkit path, then its Python environment's wheels, named" {
	local wheels=opt/torchenv/lib/python3.11/site-packages/nvidia/cublas/lib
	mkdir -p "$DEEP_ROOT/opt/cuda-test/lib64" "$DEEP_ROOT/$wheels"
	cp "$DEEP_ROOT/$LIBDIR/libcublas.so.12" "$DEEP_ROOT/opt/cuda-test/lib64/"
	cp "$DEEP_ROOT/$LIBDIR/libcublas.so.12" "$DEEP_ROOT/$wheels/"
	DEEP_PROFILE=$BATS_TEST_TMPDIR/cuda.json
	cat > "$DEEP_PROFILE" <<'JSON'
{ "name": "deep-test", "extends": "distro/ubuntu2204",
  "stages": { "driver": { "method": "apt", "branch": "535", "flavor": "server",
                          "modules": "proprietary" },
              "cuda": { "version": "12.2", "path": "/opt/cuda-test" },
              "pytorch": { "method": "venv", "prefix": "/opt/torchenv", "python": "3.11",
                           "packages": ["torch==2.7.1"] } } }
JSON
	# The profile's places come before the loader's copy.
	deep -- --deep=quick
	assert_finding deep.gemm_bf16.gpu0 pass "cuBLAS GEMM (/opt/cuda-test/lib64/libcublas.so.12)"
	rm "$DEEP_ROOT/opt/cuda-test/lib64/libcublas.so.12"
	deep -- --deep=quick
	assert_finding deep.gemm_fp16.gpu1 pass "cuBLAS GEMM (/$wheels/libcublas.so.12)"
	# Neither there nor in the loader paths: the reason names where it looked.
	mv "$DEEP_ROOT/$LIBDIR/libcublas.so.12" "$BATS_TEST_TMPDIR/"
	rm "$DEEP_ROOT/$wheels/libcublas.so.12"
	deep -- --deep=quick
	mv "$BATS_TEST_TMPDIR/libcublas.so.12" "$DEEP_ROOT/$LIBDIR/"
	assert_finding deep.gemm_bf16.gpu0 skip \
		"no libcublas.so.13, .12 or .11 in /opt/cuda-test/lib64, /$wheels, the loader paths"
	rm -r "$DEEP_ROOT/opt/cuda-test" "$DEEP_ROOT/opt/torchenv"
}

@test "deep: FP8 skips with the reason without cuBLASLt or an algorithm, and is absent without FP8" {
	mv "$DEEP_ROOT/$LIBDIR/libcublasLt.so.12" "$BATS_TEST_TMPDIR/"
	deep -- --deep=quick
	mv "$BATS_TEST_TMPDIR/libcublasLt.so.12" "$DEEP_ROOT/$LIBDIR/"
	assert_status 0
	assert_finding deep.gemm_fp8.gpu0 skip \
		"no libcublasLt.so.13, .12 or .11 next to /$LIBDIR/libcublas.so.12 or in the loader paths"
	assert_finding deep.gemm_bf16.gpu0 pass
	deep deep.fp8_algos=0 -- --deep=quick
	assert_finding deep.gemm_fp8.gpu1 skip "cuBLASLt has no FP8 E4M3 algorithm for this GPU"
	# An A100 has no FP8 tensor cores: nothing to report.
	deep "name=NVIDIA A100-SXM4-80GB" -- --deep=quick
	[ "$(finding deep.gemm_fp8.gpu0)" = absent ] || fail "FP8 on an A100: $(finding deep.gemm_fp8.gpu0)"
	assert_finding deep.gemm_bf16.gpu0 pass
}

@test "deep: busy GPUs are not measured unless --force" {
	deep deep.gpu1.busy=2 -- --deep=quick
	assert_status 3
	assert_finding deep.idle fail "GPU 1 runs 2 compute processes: not measured"
	[ "$(finding deep.gemm_bf16.gpu0)" = absent ] || fail "measured a busy node"
	assert_finding deep.ecc.gpu0 pass
	deep deep.gpu1.busy=2 -- --deep=quick --force
	assert_finding deep.idle warn "measured anyway (--force)"
	assert_finding deep.gemm_bf16.gpu0 pass
}

@test "deep: the measurements as Prometheus metrics, read by a real parser" {
	DEEP_FORMAT=prometheus deep deep.gpu1.scale=0.5 deep.gpu1.pcie_width=8 -- --deep=quick
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/m.prom"
	run "$PYTHON" "$BATS_TEST_DIRNAME/prom_parse.py" "$BATS_TEST_TMPDIR/m.prom"
	[ "$status" -eq 0 ] || fail "prom_parse: $output"
	m=$BATS_TEST_TMPDIR/m.prom
	grep -qx 'gpuprov_gpu_gemm_flops{gpu="0",dtype="bf16"} 8e+14' "$m" || fail "$(cat "$m")"
	grep -qx 'gpuprov_gpu_gemm_flops{gpu="1",dtype="bf16"} 4e+14' "$m" || fail "$(cat "$m")"
	grep -qx 'gpuprov_gpu_memory_bandwidth_bytes_per_second{gpu="0"} 3e+12' "$m" || fail "$(cat "$m")"
	grep -qx 'gpuprov_gpu_host_to_device_bytes_per_second{gpu="1"} 2.6e+10' "$m" || fail "$(cat "$m")"
	grep -qx 'gpuprov_gpu_health_success{gpu="0",check="ecc"} 1' "$m" || fail "$(cat "$m")"
	grep -qx 'gpuprov_gpu_health_success{gpu="1",check="verdict"} 0' "$m" || fail "$(cat "$m")"
	grep -qx 'gpuprov_gpu_p2p_bandwidth_bytes_per_second{gpu="0",peer="1"} 3.8e+11' "$m" || fail "$(cat "$m")"
	grep -qx 'gpuprov_gpu_health_success{gpu="0",check="p2p",peer="1"} 1' "$m" || fail "$(cat "$m")"
}

@test "deep: --deep takes only quick, and only verify takes it" {
	gp --root "$DEEP_ROOT" verify --deep=slow
	assert_status 2
	assert_stderr_has "--deep=slow: give --deep or --deep=quick"
	gp --root "$DEEP_ROOT" status --deep
	assert_status 2
}

@test "deep: NCCL all-reduce across the GPUs through the pytorch environment's wheel" {
	DEEP_PROFILE=$DEEP_NCCL_PROFILE deep -- --deep=quick
	assert_status 0
	# Two ranks: bus bandwidth = algorithm bandwidth x 2(2-1)/2; 380 GB/s
	# against 0.80 x 900 / 2 over NVLink.
	assert_finding deep.nccl_allreduce pass \
		"380.0 GB/s bus bandwidth, expected 360.0, 106% of it (ncclAllReduce of 64 MiB, float sum, 2 ranks"
	assert_finding deep.nccl_allreduce pass "algorithm bandwidth 380.0 GB/s"
	assert_finding deep.nccl_allreduce pass "NVLink: half the model's NVLink figure; /$NCCL_WHEEL/libnccl.so.2"
	"$PYTHON" -c 'import json, sys
f = {f["id"]: f for f in json.loads(sys.argv[1])["findings"]}
m = f["deep.nccl_allreduce"]["measurement"]
assert m["unit"] == "B/s" and abs(m["measured"] - 3.8e11) < 1e6 and abs(m["expected"] - 3.6e11) < 1e6, m' \
		"$output" || fail "the measurement in the JSON: $output"
	assert_ids_listed
	# Four ranks: the bus moves 2(4-1)/4 of the message, so the algorithm
	# bandwidth is 380 / 1.5.
	DEEP_PROFILE=$DEEP_NCCL_PROFILE deep count=4 -- --deep
	assert_finding deep.nccl_allreduce pass "(ncclAllReduce of 256 MiB, float sum, 4 ranks"
	assert_finding deep.nccl_allreduce pass "algorithm bandwidth 253.3 GB/s"
	# As Prometheus metrics, read by the real parser.
	DEEP_FORMAT=prometheus DEEP_PROFILE=$DEEP_NCCL_PROFILE deep count=4 -- --deep=quick
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/m.prom"
	run "$PYTHON" "$BATS_TEST_DIRNAME/prom_parse.py" "$BATS_TEST_TMPDIR/m.prom"
	[ "$status" -eq 0 ] || fail "prom_parse: $output"
	m=$BATS_TEST_TMPDIR/m.prom
	# (The fake's events keep milliseconds in a float: 6 digits.)
	grep -qxE 'gpuprov_gpu_nccl_allreduce_bus_bandwidth_bytes_per_second\{gpus="4"\} 3\.8(000[0-9])?e\+11' "$m" ||
		fail "$(cat "$m")"
	grep -qxE 'gpuprov_gpu_nccl_allreduce_algorithm_bandwidth_bytes_per_second\{gpus="4"\} 2\.5333[0-9]e\+11' "$m" ||
		fail "$(cat "$m")"
}

@test "deep: a slow all-reduce fails the node, without NVLink the narrowest PCIe link counts" {
	# The slowest rank sets the time.
	DEEP_PROFILE=$DEEP_NCCL_PROFILE deep deep.gpu1.nccl_busbw_gbps=150 -- --deep=quick
	assert_status 3
	assert_finding deep.nccl_allreduce fail "150.0 GB/s bus bandwidth, expected 360.0, 42% of it"
	assert_finding deep.verdict.gpu0 pass
	assert_finding deep.node fail "; NCCL all-reduce: fail"
	DEEP_PROFILE=$DEEP_NCCL_PROFILE deep deep.nvlinks=0 deep.nccl_busbw_gbps=24 \
		deep.gpu1.pcie_max_width=8 deep.gpu1.pcie_width=8 -- --deep=quick
	assert_finding deep.nccl_allreduce pass "24.0 GB/s bus bandwidth, expected 25.0, 96% of it"
	assert_finding deep.nccl_allreduce pass "PCIe: the narrowest link's figure"
}

@test "deep: a rank that hangs in NCCL is killed at the deadline and fails the all-reduce" {
	export GPUPROV_DEEP_TIMEOUT_S=3
	DEEP_PROFILE=$DEEP_NCCL_PROFILE deep deep.gpu1.nccl_hang=1 -- --deep=quick
	assert_status 3
	assert_finding deep.nccl_allreduce fail \
		"2 ranks, one per GPU: rank 1 (GPU 1): killed after 3 s without a result"
	assert_finding deep.gemm_bf16.gpu1 pass
	assert_finding deep.node fail
	assert_ids_listed
	run pgrep -f "gpuprov --root $DEEP_ROOT"
	[ "$status" -ne 0 ] || fail "a rank outlived gpuprov: $output"
	# A rank whose init fails says so.
	DEEP_PROFILE=$DEEP_NCCL_PROFILE deep deep.gpu0.nccl_fail=1 -- --deep=quick
	assert_finding deep.nccl_allreduce fail \
		"rank 0 (GPU 0): ncclCommInitRank failed: unhandled system error"
}

# NCCL's ranks share segments in /dev/shm: a tmpfs mounted there stays
# writable for them in the read-only namespace; the root's own directory
# does not.
@test "deep: NCCL's ranks may write /dev/shm when it is a mount of its own, nothing else" {
	command -v unshare > /dev/null || skip "no unshare(1)"
	mkdir -p "$DEEP_ROOT/dev/shm"
	DEEP_PROFILE=$DEEP_NCCL_PROFILE deep deep.nccl_shm=1 -- --deep=quick
	assert_status 3
	assert_finding deep.nccl_allreduce fail "ncclCommInitRank failed: unhandled system error"
	assert_stderr_has "fakenccl: cannot create /dev/shm/fakenccl-"
	assert_stderr_has "Read-only file system"
	local wrap=$BATS_TEST_TMPDIR/gpuprov-shm
	# shellcheck disable=SC2016 # expanded by the inner sh
	printf '%s\n' '#!/bin/sh' \
		'exec unshare --mount --propagation private sh -c '"'"'mount -t tmpfs gpuprov-test-shm "$0/dev/shm" || exit 99; exec "$@"'"'"' "$DEEP_ROOT" "$REAL_GPUPROV" "$@"' \
		> "$wrap"
	chmod +x "$wrap"
	REAL_GPUPROV=$GPUPROV GPUPROV=$wrap DEEP_PROFILE=$DEEP_NCCL_PROFILE \
		deep deep.nccl_shm=1 -- --deep=quick
	[ "$status" -ne 99 ] || skip "cannot mount a tmpfs in a mount namespace here"
	assert_status 0
	assert_finding deep.nccl_allreduce pass
	[ -z "$(ls -A "$DEEP_ROOT/dev/shm")" ] || fail "a segment was left in the root"
}

@test "deep: NCCL skips with the reason: no library, one GPU, no pytorch stage" {
	mv "$DEEP_ROOT/$NCCL_WHEEL/libnccl.so.2" "$BATS_TEST_TMPDIR/"
	DEEP_PROFILE=$DEEP_NCCL_PROFILE deep -- --deep=quick
	mv "$BATS_TEST_TMPDIR/libnccl.so.2" "$DEEP_ROOT/$NCCL_WHEEL/"
	assert_status 0
	assert_finding deep.nccl_allreduce skip \
		"not measured: no libnccl.so.2 in /opt/ncclenv/lib/python3.11/site-packages/nvidia/nccl/lib, or the loader paths"
	assert_finding deep.gemm_bf16.gpu0 pass
	DEEP_PROFILE=$DEEP_NCCL_PROFILE deep count=1 -- --deep=quick
	assert_finding deep.nccl_allreduce skip "one GPU, nothing to all-reduce across"
	deep -- --deep=quick
	assert_finding deep.nccl_allreduce skip "the profile has no pytorch stage"
}

@test "deep: a GPU the NVSwitch fabric has not registered fails with the error 802 hint" {
	deep fabric=completed,in_progress -- --deep=quick
	assert_status 3
	assert_finding deep.fabric.gpu0 pass "NVSwitch fabric state Completed"
	assert_finding deep.fabric.gpu1 fail "NVSwitch fabric state In Progress"
	"$PYTHON" -c 'import json, sys
f = {f["id"]: f for f in json.loads(sys.argv[1])["findings"]}
assert "error 802" in f["deep.fabric.gpu1"]["hint"], f["deep.fabric.gpu1"]' "$output" ||
		fail "no 802 hint: $output"
	assert_finding deep.verdict.gpu1 fail
	assert_ids_listed
	# No NVSwitch: NVML says "Not Supported", nothing to judge.
	deep fabric=not_supported -- --deep=quick
	assert_status 0
	[ "$(finding deep.fabric.gpu0)" = absent ] || fail "fabric judged without NVSwitch"
}
