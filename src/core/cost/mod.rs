//! What the team costs (pure): token usage read from transcripts ([`usage`]), money at
//! a price table ([`price`]), budgets and their decisions ([`budget`]), and what is shown
//! ([`view`]). Reading the files is `store::usage`'s; gathering it all is `app::cost`'s.

pub mod budget;
pub mod price;
pub mod supervisor;
pub mod usage;
pub mod view;
