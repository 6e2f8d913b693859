//! Why the pipeline dropped a packet: every reason declared once, in
//! [`drop_reasons!`]'s list below. The list generates the per-reason
//! counters ([`DropCounters`], one `u64` field each), the reasons
//! ([`DropReason`], with the name metrics, reports and traces print and a
//! one-line description), and the sums over them; nothing else writes a
//! reason's name.

/// Declares the drop reasons: `Variant field "description"`.
macro_rules! drop_reasons {
    ($($variant:ident $field:ident $help:literal,)*) => {
        /// A reason the pipeline dropped a packet.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum DropReason {
            $(#[doc = $help] $variant,)*
        }

        /// Packets the pipeline dropped, by reason.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct DropCounters {
            $(#[doc = $help] pub $field: u64,)*
        }

        impl DropReason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];

            /// The name printed in metrics, reports and traces.
            pub const fn name(self) -> &'static str {
                match self {
                    $(DropReason::$variant => stringify!($field),)*
                }
            }

            /// What the reason means, in one line.
            pub const fn help(self) -> &'static str {
                match self {
                    $(DropReason::$variant => $help,)*
                }
            }
        }

        impl DropCounters {
            /// The counter of `reason`.
            pub fn get(&self, reason: DropReason) -> u64 {
                match reason {
                    $(DropReason::$variant => self.$field,)*
                }
            }

            /// Counts one drop for `reason`.
            #[inline]
            pub fn bump(&mut self, reason: DropReason) {
                match reason {
                    $(DropReason::$variant => self.$field += 1,)*
                }
            }

            /// Adds `o` to `self`.
            pub fn merge(&mut self, o: &DropCounters) {
                $(self.$field += o.$field;)*
            }

            /// `self - o`, counter by counter (saturating; `o` is an
            /// earlier value of `self`).
            pub fn since(&self, o: &DropCounters) -> DropCounters {
                DropCounters {
                    $($field: self.$field.saturating_sub(o.$field),)*
                }
            }

            /// The sum over every reason.
            pub fn total(&self) -> u64 {
                0 $(+ self.$field)*
            }

            /// `(name, value)` for each reason, in declaration order.
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                DropReason::ALL.iter().map(|r| (r.name(), self.get(*r))).collect()
            }
        }
    };
}

drop_reasons! {
    NoMatch no_match "No entry matched and the table has no table-miss entry.",
    MeterDrop meter_drop "A meter band dropped the packet.",
    InvalidTtl invalid_ttl "A TTL action found a TTL of 0 or 1 (sent to the controller as well when the switch config asks for it).",
    PortDown port_down "An output to a port that is missing, down or NO_FWD.",
    PortNoRecv port_no_recv "Received on a NO_RECV port.",
    UnsupportedOutput unsupported_output "Output to OFPP_TABLE outside a packet-out, or IN_PORT of a packet with no input port.",
    NormalVlan normal_vlan "NORMAL: the frame's VLAN is not carried by its input port (a tagged frame on an access port, a VLAN the trunk does not carry).",
    NormalSamePort normal_same_port "NORMAL: the destination was learnt on the input port (the two hosts share a segment).",
    NormalReserved normal_reserved "NORMAL: a reserved IEEE 802.1D destination (01:80:c2:00:00:00-0f: STP, LACP, LLDP, pause), which bridges do not forward.",
    ActionFailed action_failed "An action that could not apply to this packet (pop on a missing header, set-field without its prerequisite): skipped, the packet goes on.",
    GroupDrop group_drop "A group that does not exist, a group with no live bucket, or a chain deeper than the bound.",
    PacketInBlocked packet_in_blocked "A packet-in not sent: the ingress port is NO_PACKET_IN.",
    NoOutput no_output "The pipeline finished with no output (an empty action set); not an error, counted so traffic is never lost silently.",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_a_counter_and_a_distinct_name() {
        let mut c = DropCounters::default();
        let mut names = std::collections::BTreeSet::new();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            for _ in 0..=i {
                c.bump(*r);
            }
            assert!(names.insert(r.name()), "{}", r.name());
            assert!(!r.help().is_empty());
        }
        for (i, (name, n)) in c.named().into_iter().enumerate() {
            assert_eq!(name, DropReason::ALL[i].name());
            assert_eq!(n, i as u64 + 1);
        }
        let n = DropReason::ALL.len() as u64;
        assert_eq!(c.total(), n * (n + 1) / 2);
        let mut d = c;
        d.merge(&c);
        assert_eq!(d.since(&c), c);
        assert_eq!(c.since(&d), DropCounters::default());
    }
}
