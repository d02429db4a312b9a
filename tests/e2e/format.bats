#!/usr/bin/env bats
# --format: results as text (the default) or json, the same documents as
# --json; a name that is no format, or one that contradicts --json, is a
# usage error.

load helpers

setup() {
	setup_ubuntu_root
}

@test "format: --format json prints the same documents as --json, --format text the default text" {
	local cmd
	for cmd in "plan --profile $PROFILE --only $ONLY" status detect "profiles list"; do
		# shellcheck disable=SC2086 # the command's words
		gp --root "$R" --json $cmd
		local json=$output json_status=$status
		# shellcheck disable=SC2086
		gp --root "$R" --format json $cmd
		[ "$status" -eq "$json_status" ] || fail "$cmd: exit $status, --json $json_status"
		[ "$output" = "$json" ] || fail "$cmd: --format json differs from --json" "$output"
		"$PYTHON" -c 'import json, sys; json.load(sys.stdin)' <<< "$output" ||
			fail "$cmd: not one JSON document" "$output"
		# shellcheck disable=SC2086
		gp --root "$R" $cmd
		local text=$output
		# shellcheck disable=SC2086
		gp --root "$R" --format text $cmd
		[ "$output" = "$text" ] || fail "$cmd: --format text differs from the default" "$output"
	done
	# --json with --format json says the same thing twice: fine.
	gp --root "$R" --json --format json status
	assert_status 0
}

@test "format: an unknown format, or --json with --format text -> exit 2 saying so" {
	gp --root "$R" --format xml status
	assert_status 2
	assert_stderr_has "--format xml: give one of: text, json"
	assert_usage_on_stderr
	assert_stdout_empty
	gp --root "$R" --json --format text status
	assert_status 2
	assert_stderr_has "--json and --format text contradict each other"
	assert_stdout_empty
	gp --root "$R" --format json --format text status
	assert_status 2
	assert_stderr_has "--format given twice ('json', then 'text')"
}
