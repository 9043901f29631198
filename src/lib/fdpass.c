/*
 * fdpass.c - descriptors handed between processes over abstract Unix
 * sockets (fdpass.h has the protocol and why).
 *
 * The server is a thread polling the listening socket and an eventfd:
 * fdpass_stop writes the eventfd, so the thread ends without a signal
 * or a cancellation, and joins it.  A client that connects and then says
 * nothing must not hold the server: each accepted connection gets a
 * receive timeout (SERVE_TIMEOUT_MS) for its request, and the answer a
 * send timeout; another user's connection is answered EACCES before the
 * server reads anything from it.
 *
 * Abstract names have no permissions: anybody may bind one.  So the
 * client checks the server's credentials too (a squatter of another user
 * gets -EACCES, and its descriptors are never taken), and closes every
 * descriptor of an answer it does not accept.
 *
 * Fork: a child keeps copies of the servers' sockets, which would keep
 * the names bound after the parent stops; an atfork handler closes them
 * in the child, whose servers are then inherited copies (fdpass_stop
 * frees such a copy without a thread to join).
 */
#include "lib/fdpass.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FDPASS_MAGIC 0x70636664u /* "pcfd" */
/* How long the server waits for one client's request, or to answer it. */
#define SERVE_TIMEOUT_MS 1000

struct fdpass_request {
	uint32_t magic;
	uint32_t pad;
	uint64_t key, gen;
};

struct fdpass_answer {
	uint32_t magic;
	int32_t err; /* 0: a descriptor is attached */
};

struct pc_fdpass_server {
	int sock;
	int stop_fd;
	fdpass_lookup_fn lookup;
	void *arg;
	pthread_t thread;
	bool inherited; /* a fork child's copy: sockets closed, no thread */
	struct pc_fdpass_server *next;
};

/* The process's servers, for the fork handler. */
static pthread_mutex_t servers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pc_fdpass_server *servers;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void)
{
	pthread_mutex_lock(&servers_lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&servers_lock);
}

static void atfork_child(void)
{
	for (struct pc_fdpass_server *s = servers; s; s = s->next) {
		close(s->sock);
		close(s->stop_fd);
		s->sock = s->stop_fd = -1;
		s->inherited = true;
	}
	servers = NULL;
	pthread_mutex_unlock(&servers_lock);
}

static void atfork_register(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* The abstract address of `name` (sun_path[0] == 0): its length, or
 * -EINVAL. */
static int abstract_addr(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > FDPASS_NAME_MAX)
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, name, n);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	return 0;
}

static void set_timeouts(int fd, unsigned ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Send the answer: err, and fd attached when err is 0. */
static void send_answer(int conn, int err, int fd)
{
	struct fdpass_answer a = { FDPASS_MAGIC, err };
	struct iovec iov = { &a, sizeof(a) };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (err == 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	(void)sendmsg(conn, &msg, MSG_NOSIGNAL);
}

/* The peer runs as this process's effective user (either side). */
static bool peer_is_same_user(int conn)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	return getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
}

static void serve_one(struct pc_fdpass_server *s, int conn)
{
	set_timeouts(conn, SERVE_TIMEOUT_MS);
	if (!peer_is_same_user(conn)) {
		send_answer(conn, -EACCES, -1);
		return;
	}
	struct fdpass_request rq;
	ssize_t n = recv(conn, &rq, sizeof(rq), MSG_TRUNC);
	if (n != (ssize_t)sizeof(rq) || rq.magic != FDPASS_MAGIC) {
		send_answer(conn, -EPROTO, -1);
		return;
	}
	int fd = s->lookup(s->arg, rq.key, rq.gen);
	send_answer(conn, fd < 0 ? fd : 0, fd);
	if (fd >= 0)
		close(fd);
}

static void *serve_main(void *arg)
{
	struct pc_fdpass_server *s = arg;
	struct pollfd p[2] = { { s->sock, POLLIN, 0 }, { s->stop_fd, POLLIN, 0 } };
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		int conn = accept4(s->sock, NULL, NULL, SOCK_CLOEXEC);
		if (conn < 0) {
			/* No descriptor for it now: the connection stays queued
			 * and poll would return at once; let descriptors go. */
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				struct timespec ms10 = { 0, 10 * 1000 * 1000 };
				nanosleep(&ms10, NULL);
			}
			continue; /* or the client went meanwhile */
		}
		serve_one(s, conn);
		close(conn);
	}
	return NULL;
}

int fdpass_serve(const char *name, fdpass_lookup_fn lookup, void *arg, struct pc_fdpass_server **out)
{
	struct sockaddr_un sa;
	socklen_t len;
	int err = abstract_addr(name, &sa, &len);
	if (err)
		return err;
	struct pc_fdpass_server *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lookup = lookup;
	s->arg = arg;
	s->stop_fd = -1;
	s->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s->sock < 0 || bind(s->sock, (struct sockaddr *)&sa, len) != 0 || listen(s->sock, 64) != 0)
		goto fail;
	s->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (s->stop_fd < 0)
		goto fail;
	pthread_once(&atfork_once, atfork_register);
	pthread_mutex_lock(&servers_lock);
	err = -pthread_create(&s->thread, NULL, serve_main, s);
	if (!err) {
		s->next = servers;
		servers = s;
	}
	pthread_mutex_unlock(&servers_lock);
	if (err)
		goto fail_err;
	*out = s;
	return 0;
fail:
	err = -errno;
fail_err:
	if (s->sock >= 0)
		close(s->sock);
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	free(s);
	return err;
}

void fdpass_stop(struct pc_fdpass_server *s)
{
	if (!s)
		return;
	if (s->inherited) { /* the child's copy: its sockets are closed */
		free(s);
		return;
	}
	pthread_mutex_lock(&servers_lock);
	struct pc_fdpass_server **p = &servers;
	while (*p && *p != s)
		p = &(*p)->next;
	if (*p)
		*p = s->next;
	pthread_mutex_unlock(&servers_lock);
	uint64_t one = 1;
	while (write(s->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	pthread_join(s->thread, NULL);
	close(s->sock);
	close(s->stop_fd);
	free(s);
}

/* The descriptors an answer carried: the first in *fd (-1: none), and
 * every other closed (a server that sends more is not to be trusted with
 * our descriptor table).  How many there were. */
static int take_descriptors(struct msghdr *msg, int *fd)
{
	int n = 0;
	*fd = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*fd < 0)
				*fd = got;
			else
				close(got);
			n++;
		}
	}
	return n;
}

/* The answer on conn: the descriptor, or a negative errno. */
static int receive_answer(int conn)
{
	struct fdpass_answer a;
	struct iovec iov = { &a, sizeof(a) };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} ctl;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC | MSG_TRUNC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
	int fd;
	int nfds = take_descriptors(&msg, &fd);
	if ((msg.msg_flags & MSG_CTRUNC) && nfds == 0 && n == (ssize_t)sizeof(a) && a.err == 0) {
		/* The kernel could not give us the descriptor (our table is
		 * full). */
		return -EMFILE;
	}
	bool ok = n == (ssize_t)sizeof(a) && a.magic == FDPASS_MAGIC && !(msg.msg_flags & MSG_CTRUNC) &&
		  nfds == (a.err == 0) && a.err <= 0;
	if (!ok) {
		if (fd >= 0)
			close(fd);
		return -EPROTO;
	}
	return a.err ? a.err : fd;
}

/* Milliseconds left until `deadline` (now_ms), at least 1. */
static unsigned ms_left(uint64_t deadline)
{
	uint64_t now = now_ms();
	return now + 1 >= deadline ? 1 : (unsigned)(deadline - now);
}

int fdpass_request(const char *name, uint64_t key, uint64_t gen, unsigned timeout_ms)
{
	struct sockaddr_un sa;
	socklen_t len;
	int err = abstract_addr(name, &sa, &len);
	if (err)
		return err;
	if (timeout_ms == 0)
		return -EINVAL;
	uint64_t deadline = now_ms() + timeout_ms;
	int conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (conn < 0)
		return -errno;
	/* The send timeout bounds the connect too (a full backlog). */
	set_timeouts(conn, timeout_ms);
	struct fdpass_request rq = { .magic = FDPASS_MAGIC, .key = key, .gen = gen };
	int r;
	if (connect(conn, (struct sockaddr *)&sa, len) != 0)
		r = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
	else if (!peer_is_same_user(conn))
		r = -EACCES; /* a squatter of another user: take nothing from it */
	else if ((set_timeouts(conn, ms_left(deadline)), send(conn, &rq, sizeof(rq), MSG_NOSIGNAL)) !=
		 (ssize_t)sizeof(rq))
		r = errno == EAGAIN ? -ETIMEDOUT : -errno;
	else {
		set_timeouts(conn, ms_left(deadline));
		r = receive_answer(conn);
	}
	close(conn);
	return r;
}
