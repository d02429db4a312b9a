#!/usr/bin/env bats
# verify as monitoring: --format prometheus and --textfile[-dir]. The
# metrics are parsed with a real Prometheus text-format parser
# (prometheus_client, Debian's python3-prometheus-client, through
# prom_parse.py), which also holds that every family has HELP and TYPE
# and no series comes twice; values and labels are asserted on its output.
# The roots are the stub roots of golden.bats and format.bats: Ubuntu 22.04
# with an A100, nouveau unloaded, after installing nouveau,env.

load helpers

TEXTFILE_DIR=/var/lib/prometheus/node-exporter

setup() {
	require_root
	R=$BATS_TEST_TMPDIR/root
	mkroot "$R" --cuda --nouveau unloaded
	install_ubuntu
	assert_status 0
	mkdir -p "$R$TEXTFILE_DIR"
}

# metrics [TEXT]: the parsed samples of TEXT (default: $output) in $METRICS.
metrics() {
	METRICS=$("$PYTHON" "$BATS_TEST_DIRNAME/prom_parse.py" <<< "${1-$output}") ||
		fail "prom_parse.py refused the metrics:" "${1-$output}"
}

# assert_metric LINE: the parsed samples have exactly this line.
assert_metric() {
	grep -qxF -- "$1" <<< "$METRICS" && return 0
	fail "no sample line: $1" "--- parsed:" "$METRICS"
}

refute_metric_name() {
	! grep -q "^$1[{ ]" <<< "$METRICS" || fail "unexpected sample of $1" "$METRICS"
}

# The value of the sample of NAME (a family without labels).
metric_value() {
	grep "^$1 " <<< "$METRICS" | awk '{ print $NF }'
}

# A driver installed and loaded, as the driver stage reads them.
driver_seen() {
	mkdir -p "$R/var/lib/dpkg"
	printf 'Package: nvidia-driver-535-server\nStatus: install ok installed\nVersion: 535.183.01-0ubuntu1\nArchitecture: amd64\n' \
		> "$R/var/lib/dpkg/status"
	nvidia_driver 535.183.01
}

@test "prometheus: verify --format prometheus, parsed: info, checks, stage states, driver, times" {
	driver_seen
	gp --root "$R" status --json
	local sha version before after
	sha=$("$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["profile"]["sha256"])' <<< "$output")
	version=$("$GPUPROV" --version | awk '{ print $2 }')
	before=$(date +%s)
	gp --root "$R" verify --format prometheus
	after=$(date +%s)
	assert_status 3
	metrics
	assert_metric "gpuprov_info{profile=\"$PROFILE\",profile_sha256=\"$sha\",version=\"$version\"} 1.0"
	assert_metric "gpuprov_verify_success 0.0"
	assert_metric 'gpuprov_verify_check_success{check="nouveau.blacklist",stage="nouveau"} 1.0'
	assert_metric 'gpuprov_verify_check_success{check="driver.module.version",stage="driver"} 1.0'
	assert_metric 'gpuprov_verify_check_success{check="driver.nvml",stage="driver"} 0.0'
	assert_metric 'gpuprov_verify_check_success{check="cuda.package",stage="cuda"} 0.0'
	assert_metric 'gpuprov_stage_state{stage="nouveau",state="done"} 1.0'
	assert_metric 'gpuprov_stage_state{stage="env",state="done"} 1.0'
	assert_metric 'gpuprov_stage_state{stage="driver",state="never_run"} 1.0'
	[ "$(grep -c "^gpuprov_stage_state{" <<< "$METRICS")" -eq "$(stage_names $'\n' | wc -l)" ] ||
		fail "not one stage_state per stage" "$METRICS"
	assert_metric "gpuprov_reboot_pending 0.0"
	assert_metric 'gpuprov_driver_info{flavor="proprietary",installed="535.183.01",loaded="535.183.01"} 1.0'
	# No drift on this root: the family is there, without samples.
	assert_metric "# family gpuprov_drift_items"
	refute_metric_name gpuprov_drift_items
	local ts duration
	ts=$(metric_value gpuprov_last_verify_timestamp_seconds)
	duration=$(metric_value gpuprov_verify_duration_seconds)
	"$PYTHON" -c 'import sys; b, a, t, d = map(float, sys.argv[1:]); sys.exit(not (b <= t <= a + 1 and 0 <= d <= a + 1 - b))' \
		"$before" "$after" "$ts" "$duration" ||
		fail "timestamp $ts not in [$before, $after], or duration $duration off"
	# One series per finding of the JSON report, the skipped ones left out,
	# each 0 exactly when the finding failed.
	local want got
	gp --root "$R" --json verify
	want=$("$PYTHON" -c '
import json, sys
for f in json.load(sys.stdin)["findings"]:
    if f["level"] != "skip":
        v = "0.0" if f["level"] == "fail" else "1.0"
        print("gpuprov_verify_check_success{check=\"%s\",stage=\"%s\"} %s" % (f["id"], f["stage"], v))
' <<< "$output" | sort)
	got=$(grep '^gpuprov_verify_check_success{' <<< "$METRICS" | sort)
	[ "$want" = "$got" ] || fail "check_success differs from the JSON report:" "$(diff <(echo "$want") <(echo "$got"))"
}

@test "prometheus: a passing verify gives verify_success 1; without the driver stage no driver_info sample" {
	gp --root "$R" verify --only nouveau,env --format prometheus
	assert_status 0
	metrics
	assert_metric "gpuprov_verify_success 1.0"
	refute_stdout_has '} 0'
	assert_metric "# family gpuprov_driver_info"
	refute_metric_name gpuprov_driver_info
}

@test "prometheus: a pending reboot: reboot_pending 1, the stage's journal state, the warning counts as 1" {
	local L=$BATS_TEST_TMPDIR/loaded
	mkroot "$L" --cuda
	gp --root "$L" install --profile "$PROFILE" --only "$ONLY"
	assert_status 5
	gp --root "$L" verify --format prometheus
	metrics
	assert_metric "gpuprov_reboot_pending 1.0"
	assert_metric 'gpuprov_stage_state{stage="nouveau",state="reboot_pending"} 1.0'
	assert_metric 'gpuprov_verify_check_success{check="gpuprov.pending_reboot",stage="gpuprov"} 1.0'
	assert_metric 'gpuprov_verify_check_success{check="nouveau.loaded.nouveau",stage="nouveau"} 0.0'
}

@test "prometheus: label values from the journal are escaped, control characters become ?, long ones are cut" {
	"$PYTHON" - "$R/var/lib/gpuprov/state.json" <<'PY'
import json, sys
path = sys.argv[1]
with open(path, "rb") as f:
    j = json.load(f)
j["stages"]["env"]["state"] = 'a"b\\c\nd\x01'
j["stages"]["nouveau"]["state"] = "x" * 300
with open(path, "w") as f:
    json.dump(j, f)
PY
	gp --root "$R" verify --only nouveau,env --format prometheus
	assert_status 0
	metrics
	assert_metric 'gpuprov_stage_state{stage="env",state="a\"b\\c\nd?"} 1.0'
	# Cut at 256 bytes, ending "...".
	assert_metric "gpuprov_stage_state{stage=\"nouveau\",state=\"$(printf 'x%.0s' $(seq 256))...\"} 1.0"
}

@test "prometheus: --textfile-dir writes DIR/gpuprov.prom atomically, also when a check fails; stdout keeps its format" {
	gp --root "$R" verify --textfile-dir "$TEXTFILE_DIR"
	assert_status 3
	assert_stdout_has "gpuprov verify: profile $PROFILE"
	local f=$R$TEXTFILE_DIR/gpuprov.prom
	[ "$(stat -c %a "$f")" = 644 ] || fail "mode $(stat -c %a "$f"), not 644"
	[ "$(ls -A "$R$TEXTFILE_DIR")" = gpuprov.prom ] || fail "more than the file:" "$(ls -A "$R$TEXTFILE_DIR")"
	metrics "$(cat "$f")"
	assert_metric "gpuprov_verify_success 0.0"
	assert_metric 'gpuprov_verify_check_success{check="driver.installed",stage="driver"} 0.0'
	# The same samples as --format prometheus prints, but for the times.
	local file_samples
	file_samples=$(grep -v '_seconds ' <<< "$METRICS")
	gp --root "$R" verify --format prometheus --textfile-dir "$TEXTFILE_DIR/"
	assert_status 3
	metrics
	[ "$(grep -v '_seconds ' <<< "$METRICS")" = "$file_samples" ] ||
		fail "the file and stdout differ"
	# A passing run replaces it.
	gp --root "$R" verify --only nouveau,env --textfile-dir "$TEXTFILE_DIR"
	assert_status 0
	metrics "$(cat "$f")"
	assert_metric "gpuprov_verify_success 1.0"
	[ -z "$(temp_files "$R$TEXTFILE_DIR")" ] || fail "temp files left:" "$(temp_files "$R$TEXTFILE_DIR")"
}

@test "prometheus: an odd existing target is replaced (unreadable, symlink, FIFO); a directory there fails naming it" {
	local d=$R$TEXTFILE_DIR f=$R$TEXTFILE_DIR/gpuprov.prom
	echo old > "$f"
	chmod 000 "$f"
	gp --root "$R" verify --only nouveau,env --textfile-dir "$TEXTFILE_DIR"
	assert_status 0
	metrics "$(cat "$f")"
	assert_metric "gpuprov_verify_success 1.0"
	# A symlink is replaced, not followed: its target is untouched.
	rm -f "$f"
	echo keep > "$R/etc/elsewhere"
	ln -s /etc/elsewhere "$f"
	gp --root "$R" verify --only nouveau,env --textfile-dir "$TEXTFILE_DIR"
	assert_status 0
	[ -f "$f" ] && [ ! -L "$f" ] || fail "the symlink was not replaced by a file"
	[ "$(cat "$R/etc/elsewhere")" = keep ] || fail "the symlink's target was written"
	rm -f "$f"
	mkfifo "$f"
	gp --root "$R" verify --only nouveau,env --textfile-dir "$TEXTFILE_DIR"
	assert_status 0
	[ -f "$f" ] || fail "the FIFO was not replaced"
	rm -f "$f"
	mkdir "$f"
	gp --root "$R" verify --only nouveau,env --textfile-dir "$TEXTFILE_DIR"
	assert_status 1
	assert_stderr_has "cannot write the textfile $f: Is a directory"
	[ -d "$f" ] || fail "the directory was replaced"
	[ -z "$(temp_files "$d")" ] || fail "temp files left:" "$(temp_files "$d")"
}

@test "prometheus: a textfile directory that is a symlink, a file, absent or relative is refused before any check" {
	mkdir -p "$R/srv/real"
	ln -s /srv/real "$R/srv/link"
	gp --root "$R" verify --textfile-dir /srv/link
	assert_status 2
	assert_stderr_has "textfile directory $R/srv/link (--textfile-dir) is a symlink"
	assert_stdout_empty
	[ -z "$(ls -A "$R/srv/real")" ] || fail "written through the symlink"
	gp --root "$R" verify --textfile-dir /srv/link/
	assert_status 2
	assert_stderr_has "is a symlink"
	touch "$R/srv/file"
	gp --root "$R" verify --textfile-dir /srv/file
	assert_status 2
	assert_stderr_has "textfile directory $R/srv/file (--textfile-dir) is not a directory"
	gp --root "$R" verify --textfile-dir /srv/absent
	assert_status 2
	assert_stderr_has "textfile directory $R/srv/absent (--textfile-dir): No such file or directory; create it"
	gp --root "$R" verify --textfile-dir srv/real
	assert_status 2
	assert_stderr_has "--textfile-dir srv/real: give an absolute path inside the root"
}

@test "prometheus: --textfile uses textfile_dir of /etc/gpuprov/gpuprov.conf, else Debian's directory" {
	gp --root "$R" verify --only nouveau,env --textfile
	assert_status 0
	[ -f "$R$TEXTFILE_DIR/gpuprov.prom" ] || fail "not written to the default $TEXTFILE_DIR"
	mkdir -p "$R/etc/gpuprov" "$R/srv/metrics"
	printf '# where node_exporter looks\n\n  textfile_dir = /srv/metrics  \n' > "$R/etc/gpuprov/gpuprov.conf"
	gp --root "$R" verify --only nouveau,env --textfile
	assert_status 0
	metrics "$(cat "$R/srv/metrics/gpuprov.prom")"
	assert_metric "gpuprov_verify_success 1.0"
	# The option wins over the file.
	rm "$R$TEXTFILE_DIR/gpuprov.prom"
	gp --root "$R" verify --only nouveau,env --textfile-dir "$TEXTFILE_DIR"
	assert_status 0
	[ -f "$R$TEXTFILE_DIR/gpuprov.prom" ] || fail "--textfile-dir did not win"
	rm -rf "$R/srv/metrics"
	gp --root "$R" verify --only nouveau,env --textfile
	assert_status 2
	assert_stderr_has "textfile directory $R/srv/metrics (textfile_dir in /etc/gpuprov/gpuprov.conf): No such file"
}

@test "prometheus: a bad line of gpuprov.conf is an error naming file and line, and what to write" {
	local conf=$R/etc/gpuprov/gpuprov.conf
	mkdir -p "$R/etc/gpuprov"
	printf '# ok\ntextfile_dir /srv\n' > "$conf"
	gp --root "$R" verify --textfile
	assert_status 65
	assert_stderr_has "$conf:2: expected KEY = VALUE, got 'textfile_dir /srv'; e.g. textfile_dir = /var/lib/prometheus/node-exporter"
	assert_stdout_empty
	printf 'textfile-dir = /srv\n' > "$conf"
	gp --root "$R" verify --textfile
	assert_status 65
	assert_stderr_has "$conf:1: unknown key 'textfile-dir'; the keys are: textfile_dir"
	printf 'textfile_dir = /srv\ntextfile_dir = /tmp\n' > "$conf"
	gp --root "$R" verify --textfile
	assert_status 65
	assert_stderr_has "$conf:2: textfile_dir given twice (first on line 1); keep one"
	printf 'textfile_dir = srv\n' > "$conf"
	gp --root "$R" verify --textfile
	assert_status 65
	assert_stderr_has "$conf:1: textfile_dir needs an absolute directory, got 'srv'"
	# Bounded, and a regular file only.
	head -c 70000 /dev/zero | tr '\0' '#' > "$conf"
	gp --root "$R" verify --textfile
	assert_status 65
	assert_stderr_has "larger than"
	rm "$conf"
	mkfifo "$conf"
	gp --root "$R" verify --textfile
	assert_status 65
	assert_stderr_has "FIFO"
	# Read only when --textfile needs it.
	gp --root "$R" verify --only nouveau,env --textfile-dir "$TEXTFILE_DIR"
	assert_status 0
}

@test "prometheus: --format prometheus and --textfile are verify's only" {
	gp --root "$R" --format prometheus status
	assert_status 2
	assert_stderr_has "option --format prometheus does not apply to this command"
	gp --root "$R" plan --profile "$PROFILE" --format prometheus
	assert_status 2
	assert_stderr_has "option --format prometheus does not apply to this command"
	gp --root "$R" status --textfile
	assert_status 2
	assert_stderr_has "option --textfile/--textfile-dir does not apply to this command"
	gp --root "$R" --json --format prometheus verify
	assert_status 2
	assert_stderr_has "--json and --format prometheus contradict each other"
}
