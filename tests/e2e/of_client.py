"""A small OpenFlow 1.3 controller for the fault tests: it connects to a
`fulmar run --listen` port, says HELLO, answers ECHO_REQUEST, counts
PACKET_INs and FLOW_REMOVEDs, and sends messages built with os-ken's OpenFlow 1.3 encoder
(an implementation independent of fulmar's). Reading can be stopped and
resumed, to play a controller that hangs.
"""

import re
import socket
import struct
import threading
import time

from e2e_support import recv_messages
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

HELLO, ECHO_REQUEST, ECHO_REPLY, PACKET_IN, FLOW_REMOVED, BARRIER_REPLY, ERROR = 0, 2, 3, 10, 11, 21, 1


class _Datapath:
    """What os-ken's message classes need of a datapath to serialize."""
    ofproto = ofp
    ofproto_parser = parser
    id = 0


DP = _Datapath()


def listen_port(switch):
    """The TCP port a `fulmar run --listen tcp:127.0.0.1:0` switch took."""
    m = re.search(r"listening for controllers on [\d.]+:(\d+)", "".join(switch.err_lines))
    assert m, switch.err_lines
    return int(m.group(1))


class OfClient:
    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(0.2)
        self.lock = threading.Lock()
        self.cond = threading.Condition()
        self.replies = {}  # xid -> message type
        self.errors = []
        self.packet_ins = 0
        self.flow_removed = []  # (cookie, reason), in arrival order
        self.removed_counts = {}  # cookie -> (packet_count, byte_count)
        self.xid = 100
        self.reading = threading.Event()
        self.reading.set()
        self.closed = threading.Event()
        self.done = False
        self.sock.sendall(struct.pack("!BBHI", 4, HELLO, 8, 1))
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        buf = b""
        while not self.done:
            if not self.reading.wait(0.1):
                continue
            got = recv_messages(self.sock, buf, timeout_ok=True)
            if got is None:
                break
            msgs, buf = got
            for typ, xid, msg in msgs:
                if typ == ECHO_REQUEST:
                    with self.lock:
                        self.sock.sendall(struct.pack("!BBHI", 4, ECHO_REPLY, len(msg), xid) + msg[8:])
                elif typ == PACKET_IN:
                    self.packet_ins += 1
                elif typ == FLOW_REMOVED:
                    # ofp_flow_removed: header, cookie (8), priority (2),
                    # reason, table_id, durations (8), timeouts (4), then
                    # packet_count and byte_count (8 each).
                    cookie = int.from_bytes(msg[8:16], "big")
                    self.flow_removed.append((cookie, msg[18]))
                    self.removed_counts[cookie] = (int.from_bytes(msg[32:40], "big"),
                                                   int.from_bytes(msg[40:48], "big"))
                with self.cond:
                    if typ == ERROR:
                        self.errors.append(msg)
                    self.replies[xid] = typ
                    self.cond.notify_all()
        self.closed.set()
        with self.cond:
            self.cond.notify_all()

    def send(self, msg):
        """Sends an os-ken message; returns its xid."""
        with self.lock:
            self.xid += 1
            xid = self.xid
            msg.set_xid(xid)
            msg.serialize()
            self.sock.sendall(bytes(msg.buf))
        return xid

    def send_all(self, msgs):
        """Sends os-ken messages back to back in one write."""
        out = bytearray()
        with self.lock:
            for msg in msgs:
                self.xid += 1
                msg.set_xid(self.xid)
                msg.serialize()
                out += msg.buf
            self.sock.sendall(bytes(out))

    def barrier(self, timeout=10):
        """Sends a BARRIER_REQUEST and waits for its reply; returns the
        seconds it took (raises on a timeout or a closed channel)."""
        t = time.monotonic()
        xid = self.send(parser.OFPBarrierRequest(DP))
        with self.cond:
            ok = self.cond.wait_for(lambda: xid in self.replies or self.closed.is_set(), timeout)
        assert ok and self.replies.get(xid) == BARRIER_REPLY, f"no BARRIER_REPLY in {timeout} s"
        return time.monotonic() - t

    def flow(self, match, actions=(), priority=10, table_id=0, command=ofp.OFPFC_ADD, goto=None, **kw):
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, list(actions))] if actions else []
        if goto is not None:
            inst.append(parser.OFPInstructionGotoTable(goto))
        return self.send(parser.OFPFlowMod(DP, table_id=table_id, command=command, priority=priority,
                                           match=parser.OFPMatch(**match), instructions=inst, **kw))

    def forward(self, a, b, priority=10):
        """Flows sending port a's traffic to b and b's to a."""
        self.flow({"in_port": a}, [parser.OFPActionOutput(b)], priority=priority)
        self.flow({"in_port": b}, [parser.OFPActionOutput(a)], priority=priority)

    def miss_to_controller(self, max_len=128):
        self.flow({}, [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, max_len)], priority=0)

    def close(self):
        self.done = True
        try:
            self.sock.close()
        except OSError:
            pass
        self.thread.join(timeout=2)
