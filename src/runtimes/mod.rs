//! Built-in agent programs: the demo agent that stands in for a model-backed CLI
//! when none is installed. The runtimes' profiles are data, in templates/runtimes/.

pub(crate) mod demo;
