//! The pure half of a check-in: the signals and the phase a set of new handoffs and
//! the state call for ([`signals`]), and the message the PM receives ([`message`]).
//! Running a check-in (snapshot, delivery, recording) is [`crate::app::checkin`]'s.

pub mod message;
pub mod signals;

pub use signals::{Signal, SignalKind, undeliverable};
