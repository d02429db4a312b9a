#!/usr/bin/env bats
# Change management of the pytorch stage's Python environment, for real: the
# Debian root, its python3 -m venv and pip, and the loopback wheel index of
# pytorch.bats (setup_torch_root: torch 2.7.1 for cu118, 2.8.0 for cu128).
# An upgrade of the pins (plan == run, each pin old -> new), a failing one
# that leaves the previous pins, a rollback that puts them back as planned,
# and an uninstall that removes the venv gpuprov created, leaving the tree
# as it was before the install, but never a prefix that was there before.

load helpers

V=/opt/venv

setup() {
	setup_torch_root
}

teardown() {
	stop_https_server
}

# tree ROOT: every entry, without gpuprov's journal, backups and log and the
# bytecode the root's own Python caches while it runs.
tree() {
	manifest "$1" | awk '{
		p = (length($1) == 64 && $1 ~ /^[0-9a-f]+$/) ? $2 : $1
		if (p ~ /^\.\/(var\/lib\/gpuprov|var\/log\/gpuprov\.log|tmp)(\/|$)/ || p ~ /\/__pycache__(\/|$)/) next
		print
	}'
}

# pins: the installed torch, torchvision and torchaudio.
pins() {
	echo "$(dist_version "$R$V" torch) $(dist_version "$R$V" torchvision) $(dist_version "$R$V" torchaudio)"
}

@test "pytorch change: an upgrade plans each pin old -> new and does exactly that; a failing one keeps the previous pins; rollback puts them back as planned" {
	torch_profile cu118
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 0
	[ "$(pins)" = "2.7.1+cu118 0.22.1+cu118 2.7.1+cu118" ] || fail "installed: $(pins)"
	# Upgrade: each pin's exact old -> new version in the plan, and the
	# pip command with exactly the new pins, in the plan as in the run.
	torch_profile cu128 2.8.0 0.23.0 2.8.0
	gp --root "$R" plan --profile "$P" --only pytorch
	assert_status 0
	assert_stdout_has "to install: torch 2.7.1+cu118 -> 2.8.0+cu128, torchvision 0.22.1+cu118 -> 0.23.0+cu128, torchaudio 2.7.1+cu118 -> 2.8.0+cu128"
	assert_stdout_has "run $V/bin/python -m pip install --no-input --disable-pip-version-check --no-cache-dir --index-url https://127.0.0.1:$PORT/whl/cu128 torch==2.8.0+cu128 torchvision==0.23.0+cu128 torchaudio==2.8.0+cu128"
	assert_plan_matches_run "$R" --profile "$P" --only pytorch
	assert_status 0
	[ "$(pins)" = "2.8.0+cu128 0.23.0+cu128 2.8.0+cu128" ] || fail "upgraded: $(pins)"
	cp "$P" "$BATS_TEST_TMPDIR/good.json"
	# An upgrade to a pin the index does not have: the environment's pip
	# is asked first (pip index versions), and the stage blocks before
	# anything changes, naming the pin and what the index lists; verify of
	# the previous profile still passes.
	snapshot "$R" upgraded var/log/gpuprov.log var/lib/gpuprov/lock
	torch_profile cu128 2.8.0 0.23.0 9.9.9
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 4
	assert_stderr_has "pytorch: nothing changed: the index (stages.pytorch.index_url https://127.0.0.1:$PORT/whl/cu128) does not offer torchaudio==9.9.9+cu128 (pip index versions: Available versions: 2.8.0+cu128"
	refute_stderr_has "torch==2.8.0+cu128 ("
	assert_unchanged "$R" upgraded var/log/gpuprov.log var/lib/gpuprov/lock
	gp --root "$R" verify --profile "$BATS_TEST_TMPDIR/good.json" --only pytorch
	assert_status 0
	# Rollback to entry 1 (entry 2 is the upgrade, the current one) while
	# the cu118 index no longer has torchaudio: refused before any change,
	# naming it (the rollback's own check of its packages covers apt's).
	mv "$WWW/whl/cu118/torchaudio" "$WWW/torchaudio-cu118"
	gp --root "$R" rollback --to 1 --only pytorch
	assert_status 4
	assert_stderr_has "does not offer torchaudio==2.7.1+cu118 (pip index versions: ERROR: "
	refute_stderr_has "torch==2.7.1+cu118 ("
	assert_unchanged "$R" upgraded var/log/gpuprov.log var/lib/gpuprov/lock
	mv "$WWW/torchaudio-cu118" "$WWW/whl/cu118/torchaudio"
	# With it back: the exact older pins, planned, then made as planned.
	gp --root "$R" rollback --dry-run --to 1 --only pytorch
	assert_status 0
	assert_stdout_has "to install: torch 2.8.0+cu128 -> 2.7.1+cu118, torchvision 0.23.0+cu128 -> 0.22.1+cu118, torchaudio 2.8.0+cu128 -> 2.7.1+cu118"
	assert_stdout_has "torch==2.7.1+cu118 torchvision==0.22.1+cu118 torchaudio==2.7.1+cu118"
	[ "$(pins)" = "2.8.0+cu128 0.23.0+cu128 2.8.0+cu128" ] || fail "the dry run changed the pins: $(pins)"
	PLAN_CMD="rollback --dry-run" RUN_CMD=rollback assert_plan_matches_run "$R" --to 1 --only pytorch
	assert_status 0
	[ "$(pins)" = "2.7.1+cu118 0.22.1+cu118 2.7.1+cu118" ] || fail "after the rollback: $(pins)"
	grep -q "/whl/cu118" "$R$V/pip.conf" || fail "pip.conf: $(cat "$R$V/pip.conf")"
	torch_profile cu118
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 0
}

@test "pytorch change: a pip failure while it installs puts back the pins it had changed, and says which" {
	torch_profile cu118
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 0
	# torch's 2.8.0 wheel is sound as a download (the index's sha256 is of
	# these bytes) but its module fails to unpack: a bad CRC, found only
	# when pip installs it, after it resolved and fetched all three. pip
	# installs torch last (torchvision, torchaudio, torch): the other two
	# are upgraded by then, and stay so.
	"$PYTHON" - "$WWW" <<'PY' || fail "cannot break the wheel"
import glob, hashlib, os, re, sys, urllib.parse, zipfile
www = sys.argv[1]
(whl,) = glob.glob(os.path.join(www, "files", "torch-2.8.0*cu128*.whl"))
data = bytearray(open(whl, "rb").read())
with zipfile.ZipFile(whl) as z:
    info = next(i for i in z.infolist() if i.filename.endswith("__init__.py"))
start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
data[start] ^= 0xFF
open(whl, "wb").write(data)
digest = hashlib.sha256(data).hexdigest()
for page in glob.glob(os.path.join(www, "whl", "*", "torch", "index.html")):
    text = open(page).read()
    name = re.escape(urllib.parse.quote(os.path.basename(whl)))
    text = re.sub("(" + name + r"#sha256=)[0-9a-f]{64}", r"\g<1>" + digest, text)
    open(page, "w").write(text)
PY
	torch_profile cu128 2.8.0 0.23.0 2.8.0
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 1
	assert_stderr_has "pip had changed "
	assert_stderr_has "before it failed (it puts back only the package it was installing); gpuprov put them back, so every pin is as before"
	refute_stderr_has "torch 2.7.1+cu118 ->"
	# pip installs torch last: what it had moved by then is named.
	assert_stderr_has "+cu118 -> "
	# The previous working set: every pin and the environment's pip.conf
	# (the cu118 index the old wheels came from) as before the run.
	[ "$(pins)" = "2.7.1+cu118 0.22.1+cu118 2.7.1+cu118" ] || fail "after the failure: $(pins)"
	grep -q "/whl/cu118" "$R$V/pip.conf" || fail "pip.conf: $(cat "$R$V/pip.conf")"
	grep -q -- "-m pip install --no-input --disable-pip-version-check --no-cache-dir --no-deps .*+cu118" "$R/var/log/gpuprov.log" ||
		fail "no put-back in the log: $(grep -n 'pip install' "$R/var/log/gpuprov.log")"
	torch_profile cu118
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 0
}

@test "pytorch change: uninstall removes the venv gpuprov created, as planned, the tree as before the install" {
	tree "$R" > "$BATS_TEST_TMPDIR/before"
	torch_profile cu118
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 0
	[ "$(pins)" = "2.7.1+cu118 0.22.1+cu118 2.7.1+cu118" ] || fail "installed: $(pins)"
	gp --root "$R" uninstall --dry-run --only pytorch
	assert_status 0
	assert_stdout_has "removes $V with all in it: gpuprov created it"
	[ -d "$R$V/lib" ] || fail "the dry run removed the venv"
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R" --only pytorch
	assert_status 0
	[ ! -e "$R$V" ] || fail "$V is still there"
	tree "$R" > "$BATS_TEST_TMPDIR/after"
	diff -u "$BATS_TEST_TMPDIR/before" "$BATS_TEST_TMPDIR/after" >&2 ||
		fail "the tree differs from the one before the install (diff above)"
}

@test "pytorch change: uninstall keeps a prefix that was there before gpuprov, with what is in it" {
	mkdir -p "$R$V"
	echo "the operator's" > "$R$V/NOTES"
	torch_profile cu118
	gp --root "$R" install --profile "$P" --only pytorch
	assert_status 0
	gp --root "$R" uninstall --only pytorch
	assert_status 0
	refute_stdout_has "with all in it"
	[ "$(cat "$R$V/NOTES")" = "the operator's" ] || fail "the operator's file is gone"
	[ -f "$R$V/pyvenv.cfg" ] || fail "the venv in the operator's directory went"
	[ ! -e "$R$V/pip.conf" ] || fail "pip.conf, which gpuprov wrote, is still there"
}
