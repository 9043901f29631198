/*
 * fdpass.h - handing descriptors from one process to another (fdpass.c):
 * a process serves its descriptors on an abstract Unix socket, and another
 * process of the same user asks for one by a key and gets a descriptor
 * of the same open file description (SCM_RIGHTS).
 *
 * Why (docs/shared.md, section 17): a record lock on a file held by an
 * open file description is held by every process that has a descriptor
 * of that description, so the processes of a shared cache that share one
 * description of a file share its exclusive lock against every other
 * cache, and a process can write back a file it never opened.  This file
 * knows nothing of caches: keys and generations are the caller's.
 *
 * The protocol: one request per connection, on a SOCK_SEQPACKET socket
 * (message boundaries, and a peer that dies is seen at once).  The client
 * sends {magic, key, gen}; the server checks the client's credentials
 * (SO_PEERCRED: the same effective user, else EACCES), asks its lookup
 * for a descriptor, and answers {0} with the descriptor attached, or
 * {-errno} with none.  The server is one thread that answers in turn;
 * its lookup must not wait for anything a client may hold.
 *
 * Names are abstract (no file, gone with the socket): "pagecache-..." by
 * convention, at most FDPASS_NAME_MAX bytes.  Abstract sockets belong to
 * the network namespace, so processes of one cache must share one.
 */
#ifndef PC_FDPASS_H
#define PC_FDPASS_H

#include "lib/util.h"

#define FDPASS_NAME_MAX 100

struct pc_fdpass_server;

/* The server's answer for (key, gen): a new descriptor, which the server
 * sends and then closes, or a negative errno for the client (-ENOENT:
 * none here). */
typedef int (*fdpass_lookup_fn)(void *arg, uint64_t key, uint64_t gen);

/* Serve on `name` from a thread of this process: 0, -EADDRINUSE (the name
 * is taken), -EINVAL (name empty or too long), or another negative errno.
 * The server belongs to this process: in a child of fork() it is an
 * inherited copy whose sockets the child closes as it starts (the name
 * stays the parent's; until the child has run, a client may reach its
 * copy and see the connection reset); fdpass_stop only frees such a
 * copy. */
HIDDEN int fdpass_serve(const char *name, fdpass_lookup_fn lookup, void *arg, struct pc_fdpass_server **out);
/* Stop serving (the name is free when this returns) and free s. */
HIDDEN void fdpass_stop(struct pc_fdpass_server *s);

/* Ask the server on `name` for its descriptor of (key, gen), waiting at
 * most timeout_ms (at least 1) in all: a new descriptor (close-on-exec),
 * or -EINVAL (bad name, timeout 0), -ECONNREFUSED (nobody serves the
 * name), -EACCES (the server is another user's: nothing taken from it),
 * -ETIMEDOUT, -EPROTO (a garbled answer, or more than one descriptor:
 * all closed), -EMFILE (no room here for the descriptor), or the
 * server's -errno. */
HIDDEN int fdpass_request(const char *name, uint64_t key, uint64_t gen, unsigned timeout_ms);

#endif
