//! The hub-and-spoke protocol of seeds 000–003, enforced by the supervisor rather
//! than only written into prompts. So far: the spawn gate ([`gate`]).

pub mod gate;
