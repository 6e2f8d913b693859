//! A port's VLAN membership for the NORMAL switch: its mode, its access
//! (native) VLAN and the VLANs it trunks, and the two decisions NORMAL
//! asks of them — which VLAN a frame received on the port belongs to,
//! and how (if at all) a frame of a VLAN leaves by the port.
//!
//! The modes are those Open vSwitch users set with `vlan_mode`, `tag`
//! and `trunks`:
//!
//! | mode | an untagged frame in | a tagged frame in | leaves |
//! |---|---|---|---|
//! | access (`tag` T) | VLAN T | dropped (VID ≠ 0) | VLAN T only, untagged |
//! | trunk | VLAN 0 | its VID, if trunked | trunked VLANs; tagged unless VLAN 0 |
//! | native-tagged (`tag` T) | VLAN T | its VID, if trunked | trunked VLANs and T, tagged unless VLAN 0 |
//! | native-untagged (`tag` T) | VLAN T | its VID, if trunked | trunked VLANs and T; T and VLAN 0 untagged |
//!
//! A port with no settings is a trunk of every VLAN (`trunks` empty
//! means all); setting `tag` alone makes an access port. A priority tag
//! (VID 0) counts as untagged. Only the 802.1Q TPID (0x8100) is a VLAN
//! tag here; an 802.1ad (0x88a8) outer tag is payload to NORMAL.

use std::fmt;
use std::str::FromStr;

/// How a port carries VLANs (`vlan_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum VlanMode {
    /// Every frame in VLAN `tag`; untagged on the wire.
    Access,
    /// The frame's own VLAN (VLAN 0 when untagged), if trunked; tagged
    /// on the wire.
    #[default]
    Trunk,
    /// As trunk, untagged frames in VLAN `tag`, which leaves tagged.
    NativeTagged,
    /// As native-tagged, VLAN `tag` leaves untagged.
    NativeUntagged,
}

impl VlanMode {
    /// The spelling of `vlan_mode` (OVSDB, `fulmar ctl`, the config file).
    pub const fn as_str(self) -> &'static str {
        match self {
            VlanMode::Access => "access",
            VlanMode::Trunk => "trunk",
            VlanMode::NativeTagged => "native-tagged",
            VlanMode::NativeUntagged => "native-untagged",
        }
    }

    /// Whether the mode needs a `tag`.
    pub const fn needs_tag(self) -> bool {
        !matches!(self, VlanMode::Trunk)
    }
}

impl fmt::Display for VlanMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for VlanMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "access" => VlanMode::Access,
            "trunk" => VlanMode::Trunk,
            "native-tagged" => VlanMode::NativeTagged,
            "native-untagged" => VlanMode::NativeUntagged,
            other => {
                return Err(format!(
                    "vlan_mode {other:?} is not valid (access, trunk, native-tagged or native-untagged)"
                ))
            }
        })
    }
}

/// The highest VLAN id (4095 is reserved by 802.1Q).
pub const MAX_VID: u16 = 4094;

/// A set of VLAN ids 0..=4095, one bit each.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct VlanSet([u64; 64]);

impl Default for VlanSet {
    fn default() -> Self {
        VlanSet([0; 64])
    }
}

impl fmt::Debug for VlanSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl VlanSet {
    /// Adds `vid` (its low 12 bits).
    pub fn insert(&mut self, vid: u16) {
        let v = usize::from(vid & 0xfff);
        self.0[v / 64] |= 1 << (v % 64);
    }

    /// Whether `vid` is in the set.
    #[inline]
    pub fn contains(&self, vid: u16) -> bool {
        let v = usize::from(vid & 0xfff);
        self.0[v / 64] & (1 << (v % 64)) != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// The ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..4096u16).filter(|v| self.contains(*v))
    }
}

impl FromIterator<u16> for VlanSet {
    fn from_iter<I: IntoIterator<Item = u16>>(it: I) -> Self {
        let mut s = VlanSet::default();
        for v in it {
            s.insert(v);
        }
        s
    }
}

/// A port's VLAN settings, checked: a mode that needs a tag has one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct PortVlan {
    mode: VlanMode,
    /// The access or native VLAN (0 for a trunk).
    tag: u16,
    /// Trunked VLANs; empty: all.
    trunks: VlanSet,
}

/// How a frame leaves by a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress {
    /// Not at all: the port does not carry the VLAN.
    No,
    /// Without an 802.1Q tag.
    Untagged,
    /// With an 802.1Q tag of this VID.
    Tagged(u16),
}

impl PortVlan {
    /// Settings as `ovs-vsctl` takes them: `mode` (None: access when
    /// `tag` is set, else trunk), `tag` and `trunks` (empty: all). An
    /// error names what is wrong: a VID above 4094, a mode that needs a
    /// tag without one, a tag on a trunk.
    pub fn new(
        mode: Option<VlanMode>,
        tag: Option<u16>,
        trunks: &[u16],
    ) -> Result<PortVlan, String> {
        let bad = |v: u16| v > MAX_VID;
        if let Some(t) = tag.filter(|t| bad(*t)) {
            return Err(format!("tag {t} is not a VLAN id (0 to {MAX_VID})"));
        }
        if let Some(t) = trunks.iter().find(|t| bad(**t)) {
            return Err(format!("trunks: {t} is not a VLAN id (0 to {MAX_VID})"));
        }
        let mode = mode.unwrap_or(if tag.is_some() {
            VlanMode::Access
        } else {
            VlanMode::Trunk
        });
        let tag = match (mode.needs_tag(), tag) {
            (true, Some(t)) => t,
            (true, None) => return Err(format!("vlan_mode {mode} needs a tag")),
            (false, Some(t)) => {
                return Err(format!(
                    "tag {t} is not used by vlan_mode trunk (use native-tagged or native-untagged)"
                ))
            }
            (false, None) => 0,
        };
        if mode == VlanMode::Access && !trunks.is_empty() {
            return Err("trunks are not used by vlan_mode access".into());
        }
        Ok(PortVlan {
            mode,
            tag,
            trunks: trunks.iter().copied().collect(),
        })
    }

    /// An access port of VLAN `tag`.
    pub fn access(tag: u16) -> PortVlan {
        PortVlan {
            mode: VlanMode::Access,
            tag: tag & 0xfff,
            trunks: VlanSet::default(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> VlanMode {
        self.mode
    }

    /// The access or native VLAN; None for a trunk.
    pub fn tag(&self) -> Option<u16> {
        self.mode.needs_tag().then_some(self.tag)
    }

    /// The trunked VLANs (empty: all).
    pub fn trunks(&self) -> &VlanSet {
        &self.trunks
    }

    /// Whether this is the default (a trunk of every VLAN).
    pub fn is_default(&self) -> bool {
        *self == PortVlan::default()
    }

    /// Whether the trunk list takes `vid` (empty: every VLAN).
    #[inline]
    fn trunks_vid(&self, vid: u16) -> bool {
        self.trunks.is_empty() || self.trunks.contains(vid)
    }

    /// The VLAN of a frame received on this port whose 802.1Q VID is
    /// `vid` (None: untagged; Some(0): priority-tagged); None when the
    /// port drops it.
    #[inline]
    pub fn ingress(&self, vid: Option<u16>) -> Option<u16> {
        let vid = vid.filter(|v| *v != 0);
        match (self.mode, vid) {
            (VlanMode::Access, None) => Some(self.tag),
            (VlanMode::Access, Some(_)) => None,
            (VlanMode::Trunk, None) => self.trunks_vid(0).then_some(0),
            (VlanMode::NativeTagged | VlanMode::NativeUntagged, None) => Some(self.tag),
            (_, Some(v)) => {
                (self.trunks_vid(v) || v == self.tag && self.mode.needs_tag()).then_some(v)
            }
        }
    }

    /// How a frame of VLAN `vlan` leaves by this port.
    #[inline]
    pub fn egress(&self, vlan: u16) -> Egress {
        match self.mode {
            VlanMode::Access if vlan == self.tag => Egress::Untagged,
            VlanMode::Access => Egress::No,
            VlanMode::Trunk if !self.trunks_vid(vlan) => Egress::No,
            VlanMode::NativeTagged | VlanMode::NativeUntagged
                if vlan != self.tag && !self.trunks_vid(vlan) =>
            {
                Egress::No
            }
            VlanMode::NativeUntagged if vlan == self.tag => Egress::Untagged,
            _ if vlan == 0 => Egress::Untagged,
            _ => Egress::Tagged(vlan),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_take_and_give_frames_as_the_table_says() {
        let access = PortVlan::new(None, Some(10), &[]).unwrap();
        assert_eq!(access.mode(), VlanMode::Access);
        assert_eq!(access.ingress(None), Some(10));
        assert_eq!(access.ingress(Some(0)), Some(10), "priority tag");
        assert_eq!(access.ingress(Some(10)), None, "tagged on access");
        assert_eq!(access.egress(10), Egress::Untagged);
        assert_eq!(access.egress(20), Egress::No);

        let all = PortVlan::default();
        assert!(all.is_default());
        assert_eq!(all.ingress(None), Some(0));
        assert_eq!(all.ingress(Some(77)), Some(77));
        assert_eq!(all.egress(0), Egress::Untagged);
        assert_eq!(all.egress(77), Egress::Tagged(77));

        let some = PortVlan::new(Some(VlanMode::Trunk), None, &[10, 20]).unwrap();
        assert_eq!(some.ingress(Some(10)), Some(10));
        assert_eq!(some.ingress(Some(30)), None);
        assert_eq!(some.ingress(None), None, "VLAN 0 not trunked");
        assert_eq!(some.egress(20), Egress::Tagged(20));
        assert_eq!(some.egress(30), Egress::No);

        let nt = PortVlan::new(Some(VlanMode::NativeTagged), Some(5), &[10]).unwrap();
        assert_eq!(nt.ingress(None), Some(5));
        assert_eq!(nt.ingress(Some(5)), Some(5));
        assert_eq!(nt.ingress(Some(10)), Some(10));
        assert_eq!(nt.ingress(Some(11)), None);
        assert_eq!(nt.egress(5), Egress::Tagged(5));
        assert_eq!(nt.egress(10), Egress::Tagged(10));
        assert_eq!(nt.egress(11), Egress::No);

        let nu = PortVlan::new(Some(VlanMode::NativeUntagged), Some(5), &[]).unwrap();
        assert_eq!(nu.ingress(None), Some(5));
        assert_eq!(nu.egress(5), Egress::Untagged);
        assert_eq!(nu.egress(99), Egress::Tagged(99));
    }

    #[test]
    fn bad_settings_are_refused_with_what_is_wrong() {
        let e = |m, t, tr: &[u16]| PortVlan::new(m, t, tr).unwrap_err();
        assert!(e(None, Some(4095), &[]).contains("tag 4095"));
        assert!(e(None, None, &[1, 5000]).contains("trunks: 5000"));
        assert!(e(Some(VlanMode::Access), None, &[]).contains("needs a tag"));
        assert!(e(Some(VlanMode::NativeUntagged), None, &[]).contains("needs a tag"));
        assert!(e(Some(VlanMode::Trunk), Some(3), &[]).contains("not used by vlan_mode trunk"));
        assert!(e(None, Some(3), &[4]).contains("trunks are not used"));
        for m in ["access", "trunk", "native-tagged", "native-untagged"] {
            assert_eq!(m.parse::<VlanMode>().unwrap().to_string(), m);
        }
        assert!("dot1q-tunnel"
            .parse::<VlanMode>()
            .unwrap_err()
            .contains("not valid"));
    }

    #[test]
    fn vlan_sets_hold_every_id() {
        let s: VlanSet = [0, 1, 63, 64, 4095].into_iter().collect();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 63, 64, 4095]);
        assert!(!s.contains(2) && !s.is_empty() && VlanSet::default().is_empty());
    }
}
