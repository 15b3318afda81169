//! A fleet of hosts and where an agent goes: config.toml's `[hosts.<name>]` (how to reach
//! each, where task folders go there, how many agents it takes, its labels), task.md's
//! `hosts:` / `host-<agent>:` and `placement:`, and the choice — pure, so every rule is a
//! unit test: a host that matches, answers and has a free slot; `spread` takes the emptiest
//! (then the least loaded), `pack` the fullest that still has room. The choice says why.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::RemoteSpec;

/// One `[hosts.<name>]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// `user@host[:port]` or an ssh_config alias.
    pub ssh: String,
    /// Where task folders and worktrees go on that host (the project folder there).
    pub root: String,
    /// How many agents it takes at once.
    #[serde(default = "one")]
    pub slots: u32,
    /// What it offers (`gpu`, `arm64`, `big-disk` …).
    #[serde(default)]
    pub labels: Vec<String>,
}

fn one() -> u32 {
    1
}

/// A host of the fleet, named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Host {
    pub name: String,
    #[serde(flatten)]
    pub config: HostConfig,
}

impl Host {
    /// Where an agent placed here works, as task.md's remote `cwd:` would say it.
    pub fn spec(&self) -> Result<RemoteSpec, String> {
        match super::model::taskmd::parse_cwd(&format!("{}:{}", self.config.ssh, self.config.root)) {
            Ok(super::model::taskmd::CwdSpec::Remote(r)) => Ok(r),
            Ok(_) => Err(format!(
                "host {}: ssh {:?} does not name a host",
                self.name, self.config.ssh
            )),
            Err(e) => Err(format!("host {}: {e}", self.name)),
        }
    }
}

/// The `[hosts.*]` tables, checked: a name of letters, digits, `-` and `_`, a reachable
/// form, an absolute root, at least one slot.
pub fn hosts(tables: BTreeMap<String, HostConfig>) -> Result<Vec<Host>, String> {
    let mut out = Vec::new();
    for (name, config) in tables {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!("[hosts.{name}]: a host name is letters, digits, '-' and '_'"));
        }
        if config.slots == 0 {
            return Err(format!("[hosts.{name}] slots = 0: a host takes at least one agent"));
        }
        if !(config.root.starts_with('/') || config.root.starts_with('~')) {
            return Err(format!(
                "[hosts.{name}] root {:?} must be an absolute path (or start with ~)",
                config.root
            ));
        }
        let h = Host { name, config };
        h.spec()?;
        out.push(h);
    }
    Ok(out)
}

/// Which hosts a task (or one agent) may use: task.md `hosts:` / `host-<agent>:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// Any host of the fleet.
    Any,
    /// These, by name.
    Named(Vec<String>),
    /// Those with this label.
    Label(String),
    /// None: the agent stays here (`local`).
    Local,
}

impl Wanted {
    /// `any`, `local`, `label:<label>` or `name, name …`.
    pub fn parse(v: &str) -> Result<Wanted, String> {
        let v = v.trim();
        match v {
            "" => Err("hosts: is empty; say any, local, label:<label> or host names".into()),
            "any" => Ok(Wanted::Any),
            "local" | "none" => Ok(Wanted::Local),
            _ => match v.strip_prefix("label:") {
                Some(l) if !l.trim().is_empty() => Ok(Wanted::Label(l.trim().to_string())),
                Some(_) => Err("hosts: label: needs a label".into()),
                None => Ok(Wanted::Named(
                    v.split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect(),
                )),
            },
        }
    }

    fn admits(&self, h: &Host) -> bool {
        match self {
            Wanted::Any => true,
            Wanted::Named(n) => n.contains(&h.name),
            Wanted::Label(l) => h.config.labels.iter().any(|x| x == l),
            Wanted::Local => false,
        }
    }
}

/// `placement:`: fill the emptiest host first, or the fullest that has room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    #[default]
    Spread,
    Pack,
}

impl Placement {
    pub fn parse(v: &str) -> Result<Placement, String> {
        match v.trim() {
            "spread" => Ok(Placement::Spread),
            "pack" => Ok(Placement::Pack),
            o => Err(format!("placement: {o:?} is not spread or pack")),
        }
    }
}

/// What is known of a host now.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Standing {
    /// It answered its last look.
    pub reachable: bool,
    /// Agents running there (every supervised task's).
    pub used: u32,
    /// Its 1-minute load average, when read.
    pub load: Option<f64>,
}

/// Where an agent goes, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub host: String,
    pub why: String,
}

fn describe(h: &Host, s: &Standing) -> String {
    let load = s.load.map(|l| format!(", load {l:.2}")).unwrap_or_default();
    format!("{}: {} of {} slots used{load}", h.name, s.used, h.config.slots)
}

/// Choose a host for one agent. `Ok(None)`: it stays local (`hosts: local`, or no fleet
/// wanted). `Err`: no host can take it now, and why each could not (to queue it and say so).
pub fn choose(
    hosts: &[Host],
    standing: &BTreeMap<String, Standing>,
    wanted: &Wanted,
    placement: Placement,
) -> Result<Option<Choice>, String> {
    if *wanted == Wanted::Local {
        return Ok(None);
    }
    let none = Standing::default();
    let mut turned = Vec::new();
    let mut fit: Vec<(&Host, &Standing)> = Vec::new();
    for h in hosts.iter().filter(|h| wanted.admits(h)) {
        let s = standing.get(&h.name).unwrap_or(&none);
        if !s.reachable {
            turned.push(format!("{}: unreachable", h.name));
        } else if s.used >= h.config.slots {
            turned.push(format!("{}: full ({} of {})", h.name, s.used, h.config.slots));
        } else {
            fit.push((h, s));
        }
    }
    if let Wanted::Named(names) = wanted {
        for n in names.iter().filter(|n| !hosts.iter().any(|h| h.name == **n)) {
            turned.push(format!("{n}: not in config.toml's [hosts]"));
        }
    }
    if fit.is_empty() {
        return Err(if turned.is_empty() {
            "no host of the fleet matches".to_string()
        } else {
            turned.join("; ")
        });
    }
    // Fill fraction compared without floats: a/b < c/d ⇔ a·d < c·b.
    let cmp_fill = |(a, sa): &(&Host, &Standing), (b, sb): &(&Host, &Standing)| {
        (u64::from(sa.used) * u64::from(b.config.slots)).cmp(&(u64::from(sb.used) * u64::from(a.config.slots)))
    };
    let cmp_load = |sa: &Standing, sb: &Standing| {
        sa.load
            .unwrap_or(f64::MAX)
            .partial_cmp(&sb.load.unwrap_or(f64::MAX))
            .unwrap_or(std::cmp::Ordering::Equal)
    };
    fit.sort_by(|x, y| {
        let fill = match placement {
            Placement::Spread => cmp_fill(x, y),
            Placement::Pack => cmp_fill(y, x),
        };
        fill.then_with(|| cmp_load(x.1, y.1))
            .then_with(|| x.0.name.cmp(&y.0.name))
    });
    let (h, s) = fit[0];
    let mut why = format!(
        "{} ({})",
        describe(h, s),
        match placement {
            Placement::Spread => "spread: the emptiest host with room",
            Placement::Pack => "pack: the fullest host with room",
        }
    );
    if !turned.is_empty() {
        why.push_str(&format!("; not {}", turned.join(", ")));
    }
    Ok(Some(Choice {
        host: h.name.clone(),
        why,
    }))
}

/// How long a host may stay silent before failover moves its agents, unless task.md says.
pub const FAILOVER_AFTER: std::time::Duration = std::time::Duration::from_secs(120);

/// task.md's `failover:` (on/off, default off) and `failover_after:` (a duration): how long
/// a host may be silent before its agents are started on another; `None` when off.
pub fn failover(on: Option<&str>, after: Option<&str>) -> Result<Option<std::time::Duration>, String> {
    let on = match on.map(|v| v.trim().to_ascii_lowercase()) {
        None => false,
        Some(v) if matches!(v.as_str(), "on" | "yes" | "true") => true,
        Some(v) if matches!(v.as_str(), "off" | "no" | "false") => false,
        Some(v) => return Err(format!("failover: {v:?} is neither on nor off")),
    };
    let after = match after {
        None => FAILOVER_AFTER,
        Some(a) => super::clock::parse_duration(a)
            .ok_or_else(|| format!("failover_after: {a:?} is not a duration (like 90s or 5m)"))?,
    };
    Ok(on.then_some(after))
}

#[cfg(test)]
mod tests {
    #[test]
    fn failover_is_off_unless_asked_and_its_wait_is_read() {
        assert_eq!(super::failover(None, None), Ok(None));
        assert_eq!(super::failover(Some("off"), Some("5s")), Ok(None));
        assert_eq!(super::failover(Some("on"), None), Ok(Some(super::FAILOVER_AFTER)));
        assert_eq!(
            super::failover(Some("On"), Some("90s")),
            Ok(Some(std::time::Duration::from_secs(90)))
        );
        assert!(super::failover(Some("maybe"), None).unwrap_err().contains("maybe"));
        assert!(super::failover(Some("on"), Some("soon")).unwrap_err().contains("soon"));
    }

    use super::*;

    fn host(name: &str, slots: u32, labels: &[&str]) -> Host {
        Host {
            name: name.into(),
            config: HostConfig {
                ssh: format!("me@{name}"),
                root: "/srv/ao".into(),
                slots,
                labels: labels.iter().map(|s| s.to_string()).collect(),
            },
        }
    }

    fn standing(v: &[(&str, bool, u32, Option<f64>)]) -> BTreeMap<String, Standing> {
        v.iter()
            .map(|(n, r, u, l)| {
                (
                    n.to_string(),
                    Standing {
                        reachable: *r,
                        used: *u,
                        load: *l,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn spread_takes_the_emptiest_and_pack_the_fullest_with_room() {
        let hs = [host("a", 4, &[]), host("b", 2, &[]), host("c", 4, &[])];
        let st = standing(&[
            ("a", true, 2, Some(0.5)),
            ("b", true, 1, Some(0.1)),
            ("c", true, 1, Some(0.9)),
        ]);
        let c = choose(&hs, &st, &Wanted::Any, Placement::Spread).unwrap().unwrap();
        assert_eq!(c.host, "c", "1/4 beats 1/2 and 2/4: {c:?}");
        assert!(
            c.why.contains("1 of 4 slots used") && c.why.contains("spread"),
            "{}",
            c.why
        );
        let c = choose(&hs, &st, &Wanted::Any, Placement::Pack).unwrap().unwrap();
        assert!(c.host == "a" || c.host == "b", "2/4 and 1/2 are the fullest: {c:?}");
        assert_eq!(c.host, "b", "equal fill: the less loaded");
    }

    #[test]
    fn unreachable_full_and_unlabelled_hosts_are_passed_over_and_named() {
        let hs = [host("a", 1, &["gpu"]), host("b", 2, &["gpu"]), host("c", 8, &[])];
        let st = standing(&[("a", true, 1, None), ("b", false, 0, None), ("c", true, 0, None)]);
        let e = choose(&hs, &st, &Wanted::Label("gpu".into()), Placement::Spread).unwrap_err();
        assert!(e.contains("a: full (1 of 1)") && e.contains("b: unreachable"), "{e}");
        let c = choose(&hs, &st, &Wanted::Any, Placement::Spread).unwrap().unwrap();
        assert_eq!(c.host, "c");
        assert!(
            c.why.contains("not a: full") && c.why.contains("b: unreachable"),
            "{}",
            c.why
        );
        let e = choose(&hs, &st, &Wanted::Named(vec!["zz".into()]), Placement::Spread).unwrap_err();
        assert!(e.contains("zz: not in config.toml"), "{e}");
        assert_eq!(choose(&hs, &st, &Wanted::Local, Placement::Spread).unwrap(), None);
    }

    #[test]
    fn settings_read_and_mistakes_are_named() {
        assert_eq!(Wanted::parse("any").unwrap(), Wanted::Any);
        assert_eq!(Wanted::parse("label: gpu").unwrap(), Wanted::Label("gpu".into()));
        assert_eq!(
            Wanted::parse("a, b").unwrap(),
            Wanted::Named(vec!["a".into(), "b".into()])
        );
        assert!(Wanted::parse("label:").is_err());
        assert_eq!(Placement::parse("pack").unwrap(), Placement::Pack);
        assert!(Placement::parse("random").is_err());
        let t: BTreeMap<String, HostConfig> =
            toml::from_str("[a]\nssh = \"me@h1:2222\"\nroot = \"/srv\"\nslots = 3\nlabels = [\"gpu\"]\n").unwrap();
        let hs = hosts(t).unwrap();
        let spec = hs[0].spec().unwrap();
        assert_eq!(
            (spec.host.as_str(), spec.port, spec.path.as_str()),
            ("h1", Some(2222), "/srv")
        );
        let bad: BTreeMap<String, HostConfig> =
            toml::from_str("[a]\nssh = \"-oProxyCommand=x\"\nroot = \"/srv\"\n").unwrap();
        assert!(hosts(bad).is_err());
        let bad: BTreeMap<String, HostConfig> = toml::from_str("[a]\nssh = \"h\"\nroot = \"srv\"\n").unwrap();
        assert!(hosts(bad).unwrap_err().contains("absolute"));
        let bad: BTreeMap<String, HostConfig> =
            toml::from_str("[a]\nssh = \"h\"\nroot = \"/srv\"\nslots = 0\n").unwrap();
        assert!(hosts(bad).unwrap_err().contains("slots = 0"));
    }
}
