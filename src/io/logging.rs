//! Diagnostics via tracing, to stderr. `RUST_LOG` wins over `-v`. Colours only on a
//! terminal: the daemon's stderr is its log file, read with grep and less.

use tracing_subscriber::EnvFilter;

/// Install the stderr subscriber; `verbose` is the count of `-v` flags.
pub fn init(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
