# Off-CPU time of isolated_launch_bench's threads and of the launcher's
# children before exec (they keep the bench's comm), per kernel wait site.
# Usage (root; tracefs mounted at /sys/kernel/tracing):
#   perf record -e sched:sched_switch -g -a -o sw.data build/bench/isolation/isolated_launch_bench 60
#   perf script -i sw.data > sw.txt && python3 bench/isolation/offcpu_sites.py sw.txt
import collections, re, sys
blocks = open(sys.argv[1]).read().split('\n\n')
out = {}  # pid -> (t, site)
dur = collections.defaultdict(list)
hdr = re.compile(r'\s(\d+\.\d+):\s+sched:sched_switch: prev_comm=(\S+) prev_pid=(\d+) .* next_comm=(\S+) next_pid=(\d+)')
for b in blocks:
    lines = b.strip().split('\n')
    m = hdr.search(lines[0]) if lines else None
    if not m: continue
    t, pcomm, ppid, ncomm, npid = float(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5)
    if npid in out:
        t0, site = out.pop(npid)
        dur[site].append((t - t0) * 1000)
    if pcomm.startswith('isolated_launch'):
        frames = [l.split()[1].split('+')[0] for l in lines[1:] if len(l.split()) > 1]
        site = next((f for f in frames if f in ('rcu_sync_enter', 'anon_pipe_read', 'do_wait', 'synchronize_rcu_expedited',
                                               'rcu_barrier', '__mutex_lock.constprop.0', 'do_epoll_wait', 'futex_do_wait',
                                               'exit_to_user_mode_loop', 'wait_for_completion_state')), frames[2] if len(frames) > 2 else '?')
        out[ppid] = (t, site)
def pct(v, p): v = sorted(v); return v[min(len(v)-1, int(p*len(v)))]
print('%-34s %6s %9s %9s %9s' % ('wait site', 'n', 'p50 ms', 'p90 ms', 'sum ms'))
for k, v in sorted(dur.items(), key=lambda kv: -sum(kv[1]))[:12]:
    print('%-34s %6d %9.3f %9.3f %9.1f' % (k, len(v), pct(v, .5), pct(v, .9), sum(v)))
