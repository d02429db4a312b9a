#!/usr/bin/env bats
# docs/profile.schema.json, the JSON Schema for editors, against the loader:
# every catalogue profile (and every valid fixture profile) validates, and
# every broken profile that is JSON at all is refused by the schema too,
# unless its fault needs other files or the merged profile (listed in
# schema_check.py). That every key path of the loader is in the schema, and
# the reverse, is tests/unit/test_profile_schema.c. Needs python3 with
# jsonschema (Debian: python3-jsonschema, installed by `make deps`).

load helpers

setup() {
	SCHEMA=$REPO_ROOT/docs/profile.schema.json
	CHECK=$BATS_TEST_DIRNAME/schema_check.py
	PY=
	for p in "$PYTHON" python3; do
		if "$p" -c 'import jsonschema' 2> /dev/null; then
			PY=$p
			break
		fi
	done
	[ -n "$PY" ] || skip "python3 jsonschema module missing (make deps installs python3-jsonschema)"
}

@test "schema: every catalogue profile validates against docs/profile.schema.json" {
	run "$PY" "$CHECK" valid "$SCHEMA" "$REPO_ROOT/profiles"
	[ "$status" -eq 0 ] || fail "$output"
}

@test "schema: the fixture profiles and the corpus's valid parents validate" {
	run "$PY" "$CHECK" valid "$SCHEMA" "$REPO_ROOT/tests/fixtures/profiles" \
		"$REPO_ROOT/tests/fixtures/broken-profiles/parents"
	[ "$status" -eq 0 ] || fail "$output"
}

@test "schema: refuses every broken profile gpuprov refuses on its own" {
	run "$PY" "$CHECK" corpus "$SCHEMA" "$REPO_ROOT/tests/fixtures/broken-profiles"
	[ "$status" -eq 0 ] || fail "$output"
}

@test "schema: a profile that breaks it is reported with its path" {
	d=$BATS_TEST_TMPDIR/p
	mkdir "$d"
	printf '// comment\n{"name": "x", "stages": {"driver": {"branch": "5350"}}}\n' > "$d/x.json"
	run "$PY" "$CHECK" valid "$SCHEMA" "$d"
	[ "$status" -eq 1 ] || fail "status $status: $output"
	[[ $output == *"x.json: /stages/driver: "* ]] || [[ $output == *"x.json: /stages/driver/branch: "* ]] ||
		fail "$output"
}
