"""Frames for the generators: Ethernet, optional 802.1Q tag or MPLS
label, IPv4, UDP, padded to a frame size (without the 4-byte FCS, which a
veth does not carry), with valid IPv4 and UDP checksums."""

import struct


def mac_bytes(mac):
    return bytes(int(x, 16) for x in mac.split(":"))


def ip_bytes(ip):
    return bytes(int(x) for x in ip.split("."))


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def udp_frame(dst_mac, src_mac, src_ip, dst_ip, sport=1024, dport=4789, size=64, vlan=None,
              mpls=None, tos=0, ttl=64):
    """A UDP/IPv4 frame of `size` bytes (no FCS). vlan: VLAN id (PCP 0);
    mpls: label (bottom of stack, TTL 64), carried instead of the IPv4
    ethertype."""
    head = mac_bytes(dst_mac) + mac_bytes(src_mac)
    if vlan is not None:
        head += struct.pack("!HH", 0x8100, vlan & 0xFFF)
    if mpls is not None:
        head += struct.pack("!HI", 0x8847, (mpls << 12) | (1 << 8) | 64)
    else:
        head += struct.pack("!H", 0x0800)
    ip_len = max(size - len(head), 28)
    udp_len = ip_len - 20
    src, dst = ip_bytes(src_ip), ip_bytes(dst_ip)
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, tos, ip_len, 1, 0, ttl, 17, 0, src, dst)
    iph = iph[:10] + struct.pack("!H", csum(iph)) + iph[12:]
    payload = bytes(udp_len - 8)
    udph = struct.pack("!HHHH", sport, dport, udp_len, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, 17, udp_len)
    c = csum(pseudo + udph + payload) or 0xFFFF
    udph = udph[:6] + struct.pack("!H", c)
    return head + iph + udph + payload
