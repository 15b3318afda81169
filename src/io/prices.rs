//! The price table: the dated defaults in templates/prices.toml, with the user's
//! `[prices."<model>"]` tables from config.toml over them.

use std::sync::Arc;

use crate::core::cost::price::Prices;

const DEFAULTS: &str = include_str!("../../templates/prices.toml");

/// The prices in force. A config file that cannot be read or parsed leaves the defaults,
/// with a warning naming the file: a typo must not hide every money figure. Shared, not
/// copied: every check-in prices its team, and a copy of the table each time showed.
pub fn load() -> Arc<Prices> {
    // Immutable once parsed: the shipped table is read once per process, not per look.
    static PARSED: std::sync::LazyLock<Arc<Prices>> = std::sync::LazyLock::new(|| {
        Arc::new(Prices::parse(DEFAULTS, "templates/prices.toml").expect("the shipped price table parses"))
    });
    let Some(path) = crate::io::config::path() else {
        return PARSED.clone();
    };
    // Parsed once per version of the file: every check-in prices what its team used.
    let parsed = crate::store::memo::get::<UserPrices>().0.get(
        &path,
        |e| e.to_string(),
        |bytes| {
            let text = String::from_utf8_lossy(bytes);
            Ok::<_, String>(
                Prices::parse(&text, &path.display().to_string())
                    .map(|user| Arc::new(Prices::clone(&PARSED).overridden(user))),
            )
        },
    );
    match parsed {
        Ok(Some(Ok(prices))) => prices,
        Ok(Some(Err(e))) => {
            tracing::warn!(error = %e, "the [prices] in the config cannot be used; the default prices apply (fix the file)");
            PARSED.clone()
        }
        Ok(None) | Err(_) => PARSED.clone(),
    }
}

/// The prices in force by the version of config.toml they were read from (a process
/// memo: [`crate::store::memo`]); a file whose [prices] do not parse is kept as that error,
/// so it is warned of again at each use, not parsed again.
#[derive(Default)]
struct UserPrices(crate::store::parsed::Cache<Result<Arc<Prices>, String>>);

impl crate::store::memo::Memo for UserPrices {
    const NAME: &'static str = "prices from the config";
    fn entries(&self) -> usize {
        self.0.len()
    }
}
