//! The price table: the dated defaults in templates/prices.toml, with the user's
//! `[prices."<model>"]` tables from config.toml over them.

use crate::core::cost::price::Prices;

const DEFAULTS: &str = include_str!("../../templates/prices.toml");

/// The prices in force. A config file that cannot be read or parsed leaves the defaults,
/// with a warning naming the file: a typo must not hide every money figure.
pub fn load() -> Prices {
    // Immutable once parsed: the shipped table is read once per process, not per look.
    static PARSED: std::sync::LazyLock<Prices> = std::sync::LazyLock::new(|| {
        Prices::parse(DEFAULTS, "templates/prices.toml").expect("the shipped price table parses")
    });
    let defaults = PARSED.clone();
    let Some(path) = crate::io::runtime::config_path() else {
        return defaults;
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return defaults;
    };
    match Prices::parse(&text, &path.display().to_string()) {
        Ok(user) => defaults.overridden(user),
        Err(e) => {
            tracing::warn!(error = %e, "the [prices] in the config cannot be used; the default prices apply (fix the file)");
            defaults
        }
    }
}
