# Does this kernel's conntrack dump filter (CTA_FILTER, Linux 5.8+) match on
# the orig and the reply tuple? Counts the host's entries whose orig / reply
# source is an address, filtered in the kernel. Compare with
# /proc/net/nf_conntrack. Usage (root): python3 bench/isolation/ctfilter_probe.py
# (docs/decisions.md, the conntrack flush entry).
import socket, struct
NLA_F_NESTED = 0x8000
def attr(t, payload):
    l = 4 + len(payload)
    return struct.pack('=HH', l, t) + payload + b'\0' * ((4 - l % 4) % 4)
def dump(orig_flags, reply_flags, addr):
    ip = attr(1 | NLA_F_NESTED, attr(1, socket.inet_aton(addr)))  # CTA_TUPLE_IP { CTA_IP_V4_SRC }
    body = struct.pack('=BBH', socket.AF_INET, 0, 0)
    if orig_flags: body += attr(1 | NLA_F_NESTED, ip)              # CTA_TUPLE_ORIG
    if reply_flags: body += attr(2 | NLA_F_NESTED, ip)             # CTA_TUPLE_REPLY
    body += attr(25 | NLA_F_NESTED, attr(1, struct.pack('=I', orig_flags)) + attr(2, struct.pack('=I', reply_flags)))
    msg = struct.pack('=IHHII', 16 + len(body), (1 << 8) | 1, 0x301, 1, 0) + body
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)
    s.send(msg)
    n = 0
    while True:
        data = s.recv(1 << 20)
        off = 0
        while off < len(data):
            l, t, f, seq, pid = struct.unpack_from('=IHHII', data, off)
            if t == 3: return n
            if t == 2:
                return 'error %d' % struct.unpack_from('=i', data, off + 16)[0]
            n += 1
            off += (l + 3) & ~3
print('orig src=127.0.0.1:', dump(1, 0, '127.0.0.1'))
print('reply src=127.0.0.1:', dump(0, 1, '127.0.0.1'))
print('orig+reply src=127.0.0.1:', dump(1, 1, '127.0.0.1'))
print('reply src=127.0.0.4:', dump(0, 1, '127.0.0.4'))
print('reply src=10.99.99.99:', dump(0, 1, '10.99.99.99'))
