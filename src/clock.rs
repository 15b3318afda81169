//! The one clock.
//!
//! Everything that stamps time asks here, so `SOURCE_DATE_EPOCH` (the
//! reproducible-builds convention) can pin it: tests get byte-identical
//! progress.md and deterministic handoff names without faking the system time.

use chrono::{DateTime, Utc};

/// Now, or `SOURCE_DATE_EPOCH` (seconds since the epoch) when set and valid.
pub fn now() -> DateTime<Utc> {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|secs| DateTime::from_timestamp(secs, 0))
        .unwrap_or_else(Utc::now)
}
