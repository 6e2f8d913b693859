//! fulmar's management modules: each turns its protocol into reads of the
//! running switch and transactions on its datastore.
//!
//! - [`metrics`]: Prometheus / OpenMetrics exposition of the switch's
//!   counters, summed at scrape time.

pub mod metrics;
