//! The hub-and-spoke protocol of seeds 000–003, enforced by the supervisor rather
//! than only written into prompts: who may spawn ([`gate`]), which agents a task
//! has and whom each may recommend ([`roster`]), one active agent per type
//! ([`lane`]), and what a handoff's structured result means ([`results`]).

pub mod gate;
pub mod lane;
pub mod reason;
pub mod results;
pub mod roster;
