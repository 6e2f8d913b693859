//! The datapath id's spellings, shared by the bridge checks and the
//! `set-dpid`-style transaction words.

use crate::raw::IntOrString;

/// A dpid: a non-negative integer, or a string holding a decimal number,
/// `0x` and 1 to 16 hex digits, or 8 colon-separated hex bytes.
pub(crate) fn parse_dpid(v: &IntOrString) -> Result<u64, String> {
    let bad = |s: &str| {
        format!(
            "dpid {s:?} is not valid (a number, \"0x\" and up to 16 hex digits, or 8 hex bytes as \"aa:bb:cc:dd:ee:ff:00:11\")"
        )
    };
    match v {
        IntOrString::Int(n) => u64::try_from(*n)
            .map_err(|_| format!("dpid {n} is not valid (a datapath id is not negative)")),
        IntOrString::Str(s) => {
            if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad(s));
                }
                u64::from_str_radix(hex, 16).map_err(|_| bad(s))
            } else if s.contains(':') {
                let parts: Vec<&str> = s.split(':').collect();
                if parts.len() != 8 {
                    return Err(bad(s));
                }
                let mut v = 0u64;
                for part in parts {
                    if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(bad(s));
                    }
                    v = (v << 8) | u64::from_str_radix(part, 16).map_err(|_| bad(s))?;
                }
                Ok(v)
            } else if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                s.parse::<u64>().map_err(|_| bad(s))
            } else {
                Err(bad(s))
            }
        }
    }
}
