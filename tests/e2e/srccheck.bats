#!/usr/bin/env bats
# The source check of `make lint` (tests/lint/srccheck.sh): over a small tree
# with one breach of each rule it fails and names the file and line; over
# src/ it passes. Comments and strings that name a banned call are not code.

check=$BATS_TEST_DIRNAME/../lint/srccheck.sh
src=$BATS_TEST_DIRNAME/../../src

setup() {
	tree=$(mktemp -d)
	mkdir -p "$tree/stages" "$tree/sys"
}

teardown() {
	rm -rf "$tree"
}

@test "srccheck: src/ passes" {
	run sh "$check" "$src"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "srccheck: a banned call anywhere fails with FILE:LINE" {
	cat > "$tree/sys/a.c" <<'EOF'
/* sprintf(buf, "x") in a comment is fine */
static void f(char *buf, const char *s)
{
	const char *msg = "strcpy(a, b) in a string is fine";
	sprintf(buf, "%s", s);
	int n = atoi(s); // atoi in a line comment is fine
	system("true");
	(void)msg;
	(void)n;
}
EOF
	run sh "$check" "$tree"
	[ "$status" -eq 1 ]
	[[ "$output" == *"$tree/sys/a.c:5: sprintf is banned: it cannot bound what it writes"* ]]
	[[ "$output" == *"$tree/sys/a.c:6: atoi is banned: it cannot report a bad number"* ]]
	[[ "$output" == *"$tree/sys/a.c:7: system is banned: it runs a shell string"* ]]
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 3 ]
}

@test "srccheck: a stage that writes, runs, opens or reads dry_run fails" {
	cat > "$tree/stages/s.c" <<'EOF'
static int apply(struct gp_ctx *c)
{
	gp_root_write_atomic(&c->root, "/etc/x", "", 0, 0644, 0, 0);
	gp_run(&opts, argv, &res);
	gp_run_result_free(&res);
	pid_t pid = fork();
	FILE *f = fopen("/etc/x", "r");
	if (c->dry_run)
		return 0;
	/* gp_root_unlink(r, p) in a comment is fine, and in one over
	 * lines: fork() */
	return unlink("/etc/x");
}
EOF
	run sh "$check" "$tree"
	[ "$status" -eq 1 ]
	[[ "$output" == *"$tree/stages/s.c:3: a stage calls gp_root_write_atomic: stages change the target only through the effect door"* ]]
	[[ "$output" == *"$tree/stages/s.c:4: a stage calls gp_run: "* ]]
	[[ "$output" == *"$tree/stages/s.c:6: a stage calls fork: "* ]]
	[[ "$output" == *"$tree/stages/s.c:7: a stage calls fopen: "* ]]
	[[ "$output" == *"$tree/stages/s.c:8: a stage reads dry_run: "* ]]
	[[ "$output" == *"$tree/stages/s.c:12: a stage calls unlink: "* ]]
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 6 ]
}

@test "srccheck: the stage rules apply to stages only" {
	cat > "$tree/sys/w.c" <<'EOF'
static int w(const struct gp_root *r)
{
	return gp_root_unlink(r, "/etc/x");
}
EOF
	run sh "$check" "$tree"
	[ "$status" -eq 0 ]
}

@test "srccheck: GP_EXIT_ outside the CLI fails, in the CLI files it does not" {
	cat > "$tree/sys/e.c" <<'EOF2'
/* GP_EXIT_USAGE in a comment is fine */
static int e(struct gp_err *err)
{
	return gp_fail(err, GP_EXIT_BLOCKED, "blocked");
}
EOF2
	cat > "$tree/stages/s.h" <<'EOF2'
#define S_FAILED (GP_EXIT_APPLY_FAILED)
EOF2
	printf 'int main(void)\n{\n\treturn GP_EXIT_OK;\n}\n' > "$tree/main.c"
	printf 'static int x = GP_EXIT_USAGE;\n' > "$tree/detect.c"
	run sh "$check" "$tree"
	[ "$status" -eq 1 ]
	[[ "$output" == *"$tree/sys/e.c:4: GP_EXIT_BLOCKED outside the CLI: below it code returns error codes"* ]]
	[[ "$output" == *"$tree/stages/s.h:1: GP_EXIT_APPLY_FAILED outside the CLI: "* ]]
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 2 ]
}

@test "srccheck: a stage that uses the door's own helpers fails" {
	cat > "$tree/stages/d.c" <<'EOF2'
static int apply(struct gp_ctx *c, char ***v)
{
	/* gp_ctx_save_journal(c) in a comment is fine */
	gp_ctx_walk(c, "/opt/x",
	            gp_ctx_collect_path, v);
	gp_ctx_record_fingerprint(c, "/etc/x");
	if (gp_ctx_make_parent(c, "/etc/x") < 0)
		return -1;
	gp_log(c, "%s", gp_ctx_stage_name(c));
	return gp_ctx_save_journal(c);
}
EOF2
	cp "$tree/stages/d.c" "$tree/sys/d.c"
	run sh "$check" "$tree"
	[ "$status" -eq 1 ]
	[[ "$output" == *"$tree/stages/d.c:4: a stage uses gp_ctx_walk: it is the effect door's own helper, not for stages"* ]]
	[[ "$output" == *"$tree/stages/d.c:5: a stage uses gp_ctx_collect_path: "* ]]
	[[ "$output" == *"$tree/stages/d.c:6: a stage uses gp_ctx_record_fingerprint: "* ]]
	[[ "$output" == *"$tree/stages/d.c:7: a stage uses gp_ctx_make_parent: "* ]]
	[[ "$output" == *"$tree/stages/d.c:9: a stage uses gp_ctx_stage_name: "* ]]
	[[ "$output" == *"$tree/stages/d.c:10: a stage uses gp_ctx_save_journal: "* ]]
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 6 ]
}
