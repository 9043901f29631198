/*
 * test_fdpass.c - descriptors handed between processes (src/lib/fdpass.c).
 *
 *   - bad_names_einval: no name, an empty one, one too long;
 *   - nobody_serves_econnrefused;
 *   - name_in_use_eaddrinuse, and free again once the server stopped;
 *   - descriptor_shares_the_description_and_its_lock: a child opens a
 *     file, takes an OFD write lock on it and serves its descriptor; the
 *     parent's descriptor from the server is of the same description (it
 *     may take the lock the child holds, a descriptor of its own may
 *     not), unknown keys get ENOENT, and the lock outlives the child
 *     while the parent keeps the descriptor, and goes with it;
 *   - server_answers_in_turn: many requests, answers by key and
 *     generation, descriptors closed by the server after sending (no
 *     descriptor leaks in the serving process);
 *   - silent_client_does_not_hold_the_server: a client that connects and
 *     says nothing delays the next one by at most the server's timeout;
 *   - other_user_gets_eacces (as root): a process of another user is
 *     refused;
 *   - squatter_of_another_user_is_not_trusted (as root): a server of
 *     another user on the name gets no request through (EACCES);
 *   - answer_with_two_descriptors_is_refused: a server that sends two
 *     descriptors gets EPROTO and both are closed;
 *   - fork_child_does_not_keep_the_name: after fork(), the parent's stop
 *     frees the name though the child lives on.
 */
#include "testutil.h"

#include "lib/fdpass.h"

#include <pthread.h>

#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

static const char *dir;

static void fdpass_setup(void)
{
	tu_exit_guard();
	dir = test_dir("fdpass");
}

static void fdpass_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(fdpass_setup, fdpass_teardown)

/* A name of this test process's own. */
static const char *test_name(const char *what)
{
	static char name[FDPASS_NAME_MAX + 1];
	snprintf(name, sizeof(name), "pagecache-test-fdpass-%d-%s", (int)getpid(), what);
	return name;
}

static int lookup_none(void *arg, uint64_t key, uint64_t gen)
{
	(void)arg, (void)key, (void)gen;
	return -ENOENT;
}

TEST_CASE(bad_names_einval)
{
	struct pc_fdpass_server *s;
	char long_name[FDPASS_NAME_MAX + 2];
	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	CHECK(fdpass_serve(NULL, lookup_none, NULL, &s) == -EINVAL);
	CHECK(fdpass_serve("", lookup_none, NULL, &s) == -EINVAL);
	CHECK(fdpass_serve(long_name, lookup_none, NULL, &s) == -EINVAL);
	CHECK(fdpass_request(NULL, 1, 1, 100) == -EINVAL);
	CHECK(fdpass_request("", 1, 1, 100) == -EINVAL);
	CHECK(fdpass_request(long_name, 1, 1, 100) == -EINVAL);
	CHECK(fdpass_request("pagecache-test-fdpass-zero", 1, 1, 0) == -EINVAL); /* no timeout */
}

TEST_CASE(nobody_serves_econnrefused)
{
	CHECK(fdpass_request(test_name("nobody"), 1, 1, 1000) == -ECONNREFUSED);
}

TEST_CASE(name_in_use_eaddrinuse)
{
	struct pc_fdpass_server *a, *b;
	const char *name = test_name("inuse");
	REQUIRE(fdpass_serve(name, lookup_none, NULL, &a) == 0);
	CHECK(fdpass_serve(name, lookup_none, NULL, &b) == -EADDRINUSE);
	CHECK(fdpass_request(name, 1, 1, 1000) == -ENOENT);
	fdpass_stop(a);
	CHECK(fdpass_request(name, 1, 1, 1000) == -ECONNREFUSED);
	REQUIRE(fdpass_serve(name, lookup_none, NULL, &b) == 0);
	fdpass_stop(b);
}

static int ofd_wrlock(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

struct one_fd {
	int fd;
	uint64_t key, gen;
};

static int lookup_one(void *arg, uint64_t key, uint64_t gen)
{
	struct one_fd *o = arg;
	if (key != o->key || gen != o->gen)
		return -ENOENT;
	int fd = dup(o->fd);
	return fd >= 0 ? fd : -errno;
}

/* A server on test_name(what) handing out /dev/null for (1, 1); *o must
 * outlive it. */
static struct pc_fdpass_server *serve_dev_null(struct one_fd *o, const char *what, const char **name)
{
	*o = (struct one_fd){ open("/dev/null", O_RDONLY), 1, 1 };
	REQUIRE(o->fd >= 0);
	*name = test_name(what);
	struct pc_fdpass_server *s;
	REQUIRE(fdpass_serve(*name, lookup_one, o, &s) == 0);
	return s;
}

/* The abstract address of name, as fdpass.c makes it: its length. */
static socklen_t abstract_addr_of(const char *name, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, name, strlen(name));
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
}

TEST_CASE(descriptor_shares_the_description_and_its_lock)
{
	char path[4200];
	test_path(path, sizeof(path), dir, "locked");
	const char *name = test_name("lock");
	int go[2], done[2];
	REQUIRE(pipe(go) == 0 && pipe(done) == 0);
	pid_t pid = tu_fork_alone(30);
	if (pid == 0) {
		struct one_fd o = { open(path, O_RDWR | O_CREAT, 0600), 7, 3 };
		struct pc_fdpass_server *s;
		if (o.fd < 0 || ofd_wrlock(o.fd) != 0 || fdpass_serve(name, lookup_one, &o, &s) != 0)
			exit(2);
		char c = 1;
		REQUIRE(write(go[1], &c, 1) == 1);
		REQUIRE(read(done[0], &c, 1) == 1); /* until the parent is done */
		fdpass_stop(s);
		exit(0);
	}
	char c;
	REQUIRE(read(go[0], &c, 1) == 1);
	int fd = fdpass_request(name, 7, 3, 5000);
	REQUIRE(fd >= 0);
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	CHECK(fdpass_request(name, 7, 4, 5000) == -ENOENT); /* another generation */
	CHECK(fdpass_request(name, 8, 3, 5000) == -ENOENT);
	/* The same description: its lock is ours too. */
	CHECK(ofd_wrlock(fd) == 0);
	int own = open(path, O_RDWR);
	REQUIRE(own >= 0);
	CHECK(ofd_wrlock(own) == -EAGAIN);
	/* The child goes; the lock stays with the description we hold. */
	REQUIRE(write(done[1], &c, 1) == 1);
	CHECK(tu_wait_child(pid, 40) == 0);
	CHECK(ofd_wrlock(own) == -EAGAIN);
	close(fd);
	CHECK(ofd_wrlock(own) == 0);
	close(own);
	close(go[0]), close(go[1]), close(done[0]), close(done[1]);
}

/* Descriptors open in this process now. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	REQUIRE(d);
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

TEST_CASE(server_answers_in_turn)
{
	char path[4200];
	test_path(path, sizeof(path), dir, "many");
	struct one_fd o = { open(path, O_RDWR | O_CREAT, 0600), 42, 9 };
	REQUIRE(o.fd >= 0);
	const char *name = test_name("many");
	struct pc_fdpass_server *s;
	REQUIRE(fdpass_serve(name, lookup_one, &o, &s) == 0);
	int before = open_fds();
	int good = 0, refused = 0;
	for (int i = 0; i < 200; i++) {
		int fd = fdpass_request(name, 42, 9, 5000);
		struct stat a, b;
		if (fd >= 0 && fstat(fd, &a) == 0 && fstat(o.fd, &b) == 0 && a.st_ino == b.st_ino)
			good++;
		if (fd >= 0)
			close(fd);
		refused += fdpass_request(name, 42, 10, 5000) == -ENOENT;
	}
	CHECK(good == 200);
	CHECK(refused == 200);
	/* The server closed what it sent (the last one just after sending:
	 * the client may have its answer first). */
	CHECK(TU_POLL(open_fds() == before, 5000));
	fdpass_stop(s);
	close(o.fd);
}

TEST_CASE(silent_client_does_not_hold_the_server)
{
	struct one_fd o;
	const char *name;
	struct pc_fdpass_server *s = serve_dev_null(&o, "silent", &name);
	struct sockaddr_un sa;
	socklen_t len = abstract_addr_of(name, &sa);
	int silent = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	REQUIRE(silent >= 0);
	REQUIRE(connect(silent, (struct sockaddr *)&sa, len) == 0);
	/* The server gives up on the silent one after its timeout (1 s). */
	uint64_t t0 = tu_now_ms();
	int fd = fdpass_request(name, 1, 1, 10000);
	CHECK(fd >= 0);
	CHECK(tu_now_ms() - t0 < 8000);
	if (fd >= 0)
		close(fd);
	close(silent);
	fdpass_stop(s);
	close(o.fd);
}

TEST_CASE(other_user_gets_eacces)
{
	if (geteuid() != 0)
		TEST_SKIP_UNSUPPORTED("needs root to run a process as another user");
	struct one_fd o = { open("/dev/null", O_RDONLY), 1, 1 };
	REQUIRE(o.fd >= 0);
	const char *name = test_name("user");
	pid_t pid = tu_fork_alone(30);
	if (pid == 0) {
		/* The child asks as nobody; the parent serves (after the fork:
		 * tu_fork_alone wants no thread here). */
		if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
			exit(2);
		int r = -ECONNREFUSED;
		for (int i = 0; i < 500 && r == -ECONNREFUSED; i++) {
			r = fdpass_request(name, 1, 1, 5000);
			if (r == -ECONNREFUSED)
				usleep(10000);
		}
		exit(r == -EACCES ? 0 : 3);
	}
	struct pc_fdpass_server *s;
	REQUIRE(fdpass_serve(name, lookup_one, &o, &s) == 0);
	CHECK(tu_wait_child(pid, 40) == 0);
	/* The same request from this process's user is answered. */
	int fd = fdpass_request(name, 1, 1, 5000);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	fdpass_stop(s);
	close(o.fd);
}

TEST_CASE(squatter_of_another_user_is_not_trusted)
{
	if (geteuid() != 0)
		TEST_SKIP_UNSUPPORTED("needs root to run a process as another user");
	const char *name = test_name("squat");
	int go[2], done[2];
	REQUIRE(pipe(go) == 0 && pipe(done) == 0);
	pid_t pid = tu_fork_alone(30);
	if (pid == 0) {
		struct one_fd o = { open("/dev/null", O_RDONLY), 1, 1 };
		struct pc_fdpass_server *s;
		if (o.fd < 0 || setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0 ||
		    fdpass_serve(name, lookup_one, &o, &s) != 0)
			exit(2);
		char c = 1;
		REQUIRE(write(go[1], &c, 1) == 1);
		REQUIRE(read(done[0], &c, 1) == 1);
		fdpass_stop(s);
		exit(0);
	}
	char c;
	REQUIRE(read(go[0], &c, 1) == 1);
	int before = open_fds();
	CHECK(fdpass_request(name, 1, 1, 5000) == -EACCES);
	CHECK(open_fds() == before);
	REQUIRE(write(done[1], &c, 1) == 1);
	CHECK(tu_wait_child(pid, 40) == 0);
	close(go[0]), close(go[1]), close(done[0]), close(done[1]);
}

/* A server of our own that answers "here it is" with two descriptors. */
struct two_fd_server {
	int sock;
	pthread_t thread;
};

static void *two_fd_main(void *arg)
{
	struct two_fd_server *t = arg;
	int conn = accept4(t->sock, NULL, NULL, SOCK_CLOEXEC);
	if (conn < 0)
		return NULL;
	char rq[64];
	(void)!recv(conn, rq, sizeof(rq), 0);
	struct { uint32_t magic; int32_t err; } a = { 0x70636664u, 0 };
	int fds[2] = { open("/dev/null", O_RDONLY), open("/dev/null", O_RDONLY) };
	struct iovec iov = { &a, sizeof(a) };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(2 * sizeof(int));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	(void)!sendmsg(conn, &msg, MSG_NOSIGNAL);
	close(fds[0]);
	close(fds[1]);
	close(conn);
	return NULL;
}

TEST_CASE(answer_with_two_descriptors_is_refused)
{
	const char *name = test_name("two");
	struct sockaddr_un sa;
	socklen_t len = abstract_addr_of(name, &sa);
	struct two_fd_server t = { .sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0) };
	REQUIRE(t.sock >= 0);
	REQUIRE(bind(t.sock, (struct sockaddr *)&sa, len) == 0);
	REQUIRE(listen(t.sock, 4) == 0);
	REQUIRE(pthread_create(&t.thread, NULL, two_fd_main, &t) == 0);
	int before = open_fds();
	CHECK(fdpass_request(name, 1, 1, 5000) == -EPROTO);
	REQUIRE(pthread_join(t.thread, NULL) == 0);
	CHECK(open_fds() == before); /* neither descriptor stayed here */
	close(t.sock);
}

TEST_CASE(fork_child_does_not_keep_the_name)
{
	struct one_fd o;
	const char *name;
	struct pc_fdpass_server *s = serve_dev_null(&o, "fork", &name);
	int done[2], ready[2];
	REQUIRE(pipe(done) == 0 && pipe(ready) == 0);
	pid_t pid = tu_fork(30);
	if (pid == 0) {
		/* The atfork handler ran before fork() returned here. */
		char c = 1;
		fdpass_stop(s); /* the inherited copy: freed, nothing joined */
		if (write(ready[1], &c, 1) != 1)
			_exit(3);
		_exit(read(done[0], &c, 1) == 1 ? 0 : 2);
	}
	char c;
	REQUIRE(read(ready[0], &c, 1) == 1);
	fdpass_stop(s);
	CHECK(fdpass_request(name, 1, 1, 2000) == -ECONNREFUSED);
	REQUIRE(fdpass_serve(name, lookup_one, &o, &s) == 0); /* the name is free */
	fdpass_stop(s);
	REQUIRE(write(done[1], &c, 1) == 1);
	CHECK(tu_wait_child(pid, 40) == 0);
	close(done[0]), close(done[1]), close(ready[0]), close(ready[1]);
	close(o.fd);
}

