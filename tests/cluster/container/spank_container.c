/*
 * The test cluster's one stand-in: a SPANK plugin that accepts pyxis's srun options and runs
 * the task on the host, in a container-like root of its own, because pyxis and enroot cannot
 * run on this machine.
 *
 * What a task with --container-image=IMAGE gets:
 *   - a private mount namespace whose root is a tmpfs holding bind mounts of the host's
 *     top-level directories (the host's filesystem plays the image's), a fresh /tmp of its own
 *     (as in a container), and every SRC:DST[:FLAGS] of --container-mounts bound at DST
 *     (flags "ro" and "rw"; mount points are made inside the tmpfs root, never on the host);
 *   - the image's files: a local image is a file NAME.sqsh, as for pyxis, but the stand-in cannot
 *     mount squashfs, so it takes the directory NAME beside the file as the image (a prefix such
 *     as a venv) and puts NAME/bin first on PATH, so that `python3` is the image's. A local path
 *     with no such pair fails as pyxis's filesystem creation would; a docker URI cannot be
 *     imported without the internet and fails as pyxis's import would, in pyxis's words;
 *   - the working directory of the srun, or --container-workdir.
 * Other pyxis options are accepted and have no effect here. Tasks without --container-image are
 * left alone. Messages use pyxis's texts where pyxis has one for the same case.
 *
 * A job can see the cluster as a site without pyxis: with SRT_CLUSTER_NO_CONTAINERS=1 in its
 * environment (e.g. `#SBATCH --export=ALL,SRT_CLUSTER_NO_CONTAINERS=1`), srun registers none
 * of the options and refuses them as it would there ("srun: unrecognized option ...").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <dirent.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(container_standin, 1);

/* Where each task's root is mounted, in its own namespace: one fixed path, never populated on
 * the host. The root's own /run then shows it again at this path; that view is detached. */
#define ROOT "/run/srt-container"
#define MAX_MOUNTS 64

static char *image;
static char *image_dir; /* the directory standing for the image's files */
static char *mounts_arg;
static char *workdir;

static int opt_image(int val, const char *optarg, int remote)
{
	(void)val; (void)remote;
	free(image);
	image = optarg ? strdup(optarg) : NULL;
	return 0;
}

static int opt_mounts(int val, const char *optarg, int remote)
{
	(void)val; (void)remote;
	if (!optarg)
		return 0;
	if (mounts_arg) {
		char *joined;
		if (asprintf(&joined, "%s,%s", mounts_arg, optarg) < 0)
			return -1;
		free(mounts_arg);
		mounts_arg = joined;
	} else {
		mounts_arg = strdup(optarg);
	}
	return 0;
}

static int opt_workdir(int val, const char *optarg, int remote)
{
	(void)val; (void)remote;
	free(workdir);
	workdir = optarg ? strdup(optarg) : NULL;
	return 0;
}

static int opt_ignored(int val, const char *optarg, int remote)
{
	(void)val; (void)optarg; (void)remote;
	return 0;
}

static struct spank_option options[] = {
	{"container-image", "IMAGE", "[container stand-in] the image: NAME.sqsh beside a directory NAME", 1, 0, opt_image},
	{"container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "[container stand-in] bind mounts", 1, 0, opt_mounts},
	{"container-workdir", "PATH", "[container stand-in] working directory", 1, 0, opt_workdir},
	{"container-name", "NAME", "[container stand-in] accepted, no effect", 1, 0, opt_ignored},
	{"container-save", "PATH", "[container stand-in] accepted, no effect", 1, 0, opt_ignored},
	{"container-mount-home", NULL, "[container stand-in] accepted, no effect", 0, 1, opt_ignored},
	{"no-container-mount-home", NULL, "[container stand-in] accepted, no effect", 0, 0, opt_ignored},
	{"container-remap-root", NULL, "[container stand-in] accepted, no effect", 0, 1, opt_ignored},
	{"no-container-remap-root", NULL, "[container stand-in] accepted, no effect", 0, 0, opt_ignored},
	{"container-entrypoint", NULL, "[container stand-in] accepted, no effect", 0, 1, opt_ignored},
	{"no-container-entrypoint", NULL, "[container stand-in] accepted, no effect", 0, 0, opt_ignored},
	{"container-entrypoint-log", NULL, "[container stand-in] accepted, no effect", 0, 1, opt_ignored},
	{"container-writable", NULL, "[container stand-in] accepted, no effect", 0, 1, opt_ignored},
	{"container-readonly", NULL, "[container stand-in] accepted, no effect", 0, 0, opt_ignored},
	{"container-env", "NAME[,NAME...]", "[container stand-in] accepted, no effect", 1, 0, opt_ignored},
	{"container-unshare", "NS[,NS...]", "[container stand-in] accepted, no effect", 1, 1, opt_ignored},
	SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)ac; (void)av;
	if (spank_context() == S_CTX_LOCAL && getenv("SRT_CLUSTER_NO_CONTAINERS"))
		return 0;
	for (struct spank_option *o = options; o->name; ++o) {
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error("container stand-in: cannot register --%s", o->name);
			return -1;
		}
	}
	return 0;
}

static int is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The image is checked where pyxis imports it (user_init), so a bad one fails the step the same way. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	(void)ac; (void)av;
	if (!image || !spank_remote(sp))
		return 0;
	if (image[0] != '/' && strncmp(image, "./", 2) != 0) {
		slurm_spank_log("pyxis: importing docker image: %s", image);
		slurm_error("pyxis: failed to import docker image: %s", image);
		return -1;
	}
	size_t n = strlen(image);
	if (n > 5 && !strcmp(image + n - 5, ".sqsh") && is_file(image)) {
		image_dir = strndup(image, n - 5);
		if (image_dir && is_dir(image_dir))
			return 0;
	}
	slurm_info("pyxis: creating container filesystem: %s", image);
	slurm_error("pyxis: failed to create container filesystem for image: %s", image);
	return -1;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -1;
	for (char *p = buf + 1; *p; ++p) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* A mount point for SRC at DST inside the new root: a directory, or an empty file for a file. */
static int make_target(const char *src, const char *dst)
{
	struct stat st;
	if (stat(src, &st) < 0)
		return -1;
	if (S_ISDIR(st.st_mode))
		return mkdir_p(dst, 0755);
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", dst);
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		if (mkdir_p(parent, 0755) < 0)
			return -1;
	}
	int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0 && errno != EEXIST && errno != EISDIR)
		return -1;
	if (fd >= 0)
		close(fd);
	return 0;
}

static int bind(const char *src, const char *dst, int readonly)
{
	if (make_target(src, dst) < 0) {
		slurm_error("container stand-in: cannot make mount point %s: %s", dst, strerror(errno));
		return -1;
	}
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0) {
		slurm_error("container stand-in: cannot bind %s on %s: %s", src, dst, strerror(errno));
		return -1;
	}
	if (readonly && mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0) {
		slurm_error("container stand-in: cannot make %s read-only: %s", dst, strerror(errno));
		return -1;
	}
	return 0;
}

/* The host's top-level entries, bound (or re-linked) into the new root; /tmp is the container's own. */
static int populate_root(const char *root)
{
	DIR *d = opendir("/");
	if (!d) {
		slurm_error("container stand-in: cannot list /: %s", strerror(errno));
		return -1;
	}
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "tmp"))
			continue;
		char src[PATH_MAX], dst[PATH_MAX], link[PATH_MAX];
		snprintf(src, sizeof(src), "/%s", e->d_name);
		snprintf(dst, sizeof(dst), "%s/%s", root, e->d_name);
		struct stat st;
		if (lstat(src, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(src, link, sizeof(link) - 1);
			if (n < 0)
				continue;
			link[n] = '\0';
			if (symlink(link, dst) < 0)
				rc = -1;
		} else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
			rc = bind(src, dst, 0);
		}
	}
	closedir(d);
	if (rc == 0) {
		char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s/tmp", root);
		if (mkdir(tmp, 01777) < 0 || mount("tmpfs", tmp, "tmpfs", 0, "mode=1777") < 0) {
			slurm_error("container stand-in: cannot make /tmp: %s", strerror(errno));
			rc = -1;
		}
	}
	return rc;
}

/* --container-mounts: SRC:DST[:FLAGS], comma-separated; FLAGS joined with '+'. */
static int add_mounts(const char *root)
{
	if (!mounts_arg)
		return 0;
	char *copy = strdup(mounts_arg), *save = NULL;
	int rc = 0;
	for (char *item = strtok_r(copy, ",", &save); item && rc == 0; item = strtok_r(NULL, ",", &save)) {
		char *src = item, *dst = strchr(item, ':'), *flags = NULL;
		if (!dst) {
			dst = src; /* pyxis: a lone path is mounted at the same place */
		} else {
			*dst++ = '\0';
			flags = strchr(dst, ':');
			if (flags)
				*flags++ = '\0';
		}
		struct stat st;
		if (stat(src, &st) < 0) {
			slurm_error("pyxis: --container-mounts: source path does not exist: %s", src);
			rc = -1;
			break;
		}
		char target[PATH_MAX];
		snprintf(target, sizeof(target), "%s%s", root, dst);
		rc = bind(src, target, flags && strstr(flags, "ro") != NULL);
	}
	free(copy);
	return rc;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	(void)ac; (void)av;
	if (!image || !image_dir || !spank_remote(sp))
		return 0;

	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "/");

	if (unshare(CLONE_NEWNS) < 0) {
		slurm_error("container stand-in: unshare(CLONE_NEWNS): %s", strerror(errno));
		return -1;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		slurm_error("container stand-in: cannot make / private: %s", strerror(errno));
		return -1;
	}
	const char *root = ROOT;
	struct stat st;
	if ((mkdir(root, 0755) < 0 && errno != EEXIST) || lstat(root, &st) < 0 || !S_ISDIR(st.st_mode)
	    || st.st_uid != 0 || mount("tmpfs", root, "tmpfs", 0, "mode=0755") < 0) {
		slurm_error("container stand-in: cannot make the root %s: %s", root, strerror(errno));
		return -1;
	}
	if (populate_root(root) < 0 || add_mounts(root) < 0)
		return -1;
	if (chroot(root) < 0) {
		slurm_error("container stand-in: chroot %s: %s", root, strerror(errno));
		return -1;
	}
	umount2(ROOT, MNT_DETACH);
	const char *dir = workdir ? workdir : cwd;
	if (chdir(dir) < 0 && chdir("/") < 0) {
		slurm_error("container stand-in: chdir %s: %s", dir, strerror(errno));
		return -1;
	}

	char path[8192], bin[PATH_MAX];
	if (spank_getenv(sp, "PATH", path, sizeof(path)) != ESPANK_SUCCESS)
		snprintf(path, sizeof(path), "/usr/local/bin:/usr/bin:/bin");
	snprintf(bin, sizeof(bin), "%s/bin", image_dir);
	char *newpath;
	if (asprintf(&newpath, "%s:%s", bin, path) < 0)
		return -1;
	spank_setenv(sp, "PATH", newpath, 1);
	free(newpath);
	return 0;
}
