#!/usr/bin/env python3
"""What the agent's loop thread does when it is late: a /proc sampler.

    loop_sampler.py --pid AGENT_PID [--seconds 60] [--interval-ms 1] [--min-ms 5]
                    [--binary build/agent/allot-agent] [--out FILE]

Every --interval-ms it reads the loop thread's (the main thread's)
/proc/<pid>/task/<pid>/syscall, and, when the thread is not waiting in
epoll_wait (the loop's only idle wait), its kernel stack
(/proc/<pid>/task/<pid>/stack, root only). A run of consecutive busy samples
of at least --min-ms is a stall; for each it keeps what the samples saw: the
syscall and the top kernel frames, or the user-space function (resolved with
addr2line against --binary) when the thread was running its own code. At the
end (or on SIGINT/SIGTERM) it prints the longest stalls and, over all stalls,
the signatures that took the most samples.

It costs a core's few percent at 1 ms and sees only what it samples: a stall
shorter than the interval may be missed. For attribution, not for numbers:
the agent's own stall meter (allot_agent_loop_lateness_seconds) is the
measure.
"""
import argparse
import collections
import os
import signal
import subprocess
import sys
import time

# x86_64 syscall numbers of the calls the agent's loop makes most.
SYSCALLS = {
    0: "read", 1: "write", 2: "open", 3: "close", 4: "stat", 5: "fstat", 7: "poll", 8: "lseek",
    9: "mmap", 11: "munmap", 13: "rt_sigaction", 14: "rt_sigprocmask", 16: "ioctl", 17: "pread64",
    18: "pwrite64", 20: "writev", 21: "access", 23: "select", 35: "nanosleep", 39: "getpid",
    41: "socket", 42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
    47: "recvmsg", 56: "clone", 57: "fork", 61: "wait4", 62: "kill", 72: "fcntl", 74: "fsync",
    75: "fdatasync", 76: "truncate", 78: "getdents", 82: "rename", 83: "mkdir", 84: "rmdir",
    87: "unlink", 89: "readlink", 157: "prctl", 202: "futex", 217: "getdents64", 228: "clock_gettime",
    230: "clock_nanosleep", 232: "epoll_wait", 233: "epoll_ctl", 247: "waitid", 257: "openat",
    258: "mkdirat", 262: "newfstatat", 263: "unlinkat", 264: "renameat", 267: "readlinkat",
    281: "epoll_pwait", 288: "accept4", 290: "eventfd2", 293: "pipe2", 302: "prlimit64",
    332: "statx", 424: "pidfd_send_signal", 425: "io_uring_setup", 426: "io_uring_enter",
    434: "pidfd_open", 435: "clone3", 441: "epoll_pwait2",
}
IDLE = {232, 281, 441}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def kernel_frames(stack, top=4):
    frames = []
    for line in (stack or "").splitlines():
        name = line.split("] ", 1)[-1].split("+", 1)[0].strip()
        if name and not name.startswith(("entry_SYSCALL", "do_syscall", "__x64_sys", "x64_sys_call")):
            frames.append(name)
    return frames[:top]


class Resolver:
    """User-space pcs of the agent binary to function names (addr2line)."""

    def __init__(self, pid, binary):
        self.binary = os.path.realpath(binary) if binary else None
        self.ranges = []
        for line in (read(f"/proc/{pid}/maps") or "").splitlines():
            parts = line.split()
            if len(parts) >= 6 and "x" in parts[1]:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                self.ranges.append((lo, hi, int(parts[2], 16), parts[5]))

    def where(self, pc):
        for lo, hi, off, path in self.ranges:
            if lo <= pc < hi:
                return path, pc - lo + off
        return None, pc

    def names(self, pcs):
        out = {}
        by_file = collections.defaultdict(list)
        for pc in pcs:
            path, rel = self.where(pc)
            if path and (path == self.binary or path.endswith(".so") or ".so." in path):
                by_file[path].append((pc, rel))
            else:
                out[pc] = f"{os.path.basename(path) if path else '?'}+{rel:#x}"
        for path, items in by_file.items():
            try:
                res = subprocess.run(["addr2line", "-f", "-C", "-e", path] + [f"{rel:#x}" for _, rel in items],
                                     capture_output=True, text=True, timeout=60)
                lines = res.stdout.splitlines()
            except (OSError, subprocess.SubprocessError):
                lines = []
            for i, (pc, rel) in enumerate(items):
                fn = lines[2 * i] if 2 * i < len(lines) else "??"
                out[pc] = f"{fn} ({os.path.basename(path)})" if fn != "??" else f"{os.path.basename(path)}+{rel:#x}"
        return out


def sample(task):
    """(idle, signature, user pc or None) of one sample."""
    sc = read(f"{task}/syscall")
    if sc is None:
        return None
    parts = sc.split()
    if parts and parts[0] == "running":
        return False, "running", None
    nr = int(parts[0]) if parts else -1
    if nr in IDLE:
        return True, "", None
    pc = int(parts[-1], 16) if len(parts) >= 3 else None
    frames = kernel_frames(read(f"{task}/stack"))
    if nr == -1:
        return False, "in kernel, no syscall: " + " < ".join(frames), pc
    return False, SYSCALLS.get(nr, f"syscall {nr}") + (": " + " < ".join(frames) if frames else ""), pc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--interval-ms", type=float, default=1)
    ap.add_argument("--min-ms", type=float, default=5)
    ap.add_argument("--binary", default="")
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    task = f"/proc/{args.pid}/task/{args.pid}"
    resolver = Resolver(args.pid, args.binary or os.readlink(f"/proc/{args.pid}/exe"))
    stop = [False]
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: stop.__setitem__(0, True))

    stalls = []  # (start wall, ms, Counter of signatures, Counter of user pcs)
    run = None
    samples = busy = 0
    end = time.monotonic() + args.seconds
    period = args.interval_ms / 1000
    nxt = time.monotonic()
    while not stop[0] and time.monotonic() < end:
        s = sample(task)
        now = time.monotonic()
        if s is None:
            break  # the agent exited
        samples += 1
        idle, sig, pc = s
        if not idle:
            busy += 1
            if run is None:
                run = [time.time(), now, now, collections.Counter(), collections.Counter()]
            run[2] = now
            run[3][sig] += 1
            if pc is not None and sig == "running":
                run[4][pc] += 1
        elif run is not None:
            ms = (run[2] - run[1]) * 1000 + args.interval_ms
            if ms >= args.min_ms:
                stalls.append((run[0], ms, run[3], run[4]))
            run = None
        nxt += period
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            nxt = time.monotonic()

    if run is not None:
        ms = (run[2] - run[1]) * 1000 + args.interval_ms
        if ms >= args.min_ms:
            stalls.append((run[0], ms, run[3], run[4]))

    pcs = set()
    for _, _, _, p in stalls:
        pcs.update(p)
    names = resolver.names(sorted(pcs))
    out = open(args.out, "w") if args.out else sys.stdout
    print(f"loop sampler: pid {args.pid}, {samples} samples every {args.interval_ms} ms, "
          f"{busy} busy; {len(stalls)} busy runs of {args.min_ms} ms or more", file=out)
    total = collections.Counter()
    for _, _, sigs, p in stalls:
        for sig, n in sigs.items():
            total[sig] += n
        for pc, n in p.items():
            total["running: " + names.get(pc, hex(pc))] += n
    print("\nover all of them, samples per signature:", file=out)
    for sig, n in total.most_common(25):
        print(f"  {n:6d}  {sig}", file=out)
    print("\nthe longest:", file=out)
    for start, ms, sigs, p in sorted(stalls, key=lambda x: -x[1])[:15]:
        stamp = time.strftime("%H:%M:%S", time.localtime(start)) + f".{int(start * 1000) % 1000:03d}"
        top = "; ".join(f"{n}x {s}" for s, n in sigs.most_common(3))
        users = ", ".join(f"{n}x {names.get(pc, hex(pc))}" for pc, n in p.most_common(3))
        print(f"  {stamp} {ms:7.1f} ms  {top}" + (f"  [user: {users}]" if users else ""), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
