/*
 * test_io_probe.c - the questions the I/O layer asks of the backing file
 * system (src/io/probe.c): the direct-I/O alignment, and whether a range
 * is a hole (SEEK_DATA; where the file system cannot tell, "might be
 * data", the safe answer).
 */
#include "io_util.h"

IO_FIXTURE("io_probe")

static bool pow2(unsigned x) { return x && !(x & (x - 1)); }

/* The alignment is a power of two in range, and an I/O with exactly that
 * alignment works; a bad descriptor is EBADF. */
TEST_CASE(dio_align_answer_works)
{
	unsigned oa = 1, ma = 1;
	CHECK(probe_dio_align(fd, &oa, &ma) == 0);
	printf("dio_align: offset %u, memory %u (%s descriptor)\n", oa, ma, direct ? "O_DIRECT" : "buffered");
	if (direct) {
		CHECK(pow2(oa) && oa >= 512 && oa <= 65536);
		CHECK(pow2(ma) && ma <= 65536);
		/* The answer works: an I/O with exactly that alignment. */
		uint8_t *b = abuf(2 * 65536);
		memset(b, 1, 2 * 65536);
		REQUIRE(pwrite(fd, b, 2 * 65536, 0) == 2 * 65536);
		CHECK(pread(fd, b + ma, oa, oa) == (ssize_t)oa);
		free(b);
	} else {
		CHECK(oa == 0 || pow2(oa));
	}
	CHECK(probe_dio_align(-1, &oa, &ma) == -EBADF);
}

/* Holes inside the file and past its end; data, and a range reaching it,
 * is never a hole; an error answers "might be data". */
TEST_CASE(holes_found_data_never_hole)
{
	char p2[4300];
	test_path(p2, sizeof(p2), dir, "sparse");
	int sfd = open(p2, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(sfd >= 0);
	REQUIRE(ftruncate(sfd, 1 << 20) == 0);
	char b[4096];
	memset(b, 1, sizeof(b));
	REQUIRE(pwrite(sfd, b, 4096, 512 * 1024) == 4096);
	REQUIRE(fsync(sfd) == 0);

	/* SEEK_DATA may be unsupported: then everything "might be data". */
	off_t probe = lseek(sfd, 0, SEEK_DATA);
	bool seek_data = probe == 512 * 1024;
	if (!seek_data)
		printf("is_hole: SEEK_DATA does not report holes here (%lld); checking the safe answer\n",
		       (long long)probe);
	CHECK(probe_is_hole(sfd, 0, 64 * 1024) == seek_data);
	CHECK(probe_is_hole(sfd, 0, 512 * 1024) == seek_data);
	CHECK(!probe_is_hole(sfd, 0, 512 * 1024 + 1));
	CHECK(!probe_is_hole(sfd, 512 * 1024, 4096));
	CHECK(!probe_is_hole(sfd, 500 * 1024, 16 * 1024));
	CHECK(!probe_is_hole(sfd, 512 * 1024 + 4095, 1));
	CHECK(probe_is_hole(sfd, 600 * 1024, 64 * 1024) == seek_data);
	CHECK(probe_is_hole(sfd, 516 * 1024, 1 << 20) == seek_data); /* hole to EOF and past */
	CHECK(probe_is_hole(sfd, 2 << 20, 4096));                  /* past EOF */
	CHECK(!probe_is_hole(-1, 0, 4096));                         /* error: "might be data" */
	close(sfd);
	unlink(p2);
}
