#!/bin/sh
# verify --deep on a real GPU machine, and the same figures measured
# independently with PyTorch, for comparison. Read-only: it changes no GPU
# setting, loads or unloads no module and installs nothing; every step has
# a timeout. Run from the repository root:
#
#   OUT=/some/dir sh tests/device/deep.sh
#
# GPUPROV: the gpuprov binary (default build/gpuprov; built with make when
# missing, which needs the build dependencies of the Makefile). PROFILE: the
# catalogue profile to verify with (default h200-ubuntu2404; only the
# driver stage's checks run, --deep does not depend on the profile).
# PYTHON: a Python with torch (default python3). Everything goes to $OUT:
# detect.json, verify.json, plan.txt, deep.json (+ .stderr, .rc), deep-quick.json, torch.json,
# deep-nccl.json (with a profile whose pytorch stage is $PYTHON's environment), torch-nccl.json,
# nvidia-smi.txt, summary.txt. The figures are to be recorded, with the
# date, in docs/reference/gpu-health.md and src/nv/gpuspec.c's comments.
set -u
OUT=${OUT:?set OUT to the directory for the results}
mkdir -p "$OUT"
GPUPROV=${GPUPROV:-build/gpuprov}
PROFILE=${PROFILE:-h200-ubuntu2404}
PYTHON=${PYTHON:-python3}

log() { printf '%s\n' "$*" | tee -a "$OUT/summary.txt"; }

log "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if [ ! -x "$GPUPROV" ]; then
	log "building gpuprov"
	timeout 300 make -j"$(nproc)" build/gpuprov > "$OUT/build.log" 2>&1 ||
		log "build failed (see build.log)"
fi
# What nvidia-smi says, for the record (queries only).
timeout 60 nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
timeout 60 nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1

if [ -x "$GPUPROV" ]; then
	timeout 60 "$GPUPROV" --json detect > "$OUT/detect.json" 2> "$OUT/detect.stderr"
	log "detect: exit $?"
	# The stages' own read-only checks on the live host (the GPU settings and
	# the fabric manager read NVML and systemd, change nothing), and the plan
	# an install would follow (printed, never applied).
	timeout 120 "$GPUPROV" --json verify --profile "$PROFILE" \
		> "$OUT/verify.json" 2> "$OUT/verify.stderr"
	log "verify: exit $?"
	timeout 120 "$GPUPROV" plan --profile "$PROFILE" > "$OUT/plan.txt" 2> "$OUT/plan.stderr"
	log "plan: exit $?"
	timeout 60 "$GPUPROV" --json verify --profile "$PROFILE" --only driver --deep=quick \
		> "$OUT/deep-quick.json" 2> "$OUT/deep-quick.stderr"
	log "verify --deep=quick: exit $?"
	start=$(date +%s)
	timeout 180 "$GPUPROV" --json verify --profile "$PROFILE" --only driver --deep \
		> "$OUT/deep.json" 2> "$OUT/deep.stderr"
	rc=$?
	echo "$rc" > "$OUT/deep.rc"
	log "verify --deep: exit $rc in $(( $(date +%s) - start )) s"
	timeout 60 "$GPUPROV" --format prometheus verify --profile "$PROFILE" --only driver \
		--deep=quick > "$OUT/deep-quick.prom" 2> /dev/null
	# The NCCL all-reduce needs the pytorch stage: a profile whose stage is
	# $PYTHON's own environment (its prefix, when gpuprov allows it there,
	# its version, its torch), so verify --deep finds that environment's
	# nvidia/nccl/lib/libnccl.so.2; the wheel's directory is also put on
	# LD_LIBRARY_PATH for the soname, wherever the environment is.
	NCCL_LIB=$("$PYTHON" - "$OUT/nccl-profile.json" 2> "$OUT/nccl-profile.stderr" <<'PY'
import glob, json, os, sys, torch
v = "%d.%d" % sys.version_info[:2]
prefix = sys.prefix
if not prefix.startswith(("/opt/", "/usr/local/", "/srv/")):
    prefix = "/opt/deep-nccl-not-there"  # gpuprov's rule; the soname then
json.dump({"name": "deep-nccl", "extends": "distro/ubuntu2404",
           "stages": {"driver": {"method": "apt", "branch": "580", "flavor": "server",
                                 "modules": "open"},
                      "pytorch": {"method": "venv", "prefix": prefix, "python": v,
                                  "packages": ["torch==" + torch.__version__.split("+")[0]]}}},
          open(sys.argv[1], "w"), indent=1)
site = os.path.dirname(os.path.dirname(torch.__file__))
print(":".join(glob.glob(os.path.join(site, "nvidia", "nccl", "lib"))))
PY
)
	log "NCCL wheel: ${NCCL_LIB:-none found}"
	LD_LIBRARY_PATH=${NCCL_LIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
		timeout 120 "$GPUPROV" --json verify --profile "$OUT/nccl-profile.json" \
		--only driver --deep=quick > "$OUT/deep-nccl.json" 2> "$OUT/deep-nccl.stderr"
	log "verify --deep=quick with the pytorch stage (NCCL): exit $?"
fi

# The same measurements with PyTorch: BF16/FP16/TF32 (and FP8 on Hopper
# and later) matmul TFLOPS timed with CUDA events (warm-up, median of 7
# batches of 20), a 2 GiB device-to-device copy counted read + written, on
# every GPU in turn, then each pair's peer-to-peer copy.
timeout 300 "$PYTHON" - > "$OUT/torch.json" 2> "$OUT/torch.stderr" <<'PY'
import json, statistics, torch

def timed(fn, warmup, runs, batch):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1000 / batch)
    return statistics.median(times)

result = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpus": []}
for i in range(torch.cuda.device_count()):
    torch.cuda.set_device(i)
    g = {"gpu": i, "name": torch.cuda.get_device_name(i)}
    n = 8192
    for name, dtype, tf32 in (("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
                              ("tf32", torch.float32, True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        s = timed(lambda: torch.matmul(a, b), 50, 7, 20)
        g["gemm_tflops_" + name] = 2 * n ** 3 / s / 1e12
        del a, b
    # FP8 E4M3 with BF16 out, as verify --deep's cuBLASLt call (Hopper and
    # later; B column-major as torch._scaled_mm wants).
    if torch.cuda.get_device_capability(i) >= (8, 9):
        try:
            a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
            one = torch.tensor(1.0, device="cuda")
            s = timed(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                               out_dtype=torch.bfloat16), 50, 7, 20)
            g["gemm_tflops_fp8"] = 2 * n ** 3 / s / 1e12
            del a, b
        except Exception as e:  # an older torch: say so, measure the rest
            g["gemm_fp8_error"] = str(e)
    size = 2 << 30
    src = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    s = timed(lambda: dst.copy_(src), 2, 7, 2)
    g["memory_gbps_read_plus_written"] = 2 * size / s / 1e9
    del src, dst
    host = torch.empty(1 << 30, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    g["h2d_gbps"] = (1 << 30) / timed(lambda: dev.copy_(host, non_blocking=True), 2, 7, 2) / 1e9
    g["d2h_gbps"] = (1 << 30) / timed(lambda: host.copy_(dev, non_blocking=True), 2, 7, 2) / 1e9
    del host, dev
    torch.cuda.empty_cache()
    result["gpus"].append(g)
# Peer to peer, as verify --deep: from GPU i to each later GPU j, one way,
# 512 MiB, bytes counted once, timed on GPU i.
result["p2p"] = []
for i in range(torch.cuda.device_count()):
    for j in range(i + 1, torch.cuda.device_count()):
        torch.cuda.set_device(i)
        src = torch.empty(512 << 20, dtype=torch.uint8, device="cuda:%d" % i)
        dst = torch.empty(512 << 20, dtype=torch.uint8, device="cuda:%d" % j)
        s = timed(lambda: dst.copy_(src, non_blocking=True), 2, 7, 2)
        result["p2p"].append({"gpu": i, "peer": j,
                              "peer_access": torch.cuda.can_device_access_peer(i, j),
                              "gbps": (512 << 20) / s / 1e9})
        del src, dst
print(json.dumps(result, indent=1))
PY
log "torch: exit $?"

# The all-reduce with torch.distributed, as verify --deep's: one process per
# GPU, float sum in place of 256 MiB, 5 warm-up, median of 7 batches of 2,
# bus bandwidth = algorithm bandwidth x 2(n-1)/n (nccl-tests' definition).
timeout 180 "$PYTHON" - > "$OUT/torch-nccl.json" 2> "$OUT/torch-nccl.stderr" <<'PY'
import json, os, statistics, sys, torch, torch.distributed as dist, torch.multiprocessing as mp

def rank_main(rank, n, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n)
    x = torch.ones(64 << 20, device="cuda")  # 256 MiB of float
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(7):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(2):
            dist.all_reduce(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1000 / 2)
    q.put((rank, statistics.median(times)))
    dist.destroy_process_group()

n = torch.cuda.device_count()
if n < 2:
    print(json.dumps({"skipped": "one GPU"}))
    sys.exit(0)
ctx = mp.get_context("spawn")
q = ctx.Queue()
ranks = mp.start_processes(rank_main, args=(n, q), nprocs=n, join=False,
                           start_method="spawn")
t = max(q.get(timeout=150)[1] for _ in range(n))
ranks.join()
alg = (256 << 20) / t
print(json.dumps({"ranks": n, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                  "algbw_gbps": alg / 1e9, "busbw_gbps": alg * 2 * (n - 1) / n / 1e9}))
PY
log "torch all-reduce: exit $?"

# A side-by-side summary of the two, when both ran.
"$PYTHON" - "$OUT" >> "$OUT/summary.txt" 2>&1 <<'PY'
import json, os, sys
out = sys.argv[1]
try:
    deep = json.load(open(os.path.join(out, "deep.json")))
except Exception as e:
    print("no deep.json:", e); deep = {"findings": []}
try:
    torch = json.load(open(os.path.join(out, "torch.json")))
except Exception as e:
    print("no torch.json:", e); torch = {"gpus": []}
for f in deep["findings"]:
    if f["id"].startswith("deep."):
        print(f["level"], f["id"], f["evidence"])
for g in torch["gpus"]:
    print("torch", json.dumps(g))
for p in torch.get("p2p", []):
    print("torch p2p", json.dumps(p))
for name in ("deep-nccl.json", "torch-nccl.json"):
    try:
        r = json.load(open(os.path.join(out, name)))
    except Exception as e:
        print("no", name + ":", e); continue
    for f in r.get("findings", []):
        if f["id"] in ("deep.nccl_allreduce",) or f["id"].startswith("deep.fabric."):
            print(f["level"], f["id"], f["evidence"])
    if "findings" not in r:
        print("torch all-reduce", json.dumps(r))
PY
log "done"
