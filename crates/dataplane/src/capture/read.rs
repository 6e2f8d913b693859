//! A strict pcapng reader for the tests (written from the layouts above,
//! checking every length, padding and the trailing lengths).

/// What a file holds.
#[derive(Debug, Default)]
pub(crate) struct File {
    pub byte_order_magic: u32,
    pub version: (u16, u16),
    pub linktype: u16,
    pub snaplen: u32,
    pub if_name: Option<String>,
    pub if_tsresol: Option<u8>,
    pub packets: Vec<Packet>,
}

#[derive(Debug)]
pub(crate) struct Packet {
    pub interface: u32,
    pub ts: u64,
    pub cap_len: u32,
    pub orig_len: u32,
    pub data: Vec<u8>,
    pub flags: Option<u32>,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// (code, value) of the options in `b`, which must end with
/// opt_endofopt exactly at its end.
fn options(mut b: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        assert!(b.len() >= 4, "options run past the block");
        let (code, len) = (u16_at(b, 0), usize::from(u16_at(b, 2)));
        if code == 0 {
            assert_eq!(len, 0, "opt_endofopt has a length");
            assert_eq!(b.len(), 4, "bytes after opt_endofopt");
            return out;
        }
        let padded = len.div_ceil(4) * 4;
        assert!(b.len() >= 4 + padded, "option {code} runs past the block");
        assert!(b[4 + len..4 + padded].iter().all(|&x| x == 0), "padding");
        out.push((code, b[4..4 + len].to_vec()));
        b = &b[4 + padded..];
    }
}

/// Parses a little-endian pcapng file with one section and one
/// interface; panics at anything else.
pub(crate) fn parse(mut b: &[u8]) -> File {
    let mut f = File::default();
    let mut first = true;
    let mut interfaces = 0;
    while !b.is_empty() {
        assert!(b.len() >= 12, "truncated block");
        let (kind, total) = (u32_at(b, 0), u32_at(b, 4) as usize);
        assert!(
            total % 4 == 0 && total >= 12 && total <= b.len(),
            "length {total}"
        );
        assert_eq!(u32_at(b, total - 4) as usize, total, "trailing length");
        let body = &b[8..total - 4];
        if first {
            assert_eq!(kind, 0x0A0D_0D0A, "first block is not a section header");
        }
        match kind {
            0x0A0D_0D0A => {
                assert!(first, "one section only");
                f.byte_order_magic = u32_at(body, 0);
                f.version = (u16_at(body, 4), u16_at(body, 6));
                assert_eq!(i64::from_le_bytes(body[8..16].try_into().unwrap()), -1);
                assert_eq!(body.len(), 16, "no SHB options expected");
            }
            1 => {
                interfaces += 1;
                f.linktype = u16_at(body, 0);
                assert_eq!(u16_at(body, 2), 0, "reserved");
                f.snaplen = u32_at(body, 4);
                for (code, v) in options(&body[8..]) {
                    match code {
                        2 => f.if_name = Some(String::from_utf8(v).unwrap()),
                        9 => f.if_tsresol = Some(v[0]),
                        _ => panic!("unexpected IDB option {code}"),
                    }
                }
            }
            6 => {
                assert_eq!(interfaces, 1, "packet before its interface");
                let cap_len = u32_at(body, 12);
                let data_end = 20 + cap_len as usize;
                let padded = 20 + (cap_len as usize).div_ceil(4) * 4;
                assert!(padded <= body.len());
                assert!(body[data_end..padded].iter().all(|&x| x == 0), "padding");
                let mut flags = None;
                for (code, v) in options(&body[padded..]) {
                    assert_eq!(code, 2, "unexpected EPB option");
                    flags = Some(u32::from_le_bytes(v.try_into().unwrap()));
                }
                f.packets.push(Packet {
                    interface: u32_at(body, 0),
                    ts: (u64::from(u32_at(body, 4)) << 32) | u64::from(u32_at(body, 8)),
                    cap_len,
                    orig_len: u32_at(body, 16),
                    data: body[20..data_end].to_vec(),
                    flags,
                });
            }
            other => panic!("unexpected block type {other:#x}"),
        }
        first = false;
        b = &b[total..];
    }
    f
}
