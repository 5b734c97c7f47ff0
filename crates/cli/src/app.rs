//! The application a command serves or drives: `--app` and its options, shared
//! by `psp run`, `psp serve`, `psp load` and `psp profile`. A workload file may
//! name its application (`app = "kv"`, as `psp profile` writes it): then
//! `--app` may be left out, and must agree when given.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use psp_apps::{AppConfig, AppOptions, KvConfig};
use psp_sim::Workload;
use serde::Deserialize;

/// `or` for a group of optional flags (every field an `Option`) that a
/// file may also carry: the flags' values, each missing one taken from the
/// file's. One definition for every such group, so a new field is one name
/// in the list.
macro_rules! or_each_missing {
    ($group:ident { $($field:ident),+ $(,)? }) => {
        impl $group {
            /// These values, each missing one taken from `file`.
            pub fn or(&self, file: &$group) -> $group {
                $group {
                    $($field: self.$field.clone().or_else(|| file.$field.clone()),)+
                }
            }
        }
    };
}
pub(crate) use or_each_missing;

/// `--app` and the applications' options (every field optional, so that
/// `psp serve` can take them from its `--config` file too, by the same names
/// with underscores).
#[derive(Args, Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AppArgs {
    // The help names the registry's applications (`app_help`).
    #[arg(long, help = app_help())]
    pub app: Option<String>,
    /// kv: the database's directory [default: a fresh temporary directory,
    /// removed at exit].
    #[arg(long)]
    pub kv_path: Option<PathBuf>,
    /// kv: keys loaded at start (and drawn by generated requests) [default: 5000].
    #[arg(long, allow_hyphen_values = true)]
    pub kv_keys: Option<u64>,
    /// kv: bytes of each loaded value and generated PUT [default: 64].
    #[arg(long, allow_hyphen_values = true)]
    pub kv_value_bytes: Option<u64>,
    /// kv: most keys one SCAN visits, whatever it asks [default: 10 x
    /// --kv-keys, at least 10000].
    #[arg(long, allow_hyphen_values = true)]
    pub kv_max_scan: Option<u64>,
    /// tpcc: warehouses (scale factor) [default: 1].
    #[arg(long, allow_hyphen_values = true)]
    pub tpcc_warehouses: Option<u64>,
}

/// `--app`'s help: every registered application, from the registry.
fn app_help() -> String {
    format!(
        "Application: {} [default: the workload's `app`, else spin; `psp profile` needs kv or tpcc]",
        psp_apps::apps_about()
    )
}

or_each_missing!(AppArgs {
    app,
    kv_path,
    kv_keys,
    kv_value_bytes,
    kv_max_scan,
    tpcc_warehouses
});

impl AppArgs {
    /// The application for `workload`, its options checked (nothing opened):
    /// `--app`, else the workload's `app`, else spin (whose requests may ask
    /// for at most `max_service_ns`); each option from its flag, else the
    /// workload's `[app_options]`, else its default.
    ///
    /// # Errors
    /// An unknown application, one that disagrees with the workload's, an
    /// option out of range, or a workload type that names no operation of the
    /// application.
    pub fn config(&self, workload: &Workload, max_service_ns: u64) -> Result<AppConfig> {
        let mut options = self.options(max_service_ns);
        for (name, value) in workload_app_options(workload)? {
            if options.count(&name).is_none() {
                options = options.with_count(&name, Some(value));
            }
        }
        self.config_of(workload, &options)
    }

    /// This command line's application options, by the names workload
    /// files give them, requests capped at `max_service_ns`.
    pub fn options(&self, max_service_ns: u64) -> AppOptions {
        AppOptions::new(max_service_ns)
            .with_path("kv_path", self.kv_path.clone())
            .with_count("kv_keys", self.kv_keys)
            .with_count("kv_value_bytes", self.kv_value_bytes)
            .with_count("kv_max_scan", self.kv_max_scan)
            .with_count("tpcc_warehouses", self.tpcc_warehouses)
    }

    /// The key-value store's options (`--kv-*`), defaults filled in.
    pub fn kv_config(&self) -> KvConfig {
        KvConfig::from_options(&self.options(u64::MAX))
    }

    fn config_of(&self, workload: &Workload, options: &AppOptions) -> Result<AppConfig> {
        let name = match (&self.app, &workload.app) {
            (Some(a), Some(w)) if !a.eq_ignore_ascii_case(w) => {
                bail!("--app {a}, but workload '{}' is for app {w}", workload.name)
            }
            (Some(a), _) => a.to_ascii_lowercase(),
            (None, Some(w)) => w.to_ascii_lowercase(),
            (None, None) => "spin".into(),
        };
        let app = match psp_apps::find(&name) {
            Some(entry) => (entry.configure)(options),
            None if self.app.is_none() => bail!(
                "workload '{}' is for app '{name}', which is not one of {}",
                workload.name,
                psp_apps::app_names().join(", ")
            ),
            None => return Err(psp_apps::AppError::Unknown(name).into()),
        };
        app.validate()?;
        app.bind(&type_names(workload))?;
        Ok(app)
    }
}

/// The application options `workload` carries (`[app_options]`, as `psp
/// profile` writes them: what the measured service times depend on), each
/// one some registered application's.
fn workload_app_options(workload: &Workload) -> Result<Vec<(String, u64)>> {
    let Some(table) = &workload.app_options else {
        return Ok(Vec::new());
    };
    let known: Vec<&str> = psp_apps::APPS
        .iter()
        .flat_map(|e| e.workload_options.iter().copied())
        .collect();
    let bad = |message: String| {
        anyhow::anyhow!(
            "workload '{}': [app_options]: {}",
            workload.name,
            message.replace('\n', " ")
        )
    };
    let mut options = Vec::with_capacity(table.len());
    for (name, value) in table {
        if !known.contains(&name.as_str()) {
            return Err(bad(unknown_field(name, &known)));
        }
        let value: u64 = value
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| bad(e.message().to_string()))?;
        options.push((name.clone(), value));
    }
    Ok(options)
}

/// serde's words for a field not in `expected`.
fn unknown_field(name: &str, expected: &[&str]) -> String {
    let quoted: Vec<String> = expected.iter().map(|e| format!("`{e}`")).collect();
    match quoted.as_slice() {
        [] => format!("unknown field `{name}`, there are no fields"),
        [one] => format!("unknown field `{name}`, expected {one}"),
        [a, b] => format!("unknown field `{name}`, expected {a} or {b}"),
        all => format!("unknown field `{name}`, expected one of {}", all.join(", ")),
    }
}

/// A workload's type names, in type-id order.
pub fn type_names(workload: &Workload) -> Vec<String> {
    workload.types.iter().map(|t| t.name.clone()).collect()
}

/// The workload's declared mean service times (ns), in type order.
pub(crate) fn declared(workload: &Workload) -> Vec<Option<f64>> {
    workload
        .type_infos()
        .iter()
        .map(|t| t.mean_service_ns)
        .collect()
}
