/* What the cudnn stage's two methods share: the settings read from the
 * profile and the helpers of cudnn.c that method apt (cudnn_apt.c) uses. */
#pragma once

#include <stdbool.h>

#include "gpuprov/pkg.h"

struct gp_check;
struct gp_ctx;
struct gp_report;

struct cudnn_settings {
	const char *method;
	const char *version; /* A.B.C.D */
	char *version3; /* A.B.C */
	char *cuda_major;
	char *url;
	const char *sha256;
	const char *base; /* NULL: no destination known */
	bool base_from_cuda;
	char *dir; /* <base>/cudnn-<version> */
	/* method apt (NVIDIA's repository through the distro's package
	 * manager, apt or dnf): */
	bool apt;
	long major; /* cuDNN's major version: the version's, else 9 */
	char *pkgs[2]; /* library and development package */
	const char *libdir; /* where the packages put the libraries */
	struct gp_pkg_nvidia_repo nv;
};

/* A.B.C of a version A.B.C[.D...]. */
char *cudnn_first3(const char *v);
/* MAJOR.MINOR.PATCHLEVEL from a cudnn_version.h, or NULL. */
char *cudnn_header_version(struct gp_ctx *c, const char *path);
/* cudnn_version.h and cudnn.h present, the version the profile wants. */
void cudnn_verify_headers(struct gp_ctx *c, struct gp_report *rep, const char *hdr,
                          const char *cudnn_h, const char *want, const char *install);
/* Every libcudnn*.so.<major> in listdir is present in linkdir and resolved
 * by the root's linker cache (`ldconfig -p`, chrooted) to a file there. */
void cudnn_verify_sonames(struct gp_ctx *c, struct gp_report *rep, const char *listdir,
                          const char *linkdir, long major, const char *install);
/* The toolkit in tkdir has the CUDA major cuDNN (its header hdr) was
 * built for. */
void cudnn_verify_cuda_major(struct gp_ctx *c, struct gp_report *rep, const char *tkdir,
                             const char *cuda_major, const char *hdr);

/* Method apt (cudnn_apt.c): settings, why it is blocked (NULL: it is not),
 * and the stage's check, apply and verify. */
void cudnn_apt_settings(struct gp_ctx *c, struct cudnn_settings *s);
char *cudnn_apt_blocked_reason(struct gp_ctx *c, const struct cudnn_settings *s);
int cudnn_apt_check(struct gp_ctx *c, const struct cudnn_settings *s,
                    struct gp_check *ck);
int cudnn_apt_apply(struct gp_ctx *c, const struct cudnn_settings *s);
int cudnn_apt_verify(struct gp_ctx *c, const struct cudnn_settings *s,
                     struct gp_report *rep);
