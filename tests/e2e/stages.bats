#!/usr/bin/env bats
# `gpuprov stages [--json]`: the stage table as the binary has it, which the
# other tests read instead of keeping their own stage lists; and the stage
# part of docs/profile.schema.json, generated from it (`make schema-json`).

load helpers

setup() {
	require_root
	S=$BATS_TEST_TMPDIR/stages.json
}

@test "stages --json: every stage in run order with summary, order, keys and reads" {
	gp --json stages
	assert_status 0
	printf '%s\n' "$output" > "$S"
	[ "$(json_get "$S" '[s["order"] for s in d["stages"]] == list(range(1, len(d["stages"]) + 1))')" = true ] ||
		fail "orders are not 1..N:" "$output"
	[ "$(json_get "$S" 'all(s["summary"] and s["doc"] and s["keys"] for s in d["stages"])')" = true ] ||
		fail "a stage lacks its summary, doc line or keys:" "$output"
	# Every key has a name, a type and a JSON Schema with a description and
	# an example (docs/profile.schema.json's stages come from them).
	[ "$(json_get "$S" 'all(k["name"] and k["type"] and k["schema"]["description"] and
		k["schema"]["examples"] for s in d["stages"] for k in s["keys"])')" = true ] ||
		fail "a key lacks its name, type, description or example:" "$output"
	# What each stage reads from another, as its hooks do.
	[ "$(json_get "$S" '{s["name"]: s["reads"] for s in d["stages"] if s["reads"]}')" = \
		'{"driver": ["cuda", "fabric_manager"], "fabric_manager": ["driver"], "cuda": ["env"], "cudnn": ["cuda"], "env": ["pytorch"]}' ]
	[ "$(json_get "$S" '[k["type"] for s in d["stages"] if s["name"] == "env" for k in s["keys"]]')" = \
		'["string", "array of strings", "array of strings", "object of strings", "boolean"]' ]
}

@test "stages: the same list as the engine's, in plans and in --help" {
	local root=$BATS_TEST_TMPDIR/r p=$BATS_TEST_TMPDIR/p
	mkdir -p "$root" "$p"
	printf '{ "name": "t-none" }\n' > "$p/t-none.json"
	gp --root "$root" --profile-dir "$p" --json plan --profile t-none --force
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/plan.json"
	[ "$(json_get "$BATS_TEST_TMPDIR/plan.json" '[s["name"] for s in d["stages"]]')" = \
		"$(stage_names_json)" ]
	gp --help
	assert_stdout_has "stages, in order: $(stage_names ', ')"
	assert_stdout_has "  stages                list the stages in order"
	gp stages
	assert_status 0
	local i=0 s
	for s in $(stage_names); do
		i=$((i + 1))
		grep -q "^$i $s: " <<< "$output" || fail "no line '$i $s: ...':" "$output"
	done
	assert_stdout_has "  keys: blacklist_file (string), initramfs (array of strings)"
	assert_stdout_has "  reads the settings of: cuda"
	gp stages extra
	assert_status 2
	assert_stderr_has "unexpected argument 'extra'"
}

@test "stages: docs/profile.schema.json's stage part is what the stage tables generate" {
	local gen=$BATS_TEST_TMPDIR/profile.schema.json
	"$PYTHON" "$REPO_ROOT/docs/schema-json.py" "$GPUPROV" "$REPO_ROOT/docs/profile.schema.json" > "$gen" ||
		fail "docs/schema-json.py failed"
	diff -u "$REPO_ROOT/docs/profile.schema.json" "$gen" ||
		fail "docs/profile.schema.json is stale: run 'make schema-json'"
}
