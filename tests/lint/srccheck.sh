#!/bin/sh
# srccheck.sh [DIR]: the source rules of docs/CODING-STYLE.md that a
# compiler does not hold, checked over the C files under DIR (default src),
# comments and string literals left out. Prints FILE:LINE: what and why for
# each breach and exits 1 when there is one.
#  - Anywhere: no sprintf, vsprintf, strcpy, strcat, atoi, atol, atoll,
#    system, popen, gets (unbounded writes, unchecked numbers, shell strings).
#  - GP_EXIT_* only in the CLI (DIR/main.c, engine.c, catalog.c, detect.c,
#    stagelist.c, exitcodes.c): below it code returns error codes
#    (docs/architecture.md, "Errors").
#  - In DIR/stages/*.c: no root writes (gp_root_write_atomic, gp_root_mkdir_p,
#    gp_root_unlink, gp_root_symlink, gp_root_remove_tree, gp_rm_tree_at, the
#    raw gp_root_openat/gp_root_open_parent, or their libc twins), no command
#    runner (gp_run, fork, exec*, posix_spawn*), no fopen, and no reading of
#    dry_run: a stage changes the target only through the effect door
#    (include/gpuprov/context.h), which also knows the mode. Nor the door's
#    own helpers that context.h marks "not for stages" (gp_ctx_stage_name,
#    gp_ctx_save_journal, gp_ctx_make_parent, gp_ctx_record_fingerprint,
#    gp_ctx_walk, gp_ctx_collect_path), called or passed.
set -u
dir=${1:-src}
if [ ! -d "$dir" ]; then
	echo "srccheck: $dir is not a directory" >&2
	exit 2
fi
files=$(find "$dir" -name '*.c' -o -name '*.h' | LC_ALL=C sort)
[ -n "$files" ] || exit 0
# shellcheck disable=SC2086 # files is a list of paths without blanks
awk -v stagedir="$dir/stages/" -v dir="$dir/" '
# Blanks out comments, string and character literals (keeping the line
# numbers), so that only code is matched.
function strip(line,    out, i, c, n) {
	out = ""
	n = length(line)
	for (i = 1; i <= n; i++) {
		c = substr(line, i, 1)
		if (incomment) {
			if (c == "*" && substr(line, i + 1, 1) == "/") {
				incomment = 0
				i++
			}
			continue
		}
		if (quote != "") {
			if (c == "\\") {
				i++
			} else if (c == quote) {
				quote = ""
				out = out c
			}
			continue
		}
		if (c == "/" && substr(line, i + 1, 1) == "*") {
			incomment = 1
			i++
			out = out " "
			continue
		}
		if (c == "/" && substr(line, i + 1, 1) == "/")
			break
		if (c == "\"" || c == "\047") {
			quote = c
		}
		out = out c
	}
	return out
}
function report(why) {
	printf "%s:%d: %s\n", FILENAME, FNR, why
	bad = 1
}
# The first call of one of the names (a |-separated list) in code, or "".
function called(code, names,    m) {
	if (match(code, "(^|[^A-Za-z0-9_.>])(" names ")[ \t]*\\(")) {
		m = substr(code, RSTART, RLENGTH)
		sub(/^[^A-Za-z0-9_.>]/, "", m)
		sub(/[ \t]*\($/, "", m)
		return m
	}
	return ""
}
FNR == 1 {
	incomment = 0
	quote = ""
	stage = index(FILENAME, stagedir) == 1 && FILENAME ~ /\.c$/
	rel = index(FILENAME, dir) == 1 ? substr(FILENAME, length(dir) + 1) : FILENAME
	cli = rel ~ /^(main|engine|catalog|detect|stagelist|exitcodes)\.c$/
}
{
	quote = ""
	code = strip($0)
	f = called(code, "sprintf|vsprintf|strcpy|strcat|gets")
	if (f != "")
		report(f " is banned: it cannot bound what it writes (use snprintf, gp_xasprintf or gp_buf)")
	f = called(code, "atoi|atol|atoll")
	if (f != "")
		report(f " is banned: it cannot report a bad number (use strtol or strtoul with an end and range check)")
	f = called(code, "system|popen")
	if (f != "")
		report(f " is banned: it runs a shell string (build an argv and use gp_run, src/sys/run.c)")
	if (!cli && match(code, /(^|[^A-Za-z0-9_])GP_EXIT_[A-Za-z0-9_]*/)) {
		f = substr(code, RSTART, RLENGTH)
		sub(/^[^A-Za-z0-9_]/, "", f)
		report(f " outside the CLI: below it code returns error codes and main() chooses the exit status (docs/architecture.md, \"Errors\")")
	}
	if (!stage)
		next
	if (match(code, /(^|[^A-Za-z0-9_])(gp_ctx_stage_name|gp_ctx_save_journal|gp_ctx_make_parent|gp_ctx_record_fingerprint|gp_ctx_walk|gp_ctx_collect_path)([^A-Za-z0-9_]|$)/)) {
		f = substr(code, RSTART, RLENGTH)
		sub(/^[^A-Za-z0-9_]/, "", f)
		sub(/[^A-Za-z0-9_]$/, "", f)
		report("a stage uses " f ": it is the effect door\047s own helper, not for stages (include/gpuprov/context.h)")
	}
	f = called(code, "gp_root_write_atomic|gp_root_mkdir_p|gp_root_unlink|gp_root_symlink|gp_root_remove_tree|gp_rm_tree_at|gp_root_openat|gp_root_open_parent")
	if (f != "")
		report("a stage calls " f ": stages change the target only through the effect door (gp_effect_* in include/gpuprov/context.h)")
	f = called(code, "open|openat|creat|rename|renameat|renameat2|unlink|unlinkat|mkdir|mkdirat|rmdir|symlink|symlinkat|link|linkat|chmod|fchmod|fchmodat|chown|fchown|lchown|truncate|ftruncate")
	if (f != "")
		report("a stage calls " f ": stages read through gp_ctx_read/gp_root_* and write only through the effect door (include/gpuprov/context.h)")
	f = called(code, "gp_run|gp_run_install_stop_handlers|fork|vfork|clone|execl|execlp|execle|execv|execvp|execvpe|execve|fexecve|posix_spawn|posix_spawnp")
	if (f != "")
		report("a stage calls " f ": stages run commands only through gp_ctx_run_readonly or the effect door (include/gpuprov/context.h)")
	f = called(code, "fopen|fdopen|freopen")
	if (f != "")
		report("a stage calls " f ": stages read files of the target through gp_ctx_read (include/gpuprov/context.h)")
	if (match(code, /(^|[^A-Za-z0-9_])dry_run([^A-Za-z0-9_]|$)/))
		report("a stage reads dry_run: the effect door knows the mode (plan, apply, verify); a stage asks it, never the flag")
}
END { exit bad }
' $files
