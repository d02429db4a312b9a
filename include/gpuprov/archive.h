/* Safe tarball extraction into a directory inside the target root. The
 * input is a byte stream (a read callback, so a download can feed it as it
 * arrives, or an fd or file); its sha256 is computed while it is read and
 * must match before anything appears at the destination. Entries are written
 * into a staging directory beside the destination and renamed into place
 * only after the whole input was read and hashed. Never prints: functions
 * return 0 or a negative code and fill res->msg. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpuprov/root.h"

/* Failure codes beyond the errno range; functions return their negation.
 * Any other negative value is a -errno (I/O, ENOSPC, the read callback's). */
enum {
	GP_ARCHIVE_EFORMAT = 4200, /* not a tar, or not compressed with xz/gzip/zstd */
	GP_ARCHIVE_ECORRUPT, /* truncated or corrupt compressed data or tar headers */
	GP_ARCHIVE_EUNSAFE, /* an entry was refused (path, link target, type, mode) */
	GP_ARCHIVE_ELAYOUT, /* GP_ARCHIVE_STRIP_TOP: no single top folder */
	GP_ARCHIVE_EHASH, /* the sha256 of the input is not the expected one */
	GP_ARCHIVE_ETOOBIG, /* more file data than opts->max_bytes */
	GP_ARCHIVE_EDEST, /* the destination path is a symlink, a file, or invalid */
};

enum {
	/* Drop the archive's single top-level folder ("cudnn-...-archive/lib/x"
	 * becomes "lib/x"; hardlink targets too). The first entry names the
	 * folder; an entry outside it is GP_ARCHIVE_ELAYOUT. */
	GP_ARCHIVE_STRIP_TOP = 1u << 0,
	/* Apply the archive's mtimes to files and symlinks (directories get the
	 * extraction time: later entries would change them anyway). */
	GP_ARCHIVE_KEEP_MTIME = 1u << 1,
	/* gp_archive_extract_fd/_file: skip the hash-only pass described there. */
	GP_ARCHIVE_NO_PREVERIFY = 1u << 2,
	/* With xz_threads > 1: decode the blocks in parallel with liblzma's
	 * single-threaded block decoder in threads of ours (src/sys/xzpar.c),
	 * as automatic threads do on unverified input, instead of liblzma's
	 * threaded decoder. */
	GP_ARCHIVE_XZ_BLOCKS = 1u << 3,
};

struct gp_archive_opts {
	/* 64 hex digits (either case) the sha256 of the whole input must equal.
	 * NULL: not checked (only for input the operator marked as trusted); the
	 * hash is still computed and returned. */
	const char *sha256;
	unsigned flags; /* GP_ARCHIVE_* above */
	/* Threads for the xz decoder. 0: automatic, see gp_archive_extract;
	 * 1: single-threaded; N > 1: liblzma's multithreaded decoder with up to
	 * N (at most 16) threads, for callers that know their liblzma has the
	 * CVE-2025-31115 fix (Debian 12: 5.4.1-1 from bookworm-security on). */
	unsigned xz_threads;
	/* Memory the multithreaded xz decoder may use (it runs fewer threads,
	 * down to one, to stay under it); 0: 48 MiB. Each thread holds a whole
	 * block in and out: 3 MiB blocks (xz -T0 -1) run many threads within
	 * the default, 24 MiB blocks (xz -T0 -6) need about 100 MiB for two.
	 * An xz file needing more than 256 MiB even on one thread (a dictionary
	 * beyond xz -9's 64 MiB) is refused as GP_ARCHIVE_ECORRUPT. */
	uint64_t xz_mem_limit;
	/* Refuse archives whose regular files hold more than this many bytes in
	 * total (a decompression bomb filling the disk); 0: no limit. */
	uint64_t max_bytes;
	/* Called for each regular file written, with its path relative to dest
	 * and the sha256 of its content, hashed as it was written (so a caller
	 * that records hashes need not read the files again); sha256 is NULL
	 * for a hardlink (a second name of an earlier file). Called during the
	 * extraction: the files are final only once it succeeded, and a later
	 * entry may replace one. NULL: not called. */
	void (*on_file)(void *data, const char *rel, const char *sha256);
	void *on_file_data;
};

struct gp_archive_result {
	char sha256[65]; /* of the whole input, once it was read to the end; else "" */
	uint64_t in_bytes; /* input bytes read (all of them on success) */
	uint64_t out_bytes; /* bytes of regular file data written */
	uint64_t entries; /* archive entries processed */
	char top[256]; /* GP_ARCHIVE_STRIP_TOP: the folder that was stripped */
	const char *filter; /* "xz", "gzip", "zstd" or "none"; NULL before detection */
	/* xz: the threads liblzma's decoder was given (1: single-threaded);
	 * 0 when not xz, or when libarchive decoded it (liblzma not loadable). */
	unsigned xz_threads;
	/* xz: the blocks were decoded in parallel by our own decoder
	 * (xzpar.h), which held at most xz_block_bytes of block buffers. */
	bool xz_blocks;
	uint64_t xz_block_bytes;
	bool replaced; /* an existing destination was replaced */
	/* The old destination could not be removed after the swap: it is left
	 * here (in-root path) for the caller to report; the extraction succeeded. */
	char leftover[512];
	/* On failure: what failed and where, e.g. "lib/x: symlink target
	 * '/etc/passwd' is absolute". Without a trailing newline. */
	char msg[1024];
};

/* The input: copies up to len bytes into buf and returns how many (> 0), 0 at
 * the end of the input, or a negative errno (returned as is). Called only
 * from the thread that called gp_archive_extract. A downloader streams into
 * the extraction by making this drive its transfer until bytes are ready. */
typedef ssize_t (*gp_archive_read_fn)(void *userdata, void *buf, size_t len);

/* Extracts the tar archive read from `read` into dest, an absolute path
 * inside root without "." or ".." components ("/usr/local/cuda-12.4/cudnn";
 * a trailing slash is fine). Formats: tar (ustar, pax, GNU) uncompressed or
 * compressed with xz, gzip or zstd; nothing else is enabled, and a
 * compression inside another one is refused (GP_ARCHIVE_EFORMAT). Bytes
 * after the end of the archive are hashed and otherwise ignored, except
 * after a zstd stream: libarchive's zstd reader takes them for a broken
 * frame (GP_ARCHIVE_ECORRUPT), as its xz reader would if liblzma could not
 * be loaded (xz is decoded by liblzma directly, one stream).
 *
 * The destination: its parent is resolved inside the root (symlinks on the
 * way, such as /usr/local/cuda -> cuda-12.4, are followed without leaving the
 * root) and created (0755) when missing. dest itself must be absent or a
 * directory; a symlink or file there is GP_ARCHIVE_EDEST. Entries go into a
 * staging directory ".<name>.gpuprov-staging.<pid>.<n>" in that parent (same
 * filesystem). After the last entry the rest of the input is read so that
 * the hash covers all of it (trailing bytes included), then the hash is
 * compared. Only then: syncfs, and the staging directory replaces dest:
 * atomically with renameat2(RENAME_EXCHANGE) when dest exists (the old tree
 * ends up under the staging name and is then removed), or with
 * RENAME_NOREPLACE when it does not. Where the filesystem lacks those flags
 * the old dest is renamed aside first (".<name>.gpuprov-old.<pid>.<n>"), so
 * dest is briefly absent. On any failure the staging directory is removed
 * and dest is untouched. Leftovers of a killed run (staging or old names of
 * dest whose pid is not running) are removed first.
 *
 * Entries: paths are normalised ("./a//b" is "a/b"); absolute paths, ".."
 * components, device nodes, FIFOs, sockets, setuid/setgid/sticky bits, a
 * path through a symlink the archive made, and symlinks with an absolute
 * target or one that leaves dest are refused (GP_ARCHIVE_EUNSAFE) and the
 * whole extraction fails. A symlink target may start with "../" only as far
 * as the link's depth inside dest allows and may not use ".." after a name
 * ("a/../b"): with links inside the archive such a target could leave dest
 * at run time even when it stays inside when read as text. Hardlink targets
 * are normalised and stripped like paths and must name a regular file
 * already extracted (a second name for a symlink would move its target to
 * another depth). Files and directories are owned by the calling user (the
 * archive's owners, ACLs and xattrs are ignored); modes are the archive's
 * masked with 0755 (group/other write dropped), directories always u+rwx.
 * A later entry with the same path replaces an earlier file or link.
 *
 * Memory is bounded by the decoder's window and fixed buffers, whatever the
 * archive size (about 20 MiB for a 64 MiB archive from xz -T2 -1 on two
 * threads). xz is decoded in a thread of its own (liblzma's threads, if
 * any, below it), pipelined through 2.5 MiB of chunk rings with the tar
 * parsing, writes and hashing in the caller's thread; the read callback is
 * still only called from the caller's thread. xz_threads == 0 runs liblzma's multithreaded decoder on every
 * CPU we may use (when liblzma >= 5.4 is installed and <lzma.h> was there
 * at build time) if the input was hashed before decoding (see
 * gp_archive_extract_fd) or liblzma is >= 5.8.1; otherwise, with several
 * CPUs, our own block-parallel decoder (xzpar.h: liblzma's single-threaded
 * block decoder in one worker per CPU, memory growing with the CPUs times
 * the block size, see there), as GP_ARCHIVE_XZ_BLOCKS asks for explicitly.
 * Threads only help xz files with several blocks that record their sizes
 * (xz -T); others decode on one thread either way.
 *
 * opts may be NULL (no hash check, no strip). res is output only and always
 * reset. Returns 0 or a negative code (see above). */
int gp_archive_extract(const struct gp_root *root, const char *dest,
                       gp_archive_read_fn read, void *userdata,
                       const struct gp_archive_opts *opts, struct gp_archive_result *res);

/* The same from an open fd, read from its current offset. When fd is a
 * regular file and opts->sha256 is set (unless GP_ARCHIVE_NO_PREVERIFY), the
 * whole file is hashed first and a mismatch fails before any parsing or any
 * change on disk, so unverified bytes never reach libarchive or liblzma; the
 * extraction pass hashes again (the file could change in between). */
int gp_archive_extract_fd(const struct gp_root *root, const char *dest, int fd,
                          const struct gp_archive_opts *opts,
                          struct gp_archive_result *res);
/* The same from a file named by a host path (the download cache). */
int gp_archive_extract_file(const struct gp_root *root, const char *dest,
                            const char *path, const struct gp_archive_opts *opts,
                            struct gp_archive_result *res);

/* The checks on each entry's names, as the extraction makes them: an entry
 * path or hardlink target normalised ("./a//b/./c/" is "a/b/c", "" the
 * archive's root), or NULL with *why set when it is absolute or has a ".."
 * component; and NULL when a symlink at rel (normalised) may point to
 * target, else why not (see the rules above). */
char *gp_archive_norm_path(const char *p, const char **why);
const char *gp_archive_symlink_check(const char *rel, const char *target);

/* A short description of a code from the functions above ("unsafe archive
 * entry", or strerror for -errno). */
const char *gp_archive_strerror(int rc);
