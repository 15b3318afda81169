//! Money from tokens: a price table per model (USD per million tokens), parsed from
//! TOML text. The defaults ship in templates/prices.toml, dated, because prices change
//! and a user must be able to see how old ours are; the user's config.toml overrides
//! any model under `[prices."<model>"]`. A model with no price has no money figure:
//! tokens are always shown, money only where it is known, never guessed.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::usage::{ByModel, Tokens};

/// USD per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Writes to the prompt cache.
    pub cache_write: f64,
    /// Reads from the prompt cache.
    pub cache_read: f64,
}

impl Price {
    /// The cost of `t` in USD.
    pub fn cost(&self, t: &Tokens) -> f64 {
        (t.input as f64 * self.input
            + t.output as f64 * self.output
            + t.cache_creation as f64 * self.cache_write
            + t.cache_read as f64 * self.cache_read)
            / 1_000_000.0
    }
}

/// Prices by model id or model id prefix.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Prices {
    /// When the defaults were checked (shown beside money figures).
    #[serde(default)]
    pub as_of: Option<String>,
    /// Model id (or the start of one) → price.
    #[serde(default, rename = "prices")]
    pub models: BTreeMap<String, Price>,
    /// Model id (or the start of one) → its context window in tokens.
    #[serde(default)]
    pub context_windows: BTreeMap<String, u64>,
}

impl Prices {
    /// Parse a price table (`as_of = "…"` and `[prices."<model>"]` tables); `what` names
    /// the text in errors.
    pub fn parse(text: &str, what: &str) -> Result<Prices, String> {
        toml::from_str(text).map_err(|e| format!("{what}: {}", e.to_string().trim()))
    }

    /// These prices with `over`'s models replacing ours (the user's config over the defaults).
    pub fn overridden(mut self, over: Prices) -> Prices {
        self.models.extend(over.models);
        self.context_windows.extend(over.context_windows);
        if over.as_of.is_some() {
            self.as_of = over.as_of;
        }
        self
    }

    /// The price of `model`: its exact id, else the longest listed prefix of it (so
    /// `claude-sonnet-4-5` also prices `claude-sonnet-4-5-20250929`).
    pub fn of(&self, model: &str) -> Option<&Price> {
        self.models.get(model).or_else(|| {
            self.models
                .iter()
                .filter(|(k, _)| model.starts_with(k.as_str()))
                .max_by_key(|(k, _)| k.len())
                .map(|(_, p)| p)
        })
    }

    /// The context window of `model`, by the same rule as its price ([`Prices::of`]).
    pub fn window_of(&self, model: &str) -> Option<u64> {
        self.context_windows.get(model).copied().or_else(|| {
            self.context_windows
                .iter()
                .filter(|(k, _)| model.starts_with(k.as_str()))
                .max_by_key(|(k, _)| k.len())
                .map(|(_, w)| *w)
        })
    }

    /// The cost of every model's tokens, or `None` when any model with tokens has no price.
    pub fn cost(&self, by_model: &ByModel) -> Option<f64> {
        let mut usd = 0.0;
        for (m, t) in by_model.iter().filter(|(_, t)| t.total() > 0) {
            usd += self.of(m)?.cost(t);
        }
        Some(usd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: &str = include_str!("../../../templates/prices.toml");

    #[test]
    fn context_windows_are_found_by_prefix_and_overridden() {
        let p = Prices::parse(DEFAULTS, "templates/prices.toml").unwrap();
        assert_eq!(p.window_of("claude-sonnet-4-5-20250929"), Some(200_000));
        assert_eq!(p.window_of("gpt-scripted"), None, "never guessed");
        let user = Prices::parse("[context_windows]\n\"claude-sonnet-4-5\" = 1000000\n", "config").unwrap();
        let p = p.overridden(user);
        assert_eq!(p.window_of("claude-sonnet-4-5-20250929"), Some(1_000_000));
        assert_eq!(p.window_of("claude-sonnet-4-0"), Some(200_000));
    }

    #[test]
    fn the_shipped_table_parses_is_dated_and_prices_current_claude_models() {
        let p = Prices::parse(DEFAULTS, "templates/prices.toml").unwrap();
        assert!(p.as_of.is_some());
        for m in [
            "claude-sonnet-4-5-20250929",
            "claude-opus-4-1-20250805",
            "claude-haiku-4-5",
        ] {
            assert!(p.of(m).is_some(), "{m}");
        }
        // The pinned Claude Code's defaults (`opus`, `sonnet`): priced and windowed as
        // published, not by an older model's prefix.
        assert_eq!(p.of("claude-opus-4-8").map(|x| x.input), Some(5.0));
        assert_eq!(p.of("claude-sonnet-5").map(|x| (x.input, x.output)), Some((2.0, 10.0)));
        assert_eq!(p.window_of("claude-opus-4-8"), Some(1_000_000));
        assert_eq!(p.window_of("claude-sonnet-5"), Some(1_000_000));
        assert_eq!(p.window_of("claude-opus-4-1-20250805"), Some(200_000));
        // The newest Claude Code's default (2.1.332: claude-opus-5-5), at its own rates,
        // not claude-opus-5's; Sonnet 5.5 at Sonnet 5's, which are the same.
        assert_eq!(
            p.of("claude-opus-5-5")
                .map(|x| (x.input, x.output, x.cache_write, x.cache_read)),
            Some((4.0, 20.0, 5.0, 0.20))
        );
        assert_eq!(p.of("claude-opus-5").map(|x| x.input), Some(5.0));
        assert_eq!(
            p.of("claude-sonnet-5-5").map(|x| (x.input, x.output)),
            Some((2.0, 10.0))
        );
        assert_eq!(p.window_of("claude-opus-5-5"), Some(1_000_000));
        assert_eq!(p.window_of("claude-sonnet-5-5"), Some(1_000_000));
    }

    #[test]
    fn money_is_known_only_when_every_model_has_a_price() {
        let p = Prices::parse(
            "as_of = \"2026-01-01\"\n[prices.\"claude-x\"]\ninput = 3.0\noutput = 15.0\ncache_write = 3.75\ncache_read = 0.3\n",
            "t",
        )
        .unwrap();
        let mut by = ByModel::new();
        by.insert(
            "claude-x-1".into(),
            Tokens {
                input: 1_000_000,
                output: 100_000,
                cache_creation: 0,
                cache_read: 1_000_000,
            },
        );
        let usd = p.cost(&by).unwrap();
        assert!((usd - (3.0 + 1.5 + 0.3)).abs() < 1e-9, "{usd}");
        by.insert(
            "other".into(),
            Tokens {
                input: 1,
                ..Default::default()
            },
        );
        assert_eq!(p.cost(&by), None);
        // An override replaces one model and keeps the rest.
        let o = Prices::parse(
            "[prices.\"other\"]\ninput = 1.0\noutput = 1.0\ncache_write = 1.0\ncache_read = 1.0\n",
            "u",
        )
        .unwrap();
        let p = p.overridden(o);
        assert!(p.cost(&by).is_some());
        assert_eq!(p.as_of.as_deref(), Some("2026-01-01"));
        assert!(
            Prices::parse("[prices.x]\ninput = \"free\"\n", "cfg")
                .unwrap_err()
                .starts_with("cfg: ")
        );
    }
}
