#!/usr/bin/env bats
# dist/: what `make install` puts beside the binary for operations. The
# systemd units (dist/systemd/) as make install-units writes them, checked
# with the real systemd-analyze verify (Debian's systemd package; it needs no
# running systemd, and the binary ExecStart names must exist, so the units
# are installed with BINDIR in the test's directory); the example alerting
# rules (dist/prometheus/gpuprov-alerts.yml) parsed as YAML and held to the
# metric names gpuprov writes. promtool is not used: Debian 12 ships it only
# in the prometheus server package (about 100 MB installed).

load helpers

# install_units [MAKE VARIABLES...]: make install-units with a build
# directory of the test's own (the Makefile writes its flags stamp there).
install_units() {
	make -s -C "$REPO_ROOT" BUILD="$BATS_TEST_TMPDIR/build" install-units "$@" ||
		fail "make install-units $* failed"
}

@test "dist: make install-units honours DESTDIR and UNITDIR; ExecStart is BINDIR's gpuprov" {
	local d=$BATS_TEST_TMPDIR/dest
	install_units DESTDIR="$d"
	[ -f "$d/lib/systemd/system/gpuprov-verify.service" ] || fail "no service under DESTDIR's /lib/systemd/system"
	[ -f "$d/lib/systemd/system/gpuprov-verify.timer" ] || fail "no timer"
	grep -qx 'ExecStart=/usr/local/bin/gpuprov verify --textfile' "$d/lib/systemd/system/gpuprov-verify.service" ||
		fail "ExecStart:" "$(grep ExecStart "$d/lib/systemd/system/gpuprov-verify.service")"
	[ "$(stat -c %a "$d/lib/systemd/system/gpuprov-verify.service")" = 644 ] || fail "service not 0644"
	install_units DESTDIR="$d" UNITDIR=/usr/lib/systemd/system BINDIR=/usr/bin
	grep -qx 'ExecStart=/usr/bin/gpuprov verify --textfile' "$d/usr/lib/systemd/system/gpuprov-verify.service" ||
		fail "BINDIR not used"
}

@test "dist: systemd-analyze verify accepts the units without a word; it would refuse a broken one" {
	command -v systemd-analyze > /dev/null || fail "no systemd-analyze (Debian's systemd package, in TEST_DEPS)"
	local t=$BATS_TEST_TMPDIR/units
	install_units BINDIR="$t/bin" UNITDIR="$t/lib"
	mkdir -p "$t/bin"
	cp "$GPUPROV" "$t/bin/gpuprov"
	run systemd-analyze verify --man=no --recursive-errors=no "$t/lib/gpuprov-verify.service" "$t/lib/gpuprov-verify.timer"
	[ "$status" -eq 0 ] && [ -z "$output" ] || fail "systemd-analyze verify (exit $status):" "$output"
	# The timer's settings, as the issue asks: every boot, every quarter hour,
	# spread over a fleet.
	local timer=$t/lib/gpuprov-verify.timer
	grep -qx 'OnBootSec=2min' "$timer" && grep -qx 'OnUnitActiveSec=15min' "$timer" &&
		grep -q '^RandomizedDelaySec=' "$timer" || fail "timer settings:" "$(cat "$timer")"
	grep -qx 'Type=oneshot' "$t/lib/gpuprov-verify.service" || fail "not oneshot"
	grep -qx 'PrivateNetwork=yes' "$t/lib/gpuprov-verify.service" || fail "verify gets a network"
	# No hardening that hides what verify reads: /dev/nvidia* (PrivateDevices,
	# DeviceAllow, ProtectClock's implied DeviceAllow), /usr/lib/modules
	# (ProtectKernelModules), the mount namespace of its read-only commands
	# (RestrictNamespaces), W+X memory for CUDA's JIT (MemoryDenyWriteExecute).
	! grep -E '^(PrivateDevices|DeviceAllow|DevicePolicy|ProtectClock|ProtectKernelModules|RestrictNamespaces|MemoryDenyWriteExecute|SystemCallFilter)=' \
		"$t/lib/gpuprov-verify.service" || fail "an option that breaks verify"
	# The same check sees a misspelt key and a missing binary.
	sed 's/^Nice=/Nicee=/' "$t/lib/gpuprov-verify.service" > "$t/lib/broken.service"
	run systemd-analyze verify --man=no --recursive-errors=no "$t/lib/broken.service"
	[[ "$output" == *"Unknown key 'Nicee'"* ]] || fail "a misspelt key went unnoticed:" "$output"
	rm "$t/bin/gpuprov"
	run systemd-analyze verify --man=no --recursive-errors=no "$t/lib/gpuprov-verify.service"
	[ "$status" -ne 0 ] || fail "a missing ExecStart binary went unnoticed:" "$output"
}

@test "dist: the service's ExecStart, run on a fixture root, writes the textfile and exits 3 on a failed check" {
	require_root
	local t=$BATS_TEST_TMPDIR/units r=$BATS_TEST_TMPDIR/root
	install_units BINDIR="$t/bin" UNITDIR="$t/lib"
	mkdir -p "$t/bin"
	cp "$GPUPROV" "$t/bin/gpuprov"
	mkroot "$r" --cuda --nouveau unloaded
	run "$GPUPROV" --root "$r" install --profile "$PROFILE" --only "$ONLY"
	[ "$status" -eq 0 ] || fail "install: exit $status" "$output"
	mkdir -p "$r/var/lib/prometheus/node-exporter"
	local exec
	exec=$(sed -n 's/^ExecStart=//p' "$t/lib/gpuprov-verify.service")
	# The unit's words, as systemd splits them (no quotes in them), on the root.
	# shellcheck disable=SC2086
	run --separate-stderr $exec --root "$r"
	[ "$status" -eq 3 ] || fail "ExecStart $exec: exit $status, not 3 (a check fails on this root)" "$output"
	[[ "$output" == *"gpuprov verify: profile $PROFILE"* ]] || fail "no text report for the journal:" "$output"
	grep -qx 'gpuprov_verify_success 0' "$r/var/lib/prometheus/node-exporter/gpuprov.prom" ||
		fail "the textfile was not written"
}

@test "dist: the example alerting rules are YAML of Prometheus' rule-file shape, on gpuprov's metrics" {
	require_root
	local r=$BATS_TEST_TMPDIR/root
	mkroot "$r" --cuda
	# The metric names gpuprov writes: the families of a real verify.
	run --separate-stderr "$GPUPROV" --root "$r" verify --profile "$PROFILE" --format prometheus
	[ -n "$output" ] || fail "no metrics:" "${stderr-}"
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/metrics"
	"$PYTHON" - "$REPO_ROOT/dist/prometheus/gpuprov-alerts.yml" "$BATS_TEST_TMPDIR/metrics" <<'PY'
import re, sys, yaml
written = set(re.findall(r"^# TYPE (gpuprov_[a-z_]+) ", open(sys.argv[2]).read(), re.M))
doc = yaml.safe_load(open(sys.argv[1]))
groups = doc.get("groups") if isinstance(doc, dict) else None
if not isinstance(groups, list) or not groups:
    sys.exit("no list of groups")
allowed = {"alert", "expr", "for", "labels", "annotations"}
problems, exprs = [], []
for g in groups:
    if not isinstance(g, dict) or not isinstance(g.get("name"), str) \
            or not isinstance(g.get("rules"), list):
        problems.append(f"group {g!r}: needs a name and rules")
        continue
    for r in g["rules"]:
        name = r.get("alert")
        if not isinstance(name, str) or not isinstance(r.get("expr"), str):
            problems.append(f"rule {r!r}: needs alert and expr")
            continue
        if set(r) - allowed:
            problems.append(f"{name}: unknown keys {sorted(set(r) - allowed)}")
        if "for" in r and not re.fullmatch(r"([0-9]+(ms|s|m|h|d|w|y))+", str(r["for"])):
            problems.append(f"{name}: for {r['for']!r} is no duration")
        for used in re.findall(r"gpuprov_[a-z_]+", r["expr"]):
            if used not in written:
                problems.append(f"{name}: {used} is no metric gpuprov writes")
        exprs.append(r["expr"])
for need in ("gpuprov_verify_success == 0", "time() - gpuprov_last_verify_timestamp_seconds",
             "gpuprov_reboot_pending", "gpuprov_drift_items"):
    if not any(need in e for e in exprs):
        problems.append(f"no rule on {need}")
sys.exit("\n".join(problems) or None)
PY
}
