//! The one spelling of each dataplane setting that the configuration, the
//! management protocols and the logs write as a word: the thread mode
//! ([`ThreadMode`]), the dispatch key ([`DispatchKey`]) and the placement
//! policy ([`CoreAssign`]). The types are defined where the threads use
//! them; `FromStr` and `Display` here are the only conversions to and from
//! text, and their errors list the valid words.

use std::fmt;
use std::str::FromStr;

use crate::dispatch::DispatchKey;
use crate::placement::CoreAssign;
use crate::threads::ThreadMode;

impl ThreadMode {
    /// `run-to-completion` or `rx-worker-tx`.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadMode::RunToCompletion => "run-to-completion",
            ThreadMode::RxWorkerTx => "rx-worker-tx",
        }
    }
}

impl fmt::Display for ThreadMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ThreadMode {
    type Err = String;

    fn from_str(s: &str) -> Result<ThreadMode, String> {
        match s {
            "run-to-completion" => Ok(ThreadMode::RunToCompletion),
            "rx-worker-tx" => Ok(ThreadMode::RxWorkerTx),
            _ => Err(format!(
                "mode {s:?} is not valid (run-to-completion or rx-worker-tx)"
            )),
        }
    }
}

impl DispatchKey {
    /// `port`, `l2`, `5tuple` or `priority-class`.
    pub fn as_str(self) -> &'static str {
        match self {
            DispatchKey::Port => "port",
            DispatchKey::L2 => "l2",
            DispatchKey::FiveTuple => "5tuple",
            DispatchKey::PriorityClass => "priority-class",
        }
    }
}

impl fmt::Display for DispatchKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DispatchKey {
    type Err = String;

    fn from_str(s: &str) -> Result<DispatchKey, String> {
        match s {
            "port" => Ok(DispatchKey::Port),
            "l2" => Ok(DispatchKey::L2),
            "5tuple" => Ok(DispatchKey::FiveTuple),
            "priority-class" => Ok(DispatchKey::PriorityClass),
            _ => Err(format!(
                "dispatch key {s:?} is not valid (port, l2, 5tuple or priority-class)"
            )),
        }
    }
}

impl fmt::Display for CoreAssign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CoreAssign {
    type Err = String;

    fn from_str(s: &str) -> Result<CoreAssign, String> {
        match s {
            "performance" => Ok(CoreAssign::Performance),
            "balance" => Ok(CoreAssign::Balance),
            "minimum" => Ok(CoreAssign::Minimum),
            _ => Err(format!(
                "core_assign {s:?} is not valid (performance, balance or minimum)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_round_trips_and_others_are_refused() {
        for m in [ThreadMode::RunToCompletion, ThreadMode::RxWorkerTx] {
            assert_eq!(m.to_string().parse::<ThreadMode>(), Ok(m));
        }
        for k in [
            DispatchKey::Port,
            DispatchKey::L2,
            DispatchKey::FiveTuple,
            DispatchKey::PriorityClass,
        ] {
            assert_eq!(k.to_string().parse::<DispatchKey>(), Ok(k));
        }
        for c in [
            CoreAssign::Performance,
            CoreAssign::Balance,
            CoreAssign::Minimum,
        ] {
            assert_eq!(c.to_string().parse::<CoreAssign>(), Ok(c));
        }
        assert_eq!(
            "pipeline".parse::<ThreadMode>(),
            Err("mode \"pipeline\" is not valid (run-to-completion or rx-worker-tx)".into())
        );
        assert!("5-tuple".parse::<DispatchKey>().is_err());
        assert!("fast".parse::<CoreAssign>().is_err());
    }
}
