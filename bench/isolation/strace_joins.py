# The launcher's children's cgroup.procs writes (and clone3, setns) in an
# strace log of isolated_launch_bench, per hierarchy, split by phase (with
# or without network/netns: the children that setns()). Usage (root):
#   strace -f -T -y -e trace=write,clone3,read,setns,execve -o st.txt build/bench/isolation/isolated_launch_bench 100
#   python3 bench/isolation/strace_joins.py st.txt
import re, sys, collections
rx = re.compile(r'^(\d+)\s+(\w+)\((.*)\)\s+= (-?\d+).*<([\d.]+)>$')
calls = collections.defaultdict(list)  # pid -> [(kind, ms)]
netpids = set()
for line in open(sys.argv[1]):
    m = rx.match(line.strip())
    if not m: continue
    pid, call, args, rc, dur = m.groups()
    d = float(dur) * 1000
    if call == 'setns': netpids.add(pid)
    if call == 'write' and 'cgroup.procs' in args and '/bench.' in args:
        h = re.search(r'/sys/fs/cgroup/(\w+)/', args)
        calls[pid].append(('write cgroup.procs ' + (h.group(1) if h else '?'), d))
    elif call in ('clone3', 'setns'):
        calls[pid].append((call, d))
def pct(v, p): v = sorted(v); return v[min(len(v)-1, int(p*len(v)))] if v else 0
for phase in ('no netns', 'netns'):
    kinds = collections.defaultdict(list)
    for pid, cs in calls.items():
        writes = [c for c in cs if c[0].startswith('write')]
        if not writes: continue
        if (pid in netpids) != (phase == 'netns'): continue
        for k, d in cs: kinds[k].append(d)
        kinds['= all cgroup.procs writes of a child'].append(sum(d for _, d in writes))
    print('phase:', phase)
    print('  %-38s %6s %9s %9s %9s' % ('syscall', 'n', 'p50 ms', 'p90 ms', 'max ms'))
    for k, v in sorted(kinds.items()):
        print('  %-38s %6d %9.3f %9.3f %9.3f' % (k, len(v), pct(v, .5), pct(v, .9), max(v)))
