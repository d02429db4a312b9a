#!/usr/bin/env bats
# Stage pytorch, method conda: a stand-in Miniforge installer (a bash script
# served over loopback HTTPS, sha256 pinned) that logs its argv and lays out
# the prefix with a stand-in `conda`, which logs its argv too and makes
# environments as real venvs of the Debian root's python3 (so the real pip
# installs into them), with conda-meta records. Then the env stage's
# conda_init snippet, on a busybox fixture root.

load helpers

INSTALLER='#!/bin/bash
# Stand-in Miniforge installer: logs argv, lays out the prefix.
echo "installer $*" >> /var/log/stub-commands.log
prefix=
while [ $# -gt 0 ]; do
	case $1 in
	-p) prefix=$2; shift ;;
	esac
	shift
done
mkdir -p "$prefix/bin" "$prefix/etc/profile.d" "$prefix/envs"
printf "channels:\n  - conda-forge\n" > "$prefix/.condarc"
echo "conda() { :; }" > "$prefix/etc/profile.d/conda.sh"
base64 -d > "$prefix/bin/conda" <<B64
@CONDA@
B64
chmod 755 "$prefix/bin/conda"'

CONDA='#!/bin/bash
# Stand-in conda: logs argv; create makes a venv with conda-meta records.
echo "conda $*" >> /var/log/stub-commands.log
prefix=$(cd "$(dirname "$0")/.." && pwd)
cmd=$1; shift
env= specs=()
while [ $# -gt 0 ]; do
	case $1 in
	-n) env=$2; shift ;;
	-c) shift ;;
	-*) ;;
	*) specs+=("$1") ;;
	esac
	shift
done
case $cmd in
create)
	python3 -m venv "$prefix/envs/$env" || exit 1
	mkdir -p "$prefix/envs/$env/conda-meta" ;;
tos) exit 0 ;;
esac
for s in "${specs[@]}"; do
	name=${s%%=*} ver=${s##*=}
	printf "{\"name\": \"%s\", \"version\": \"%s\"}\n" "$name" "$ver" \
		> "$prefix/envs/$env/conda-meta/$name-$ver-stub_0.json"
done'

setup() {
	setup_torch_root
	printf '%s\n' "${INSTALLER/@CONDA@/$(printf '%s\n' "$CONDA" | base64 -w0)}" > "$WWW/Miniforge3.sh"
	ISHA=$(sha256sum < "$WWW/Miniforge3.sh" | cut -d' ' -f1)
}

teardown() {
	stop_https_server
}

# conda_profile [EXTRA_JSON]: $P, method conda with the stand-in installer.
conda_profile() {
	P=$BATS_TEST_TMPDIR/conda-test.json
	cat > "$P" <<JSON
{
  "name": "conda-test",
  "extends": "distro/debian12",
  "stages": {
    "pytorch": { "method": "conda", "prefix": "/opt/conda", "env": "torch", "python": "3.11",
                 "installer_url": "https://127.0.0.1:$PORT/Miniforge3.sh",
                 "installer_sha256": "$ISHA",
                 "channels": ["conda-forge"],
                 "index_url": "https://127.0.0.1:$PORT/whl/cu118",
                 "ca_bundle": "$ROOT_CA",
                 "packages": ["torch==2.7.1"]${1-} }
  }
}
JSON
}

@test "conda: dry-run lists the installer download, the environment and the packages" {
	conda_profile ', "proxy": "http://proxy.lan:3128"'
	snapshot "$R" before
	gp --root "$R" --ca-file "$CA" plan --profile "$P" --only pytorch
	assert_status 0
	assert_stdout_has "download https://127.0.0.1:$PORT/Miniforge3.sh"
	assert_stdout_has "sha256 $ISHA"
	assert_stdout_has "run bash /var/cache/gpuprov/$ISHA -b -p /opt/conda"
	assert_stdout_has "run /opt/conda/bin/conda create -y -n torch --override-channels -c conda-forge python=3.11"
	assert_stdout_has "--index-url https://127.0.0.1:$PORT/whl/cu118 torch==2.7.1+cu118"
	assert_stdout_has "+  https: 'http://proxy.lan:3128'"
	assert_stdout_has "+proxy = http://proxy.lan:3128"
	assert_unchanged "$R" before
}

@test "conda: batch install, env creation from the declared channels only, pip into the env, as planned; rerun satisfied" {
	conda_profile
	# The installer writes its own .condarc, which gpuprov then replaces:
	# plan and run both say the write is over what the installer leaves.
	assert_plan_matches_run "$R" --ca-file "$CA" --profile "$P" --only pytorch
	assert_status 0
	[ "$(jq -r '.stages[].effects[] | select(.path == "/opt/conda/.condarc") | .over' <<< "$output")" = "the Miniforge installer" ] ||
		fail "the .condarc write does not say it replaces the installer's file: $output"
	log=$(stub_log "$R")
	[ "$log" = "installer -b -p /opt/conda
conda create -y -n torch --override-channels -c conda-forge python=3.11" ] || fail "commands:" "$log"
	grep -qx "  - 'conda-forge'" "$R/opt/conda/.condarc" && grep -qx "ssl_verify: '$ROOT_CA'" "$R/opt/conda/.condarc" ||
		fail ".condarc:" "$(cat "$R/opt/conda/.condarc")"
	grep -qx "cert = $ROOT_CA" "$R/opt/conda/envs/torch/pip.conf" || fail "pip.conf"
	[ "$(dist_version "$R/opt/conda/envs/torch" torch)" = 2.7.1+cu118 ] || fail "torch not in the env"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only pytorch
	assert_status 0
	assert_stdout_has "pytorch: satisfied - /opt/conda/envs/torch: Python 3.11, torch==2.7.1+cu118"
	[ "$(stub_log "$R" | wc -l)" = 2 ] || fail "the rerun ran commands:" "$(stub_log "$R")"
	gp --root "$R" verify --profile "$P" --only pytorch
	assert_status 0
}

@test "conda: uninstall removes the prefix gpuprov's installer made, as planned; of an operator's conda only the environment gpuprov created" {
	conda_profile
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only pytorch
	assert_status 0
	gp --root "$R" uninstall --dry-run --only pytorch
	assert_status 0
	assert_stdout_has "removes /opt/conda with all in it: gpuprov created it"
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R" --only pytorch
	assert_status 0
	[ ! -e "$R/opt/conda" ] || fail "/opt/conda is still there"
	# The operator's own conda: its prefix and .condarc stay, the
	# environment gpuprov's conda create made goes.
	cp "$WWW/Miniforge3.sh" "$R/tmp/Miniforge3.sh"
	chroot "$R" bash /tmp/Miniforge3.sh -b -p /opt/conda || fail "the installer failed"
	cp "$R/opt/conda/.condarc" "$BATS_TEST_TMPDIR/theirs.condarc"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only pytorch
	assert_status 0
	[ "$(dist_version "$R/opt/conda/envs/torch" torch)" = 2.7.1+cu118 ] || fail "torch not in the env"
	gp --root "$R" uninstall --dry-run --only pytorch
	assert_stdout_has "removes /opt/conda/envs/torch with all in it"
	refute_stdout_has "removes /opt/conda with"
	PLAN_CMD="uninstall --dry-run" RUN_CMD=uninstall assert_plan_matches_run "$R" --only pytorch
	assert_status 0
	[ ! -e "$R/opt/conda/envs/torch" ] || fail "the environment is still there"
	[ -x "$R/opt/conda/bin/conda" ] || fail "the operator's conda went"
	assert_same_file "$BATS_TEST_TMPDIR/theirs.condarc" "$R/opt/conda/.condarc"
}

@test "conda: installer conda installs the pins with conda from the channels" {
	conda_profile ', "installer": "conda"'
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only pytorch
	assert_status 0
	stub_log "$R" | grep -qx "conda install -y -n torch --override-channels -c conda-forge torch==2.7.1" ||
		fail "commands:" "$(stub_log "$R")"
	gp --root "$R" --ca-file "$CA" plan --profile "$P" --only pytorch
	assert_stdout_has "pytorch: satisfied"
}

@test "conda: defaults channels are refused unless the profile accepts their terms" {
	conda_profile
	sed -i 's|"channels": \["conda-forge"\]|"channels": ["defaults"]|' "$P"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only pytorch
	assert_status 4
	assert_stderr_has "stages.pytorch.channels has \"defaults\""
	assert_stderr_has "set stages.pytorch.defaults_tos_accepted to true"
	[ ! -e "$R/opt/conda" ] || fail "conda was installed"
	sed -i 's|"packages"|"defaults_tos_accepted": true, "packages"|' "$P"
	gp --root "$R" --ca-file "$CA" plan --profile "$P" --only pytorch
	assert_status 0
	assert_stdout_has "run /opt/conda/bin/conda tos accept --override-channels -c defaults"
}

@test "conda: a wrong installer sha256 is refused, nothing installed; none at all blocks" {
	conda_profile
	sed -i "s|$ISHA|$(printf 'a%.0s' $(seq 64))|" "$P"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only pytorch
	assert_status 1
	assert_stderr_has "sha256"
	[ ! -e "$R/opt/conda" ] || fail "conda was installed"
	[ -z "$(stub_log "$R")" ] || fail "the installer ran"
	sed -i '/installer_sha256/d' "$P"
	gp --root "$R" --ca-file "$CA" install --profile "$P" --only pytorch
	assert_status 4
	assert_stderr_has "stages.pytorch.installer_sha256 is not set"
	assert_stderr_has "the .sha256 file beside the installer comes from the same server"
}

@test "conda_init: the env stage writes the profile.d snippet, shows it in the dry run, is idempotent" {
	conda_profile
	B=$BATS_TEST_TMPDIR/bb
	mkroot "$B" --cuda
	cat > "$BATS_TEST_TMPDIR/init.json" <<JSON
{ "name": "init", "extends": "a100-ubuntu2204",
  "stages": { "pytorch": { "method": "conda", "prefix": "/opt/miniforge" }, "env": { "cuda_home": "/usr/local/cuda-11.8", "conda_init": true } } }
JSON
	gp --root "$B" plan --profile "$BATS_TEST_TMPDIR/init.json" --only env
	assert_status 0
	assert_stdout_has "create /etc/profile.d/gpuprov-conda.sh"
	assert_stdout_has "+	. '/opt/miniforge/etc/profile.d/conda.sh'"
	[ ! -e "$B/etc/profile.d/gpuprov-conda.sh" ] || fail "the dry run wrote it"
	gp --root "$B" install --profile "$BATS_TEST_TMPDIR/init.json" --only env
	assert_status 0
	grep -qx "if \[ -f '/opt/miniforge/etc/profile.d/conda.sh' \]; then" "$B/etc/profile.d/gpuprov-conda.sh" ||
		fail "snippet:" "$(cat "$B/etc/profile.d/gpuprov-conda.sh")"
	gp --root "$B" install --profile "$BATS_TEST_TMPDIR/init.json" --only env
	assert_status 0
	assert_stdout_has "env: satisfied"
	assert_stdout_has "conda initialised for login shells"
	gp --root "$B" verify --profile "$BATS_TEST_TMPDIR/init.json" --only env
	assert_status 3
	assert_stdout_has "/opt/miniforge/etc/profile.d/conda.sh missing"
	# Turned off: the snippet goes.
	sed -i 's|"conda_init": true|"conda_init": false|' "$BATS_TEST_TMPDIR/init.json"
	gp --root "$B" install --profile "$BATS_TEST_TMPDIR/init.json" --only env
	assert_status 0
	[ ! -e "$B/etc/profile.d/gpuprov-conda.sh" ] || fail "the snippet stayed"
}
