//! The `task` binary: everything lives in the library; see `agent_orchestrator::cli`.

/// The daemon's work is many small, short-lived allocations made on one tokio worker and
/// freed on another (states copied and dropped at every check-in and liveness look);
/// glibc's allocator spent a fifth of the 360-agent soak daemon's samples on them
/// (consolidating and unlinking chunks); with mimalloc, 13 %.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(agent_orchestrator::cli::main());
}
