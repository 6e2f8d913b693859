//! Time as the pipeline sees it: handed in by the caller, never read
//! from a clock here.

/// A point in time: nanoseconds since an arbitrary epoch of a monotonic
/// clock chosen by the caller. Only differences between two `Time`s mean
/// anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    /// `secs` whole seconds after the epoch.
    pub const fn from_secs(secs: u64) -> Time {
        Time(secs.saturating_mul(1_000_000_000))
    }

    /// `d` after the epoch (a caller's clock reading since its epoch),
    /// saturating.
    pub fn from_duration(d: std::time::Duration) -> Time {
        Time(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(1_000_000))
    }

    /// Nanoseconds from `earlier` to `self`; zero if `earlier` is later
    /// (a caller's clock never runs backwards, but nothing breaks if it does).
    pub const fn nanos_since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// `self` plus `secs` seconds, saturating.
    pub const fn plus_secs(self, secs: u64) -> Time {
        Time(self.0.saturating_add(secs.saturating_mul(1_000_000_000)))
    }

    /// The `(duration_sec, duration_nsec)` pair OpenFlow statistics report
    /// for the time from `since` to `self`.
    pub fn duration_since(self, since: Time) -> (u32, u32) {
        let ns = self.nanos_since(since);
        let secs = ns / 1_000_000_000;
        (
            u32::try_from(secs).unwrap_or(u32::MAX),
            (ns % 1_000_000_000) as u32,
        )
    }
}

/// The value OpenFlow statistics report for a counter the switch does not
/// keep (spec 1.3.5 §7.3.5: "all bits set").
pub const COUNTER_UNAVAILABLE: u64 = u64::MAX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_splits_seconds_and_nanoseconds() {
        let t0 = Time(5);
        let t1 = Time(5 + 3 * 1_000_000_000 + 250);
        assert_eq!(t1.duration_since(t0), (3, 250));
        assert_eq!(t0.duration_since(t1), (0, 0));
        assert_eq!(Time::from_secs(2).plus_secs(3), Time::from_secs(5));
        assert_eq!(
            Time::from_millis(1500).duration_since(Time(0)),
            (1, 500_000_000)
        );
    }
}
