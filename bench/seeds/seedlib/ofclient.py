"""A minimal OpenFlow 1.3 controller-side client over a switch's unix
management socket (fulmar's and Open vSwitch's BRIDGE.mgmt): hello,
echo, flow-stats and port-stats requests timed to their last reply
part, and flow-mods in batches closed by a barrier, with the switch's
errors collected. Written for the measurements only: it encodes just the
messages they send and decodes headers, errors and multipart framing.
"""

import select
import socket
import struct
import time

OFP_VERSION = 4
HELLO, ERROR, ECHO_REQUEST, ECHO_REPLY = 0, 1, 2, 3
FLOW_MOD, MULTIPART_REQUEST, MULTIPART_REPLY = 14, 18, 19
BARRIER_REQUEST, BARRIER_REPLY = 20, 21
MP_FLOW, MP_PORT_STATS = 1, 4
ERR_FLOW_MOD_FAILED, TABLE_FULL = 5, 1


def header(typ, length, xid):
    return struct.pack("!BBHI", OFP_VERSION, typ, length, xid)


def oxm(field, value):
    return struct.pack("!HBB", 0x8000, field << 1, len(value)) + value


def match(*fields):
    body = b"".join(fields)
    length = 4 + len(body)
    pad = (8 - length % 8) % 8
    return struct.pack("!HH", 1, length) + body + b"\0" * pad


def output(port):
    return struct.pack("!HHIH6x", 0, 16, port, 0xFFE5)


def apply_actions(*actions):
    body = b"".join(actions)
    return struct.pack("!HH4x", 4, 8 + len(body)) + body


def flow_mod(xid, m, instructions, priority=100, table=0, command=0):
    body = struct.pack("!QQBBHHHIIIH2x", 0, 0, table, command, 0, 0, priority, 0xFFFFFFFF,
                       0xFFFFFFFF, 0xFFFFFFFF, 0) + m + instructions
    return header(FLOW_MOD, 8 + len(body), xid) + body


class OfError(Exception):
    pass


class Client:
    def __init__(self, path, timeout=600):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = bytearray()
        self.xid = 1
        self.errors = []  # (xid, type, code)
        self.s.sendall(header(HELLO, 8, self.next_xid()))
        typ, _, _ = self.read()
        while typ != HELLO:
            typ, _, _ = self.read()

    def next_xid(self):
        self.xid += 1
        return self.xid

    def read(self):
        """One message: (type, xid, body); answers echo requests and
        records errors on the way."""
        while True:
            while len(self.buf) < 8:
                chunk = self.s.recv(1 << 20)
                if not chunk:
                    raise OfError("the switch closed the connection")
                self.buf += chunk
            _, typ, length, xid = struct.unpack_from("!BBHI", self.buf)
            if length < 8:
                raise OfError(f"bad message length {length}")
            while len(self.buf) < length:
                chunk = self.s.recv(1 << 20)
                if not chunk:
                    raise OfError("the switch closed the connection")
                self.buf += chunk
            body = bytes(self.buf[8:length])
            del self.buf[:length]
            if typ == ECHO_REQUEST:
                self.s.sendall(header(ECHO_REPLY, 8 + len(body), xid) + body)
                continue
            if typ == ERROR:
                et, ec = struct.unpack_from("!HH", body)
                self.errors.append((xid, et, ec))
            return typ, xid, body

    def multipart(self, mp_type, body):
        """Sends a multipart request; returns (seconds to the last reply
        part, entries, reply bytes). Entries: flow or port entries counted
        from their length fields."""
        xid = self.next_xid()
        msg = struct.pack("!HH4x", mp_type, 0) + body
        t0 = time.perf_counter()
        self.s.sendall(header(MULTIPART_REQUEST, 8 + len(msg), xid) + msg)
        entries = nbytes = 0
        while True:
            typ, rxid, rbody = self.read()
            if rxid != xid:
                continue
            if typ == ERROR:
                raise OfError(f"multipart {mp_type}: error {self.errors[-1][1:]}")
            if typ != MULTIPART_REPLY:
                continue
            _, flags = struct.unpack_from("!HH", rbody)
            nbytes += len(rbody) + 8
            off = 8
            if mp_type == MP_FLOW:
                while off + 2 <= len(rbody):
                    (ln,) = struct.unpack_from("!H", rbody, off)
                    if ln == 0:
                        break
                    entries += 1
                    off += ln
            elif mp_type == MP_PORT_STATS:
                entries += (len(rbody) - 8) // 112
            if not flags & 1:
                return time.perf_counter() - t0, entries, nbytes

    def flow_stats(self):
        body = struct.pack("!B3xII4xQQ", 0xFF, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0) + match()
        return self.multipart(MP_FLOW, body)

    def port_stats(self):
        return self.multipart(MP_PORT_STATS, struct.pack("!I4x", 0xFFFFFFFF))

    def barrier(self):
        xid = self.next_xid()
        self.s.sendall(header(BARRIER_REQUEST, 8, xid))
        while True:
            typ, rxid, _ = self.read()
            if typ == BARRIER_REPLY and rxid == xid:
                return

    def send_batch(self, msgs):
        """Sends encoded messages and a barrier; returns seconds to the
        barrier reply. Errors land in self.errors."""
        t0 = time.perf_counter()
        self.pump(b"".join(msgs))
        self.barrier()
        return time.perf_counter() - t0

    def pump(self, data):
        """Writes data while reading whatever the switch sends meanwhile
        (errors for a batch can exceed the socket buffers: writing alone
        could block both sides)."""
        view = memoryview(data)
        while view:
            r, w, _ = select.select([self.s], [self.s], [], 60)
            if r:
                chunk = self.s.recv(1 << 20)
                if not chunk:
                    raise OfError("the switch closed the connection")
                self.buf += chunk
            if w:
                n = self.s.send(view[: 1 << 16])
                view = view[n:]
            if not r and not w:
                raise OfError("the switch neither reads nor writes for 60 s")

    def close(self):
        self.s.close()
