//! The `task` binary: everything lives in the library; see `agent_orchestrator::cli`.

fn main() {
    std::process::exit(agent_orchestrator::cli::main());
}
