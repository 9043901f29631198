#!/usr/bin/env python3
"""gen_corpus.py - write the seed corpus of fuzz_api into corpus/.

Each seed is a hand-written scenario in fuzz_api's input format (see the
comment at the top of fuzz_api.c; the encoders below mirror its decoder),
plus a few longer sequences drawn with a fixed seed.  Re-running it
rewrites the same files:  python3 tests/fuzz/gen_corpus.py
"""
import os
import random

OP_WRITE, OP_WRITEV, OP_READ, OP_READV, OP_TRUNC, OP_FALLOC, OP_SYNC, OP_FADVISE, \
    OP_CLOSE, OP_OPEN, OP_READ_ALL, OP_BADCALL = range(12)

DSYNC, NOWAIT, DONTCACHE, DIRECT = 1, 2, 4, 8
BS = {0: 0, 512: 1, 1024: 2, 4096: 3}
ADV = {"DONTNEED": 0, "WILLNEED": 1, "NOREUSE": 2, "NORMAL": 3, "SEQUENTIAL": 4, "RANDOM": 5}
FALLOC = {"alloc": 0, "keep": 1, "punch": 2, "zero": 3, "zero_keep": 4}


def header(mem_mib=4, folio_shift=6, bs=0, no_uring=False, no_rmw=False, no_edge=False,
           two=False, lazy=False, dirty=0, pre0=0, pre1=0):
    """mem_mib 1-8, max folio 4 KiB << folio_shift (0-6), dirty 0-3 (default, 1/16, 1/4, 1/2)."""
    h0 = (mem_mib - 1) | folio_shift << 3 | BS[bs] << 6
    h1 = no_uring | no_rmw << 1 | no_edge << 2 | two << 3 | lazy << 4 | dirty << 5
    return bytes([h0, h1, pre0, pre1])


def target(file=0, slot=0, flags=0, misalign=False):
    return file | slot << 1 | flags << 2 | misalign << 6


def off_page(page):          # page * 4096
    return [0, page & 255, page >> 8]


def off_any(v):              # any offset below 4 MiB
    return [1, v & 255, v >> 8 & 255, v >> 16 & 255]


def off_near(page, delta):   # page * 4096 + delta (-128..127)
    return [2, page, delta & 255]


def off_eof(delta):          # file size + delta (-32768..32767)
    return [3, delta & 255, delta >> 8 & 255]


def ln(n):
    """Encode a length: exact when the decoder can express it."""
    if n < 64:
        return [n]
    if n % 8192 == 0 and n // 8192 <= 64:
        return [192 + n // 8192 - 1]
    if n % 512 == 0 and n // 512 <= 64:
        return [64 + n // 512 - 1]
    assert 1 <= n <= 65536, n
    return [128, (n - 1) & 255, (n - 1) >> 8]


def iov(cuts):               # len(cuts)+1 iovecs, each cut a fraction 0-255 of what is left
    return [len(cuts)] + list(cuts)


def write(off, n, flags=0, file=0, slot=0, misalign=False):
    return [OP_WRITE, target(file, slot, flags, misalign)] + off + ln(n)


def writev(off, n, cuts, flags=0, file=0, slot=0):
    return [OP_WRITEV, target(file, slot, flags)] + off + ln(n) + iov(cuts)


def read(off, n, flags=0, file=0, slot=0, misalign=False):
    return [OP_READ, target(file, slot, flags, misalign)] + off + ln(n)


def readv(off, n, cuts, flags=0, file=0, slot=0):
    return [OP_READV, target(file, slot, flags)] + off + ln(n) + iov(cuts)


def trunc(off, file=0, slot=0):
    return [OP_TRUNC, target(file, slot)] + off


def falloc(mode, off, n, file=0, slot=0):
    return [OP_FALLOC, target(file, slot), FALLOC[mode]] + off + ln(n)


def fsync(data=False, file=0, slot=0):
    return [OP_SYNC, target(file, slot, 1 if data else 0)]


def fadvise(advice, off, n=None, file=0, slot=0):
    """n None: len 0 (to the end of the file)."""
    t = target(file, slot, 1 if n is None else 0)
    return [OP_FADVISE, t, ADV[advice]] + off + ([] if n is None else ln(n))


def close(file=0, slot=0):
    return [OP_CLOSE, target(file, slot)]


def open_(file=0, slot=0, acc="rw", dsync=False, direct=False, trunc=False, creat=False, excl=False):
    o = {"ro": 0, "wo": 1, "rw": 2}[acc] | dsync << 3 | direct << 4
    if trunc:
        o |= 32 | 1 << 6
    elif excl:
        o |= 32 | 3 << 6
    elif creat:
        o |= 2 << 6
    return [OP_OPEN, target(file, slot), o]


def read_all(file=0, slot=0):
    return [OP_READ_ALL, target(file, slot)]


def bad(kind, file=0, slot=0):
    return [OP_BADCALL, target(file, slot), kind]


def seq(*ops):
    out = []
    for op in ops:
        out += op
    return bytes(out)


def scenarios():
    s = {}
    # Every flag combination on a write then a read of the same range.
    for fl in range(16):
        s[f"flags_{fl:02d}"] = header(bs=[0, 512, 4096, 1024][fl % 4]) + seq(
            write(off_near(1, -100), 5000, fl), read(off_near(1, -200), 6000, fl),
            read(off_page(0), 16384, 0))
    s["unaligned_small"] = header(mem_mib=1, folio_shift=0) + seq(
        write(off_any(4095), 1), write(off_any(4097), 3), read(off_any(4090), 20),
        fsync(), read_all())
    s["gap_past_eof"] = header(pre0=3) + seq(
        write(off_eof(5000), 100), read(off_eof(-6000), 7000), fsync(), read_all())
    s["trunc_down_up"] = header(pre0=40) + seq(
        write(off_page(3), 8192), trunc(off_near(4, 17)), trunc(off_page(20)),
        read(off_page(4), 8192), fsync(data=True))
    s["punch_in_block"] = header(bs=512, pre0=10) + seq(
        falloc("punch", off_any(1000), 300), read(off_page(0), 4096), fsync())
    s["zero_extends"] = header() + seq(
        write(off_page(0), 100), falloc("zero", off_any(50), 9000), read(off_page(0), 12000),
        falloc("zero_keep", off_eof(-10), 98304), falloc("alloc", off_eof(100), 5000),
        falloc("keep", off_eof(0), 5000), read_all(), fsync())
    s["writev_read"] = header() + seq(
        writev(off_any(1234), 20000, [10, 128, 0, 255, 7]),
        readv(off_any(1000), 30000, [60, 60, 60]), fsync())
    s["direct_unaligned"] = header(bs=512) + seq(
        write(off_page(2), 8192), write(off_any(8200), 3000, DIRECT),
        read(off_any(8000), 5000, DIRECT), read(off_any(8000), 5000), fsync())
    s["dontcache_edges"] = header() + seq(
        write(off_any(100), 5000, DONTCACHE), write(off_any(5100), 5000, DONTCACHE),
        read(off_page(0), 12000), close(), read(off_page(0), 12000))
    s["no_edge_no_rmw"] = header(no_rmw=True, no_edge=True) + seq(
        write(off_any(100), 5000, DONTCACHE), write(off_any(5100), 5000, DONTCACHE),
        write(off_any(20000), 10, 0), fsync(), read_all())
    s["nowait_pressure"] = header(mem_mib=1, folio_shift=2, dirty=1) + seq(
        *[write(off_page(16 * i), 65536, NOWAIT) for i in range(12)],
        read(off_page(0), 65536, NOWAIT), fsync())
    s["dsync_dontcache"] = header(dirty=2) + seq(
        write(off_any(333), 73728, DSYNC | DONTCACHE), read(off_any(300), 65536, NOWAIT),
        fsync(data=True))
    s["two_files"] = header(two=True, pre0=5, pre1=7) + seq(
        write(off_page(1), 4096, file=1), write(off_page(1), 4096, file=0),
        read(off_page(0), 40000, file=1), fsync(file=1), close(file=0), read_all(file=0))
    s["two_handles"] = header() + seq(
        open_(slot=1, acc="ro"), write(off_any(10), 100, slot=0), read(off_any(0), 200, slot=1),
        write(off_any(10), 100, slot=1), close(slot=0), read(off_any(0), 200, slot=1))
    s["ro_upgrade"] = header(pre0=20) + seq(
        open_(acc="ro"), read(off_page(0), 8192), open_(slot=1, acc="rw"),
        write(off_any(5), 10, slot=1), read(off_page(0), 100, slot=0), close(slot=1))
    s["wronly_dsync"] = header() + seq(
        open_(acc="wo", dsync=True), write(off_any(7), 10000), read(off_page(0), 100),
        close(), read_all())
    s["o_direct_handle"] = header(bs=4096) + seq(
        open_(direct=True), write(off_any(100), 10000), read(off_any(50), 10200),
        write(off_page(1), 4096), fsync())
    s["o_trunc_reopen"] = header(pre0=50) + seq(
        write(off_page(0), 100), open_(trunc=True), read(off_page(0), 100),
        write(off_any(1), 1), close(), open_(creat=True), read_all())
    s["o_excl"] = header() + seq(open_(excl=True), write(off_page(0), 10))
    s["fadvise_all"] = header(pre0=100) + seq(
        fadvise("WILLNEED", off_page(0)), read(off_page(0), 65536, NOWAIT),
        fadvise("NOREUSE", off_page(10), 65536), write(off_page(10), 65536),
        fadvise("DONTNEED", off_page(0)), fadvise("NORMAL", off_page(0)),
        fadvise("SEQUENTIAL", off_page(0), 10), fadvise("RANDOM", off_page(0)),
        read_all())
    s["dontneed_dirty"] = header() + seq(
        write(off_page(0), 131072), fadvise("DONTNEED", off_page(0), 65536),
        read(off_page(0), 131072), fsync())
    s["badcalls"] = header() + seq(*[bad(k) for k in range(10)], close(), bad(9),
                                   open_(acc="ro"), bad(0), bad(7), open_(acc="wo"), bad(1), bad(3))
    s["big_folios"] = header(mem_mib=8, folio_shift=6, lazy=True) + seq(
        write(off_page(0), 524288), write(off_page(128), 524288), read(off_page(0), 524288),
        read(off_page(64), 524288), trunc(off_any(300000)), read_all(), fsync())
    s["small_folios_sync_io"] = header(mem_mib=1, folio_shift=0, no_uring=True, dirty=3) + seq(
        *[write(off_any(i * 5000 + 7), 6000, DONTCACHE if i % 2 else 0) for i in range(20)],
        read_all(), fsync())
    s["misaligned_buffers"] = header(bs=1024) + seq(
        write(off_any(3), 7000, 0, misalign=True), write(off_any(9000), 9000, DIRECT, misalign=True),
        read(off_any(1), 20000, 0, misalign=True), read(off_any(1), 20000, DIRECT, misalign=True))
    return s


def random_sequences(n):
    rnd = random.Random(12345)
    makers = [
        lambda: write(off_any(rnd.randrange(1 << 20)), rnd.randrange(1, 65536), rnd.randrange(16),
                      rnd.randrange(2), rnd.randrange(2)),
        lambda: read(off_any(rnd.randrange(1 << 20)), rnd.randrange(1, 65536), rnd.randrange(16),
                     rnd.randrange(2), rnd.randrange(2)),
        lambda: trunc(off_any(rnd.randrange(1 << 20)), rnd.randrange(2)),
        lambda: falloc(rnd.choice(list(FALLOC)), off_any(rnd.randrange(1 << 20)), rnd.randrange(1, 65536),
                       rnd.randrange(2)),
        lambda: fsync(rnd.randrange(2) == 1, rnd.randrange(2)),
        lambda: fadvise(rnd.choice(list(ADV)), off_any(rnd.randrange(1 << 20)), None, rnd.randrange(2)),
        lambda: open_(rnd.randrange(2), rnd.randrange(2), "rw", rnd.randrange(2) == 1, rnd.randrange(2) == 1),
        lambda: close(rnd.randrange(2), rnd.randrange(2)),
    ]
    out = {}
    for i in range(n):
        h = header(mem_mib=rnd.randrange(1, 9), folio_shift=rnd.randrange(7), bs=rnd.choice([0, 512, 1024, 4096]),
                   no_uring=rnd.randrange(2) == 1, no_rmw=rnd.randrange(2) == 1, no_edge=rnd.randrange(2) == 1,
                   two=True, dirty=rnd.randrange(4), pre0=rnd.randrange(256), pre1=rnd.randrange(256))
        out[f"random_{i}"] = h + seq(*[rnd.choice(makers)() for _ in range(40)])
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    dest = os.path.join(here, "corpus")
    os.makedirs(dest, exist_ok=True)
    seeds = scenarios()
    seeds.update(random_sequences(8))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(dest, name), "wb") as f:
            f.write(data)
    print(f"gen_corpus.py: {len(seeds)} seeds in {dest}")


if __name__ == "__main__":
    main()
