//! Policy parameters as data. Each policy's configuration lists its parameters
//! once, in a table of [`Param`]s beside the policy ([`Params::PARAMS`]): the
//! name, how it is written, a one-line doc, the range or the accepted names, and
//! how it reads and writes the configuration's field. That table alone drives
//! parsing `name:key=value,...`, the range checks, the canonical name
//! (`PolicySpec`'s `Display`), the one-line errors and the reference's parameter
//! list ([`ParamInfo`]).
//!
//! Every numeric parameter is checked here in one way: NaN, infinities and
//! out-of-range values are errors that name the parameter and its range, never
//! silently capped.

use std::fmt;

use super::PolicyError;
use crate::request::Nanos;

/// The valid values of a numeric parameter: `[lo, hi]`, or `(lo, hi]` when
/// `lo_open`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamRange {
    /// Lower bound.
    pub lo: f64,
    /// Whether `lo` itself is excluded.
    pub lo_open: bool,
    /// Upper bound (included).
    pub hi: f64,
    /// Unit, for messages (`" us"` or empty).
    pub unit: &'static str,
}

impl ParamRange {
    /// `[lo, hi]`.
    pub const fn closed(lo: f64, hi: f64) -> Self {
        Self {
            lo,
            lo_open: false,
            hi,
            unit: "",
        }
    }

    /// `(0, hi]`.
    pub const fn positive(hi: f64) -> Self {
        Self {
            lo: 0.0,
            lo_open: true,
            hi,
            unit: "",
        }
    }

    /// Whether `v` is in the range (NaN never is).
    pub fn contains(&self, v: f64) -> bool {
        (if self.lo_open {
            v > self.lo
        } else {
            v >= self.lo
        }) && v <= self.hi
    }
}

impl fmt::Display for ParamRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let open = if self.lo_open { '(' } else { '[' };
        write!(f, "{open}{}, {}]{}", self.lo, self.hi, self.unit)
    }
}

/// Largest duration-like parameter (quantum, preemption cost), in µs: 1 s.
pub const MAX_US: f64 = 1e6;
/// Largest multiple of a mean service time (EDF's k, TS's target, DARC's delay).
pub const MAX_FACTOR: f64 = 1e6;
/// A time slice, in µs: below 0.1 µs the simulator would step through slices of
/// a few instructions.
pub const QUANTUM_US: ParamRange = ParamRange::closed(0.1, MAX_US);
/// Worker time lost per preemption, in µs.
pub const COST_US: ParamRange = ParamRange::closed(0.0, MAX_US);
/// A request count bounded by a queue (queues hold at most 2^20).
pub const MAX_QUEUE_LEN: f64 = 1_048_576.0;
/// `on`/`off` switches.
pub const ON_OFF: &[(&str, bool)] = &[("on", true), ("off", false)];
/// The `mech` parameter's doc (`synergy`, `tq`).
pub const MECH_DOC: &str = "the simulated preemption mechanism";
/// The `mech` parameter's doc where it replaces a `cost` (`ts`, `concord`).
pub const MECH_OVER_COST_DOC: &str =
    "the simulated preemption mechanism, whose cost replaces `cost`";

/// How a parameter is written after `name:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `key=value`.
    Keyed,
    /// Its value alone, first, and required (`darc-static:2`, `ts-block:4`).
    Leading,
    /// One of its names alone (`ts:sq`).
    Bare,
}

/// What a parameter accepts.
#[derive(Debug, Clone, PartialEq)]
pub enum Accepts {
    /// A real number in the range.
    Real(ParamRange),
    /// A whole number in the range.
    Integer(ParamRange),
    /// One of these names.
    Names(Vec<&'static str>),
}

impl fmt::Display for Accepts {
    /// What follows "must be" in an error.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Accepts::Real(r) => write!(f, "in {r}"),
            Accepts::Integer(r) => write!(f, "an integer in {r}"),
            Accepts::Names(n) if n.len() == 2 => write!(f, "{} or {}", n[0], n[1]),
            Accepts::Names(n) => write!(f, "one of {}", n.join(", ")),
        }
    }
}

/// How one parameter's text is checked and read into a configuration `C`,
/// and written back.
pub trait Value<C> {
    /// Sets the field from `text`; `false` (nothing changed) when `text` is not
    /// accepted.
    fn set(&self, c: &mut C, text: &str) -> bool;
    /// The field as written; `None` when unset (an optional field).
    fn get(&self, c: &C) -> Option<String>;
    /// What [`Value::set`] accepts.
    fn accepts(&self) -> Accepts;
}

/// A real number in `range`.
pub struct Real<C: 'static> {
    /// The valid values.
    pub range: ParamRange,
    /// Reads the field.
    pub get: fn(&C) -> f64,
    /// Writes the field.
    pub set: fn(&mut C, f64),
}

impl<C> Value<C> for Real<C> {
    fn set(&self, c: &mut C, text: &str) -> bool {
        match text.parse::<f64>() {
            Ok(v) if self.range.contains(v) => {
                (self.set)(c, v);
                true
            }
            _ => false,
        }
    }

    fn get(&self, c: &C) -> Option<String> {
        Some((self.get)(c).to_string())
    }

    fn accepts(&self) -> Accepts {
        Accepts::Real(self.range)
    }
}

/// A whole number in `range`.
pub struct Count<C: 'static> {
    /// The valid values.
    pub range: ParamRange,
    /// Reads the field.
    pub get: fn(&C) -> u64,
    /// Writes the field (the range keeps it within the field's type).
    pub set: fn(&mut C, u64),
}

impl<C> Value<C> for Count<C> {
    fn set(&self, c: &mut C, text: &str) -> bool {
        match text.parse::<u64>() {
            Ok(v) if self.range.contains(v as f64) => {
                (self.set)(c, v);
                true
            }
            _ => false,
        }
    }

    fn get(&self, c: &C) -> Option<String> {
        Some((self.get)(c).to_string())
    }

    fn accepts(&self) -> Accepts {
        Accepts::Integer(self.range)
    }
}

/// A duration written in µs (`range`, in µs) and kept in whole nanoseconds.
pub struct Micros<C: 'static> {
    /// The valid values, in µs.
    pub range: ParamRange,
    /// Reads the field, in ns.
    pub get: fn(&C) -> Nanos,
    /// Writes the field, in ns.
    pub set: fn(&mut C, Nanos),
}

impl<C> Value<C> for Micros<C> {
    fn set(&self, c: &mut C, text: &str) -> bool {
        match text.parse::<f64>() {
            Ok(us) if self.range.contains(us) => {
                (self.set)(c, (us * 1e3).round() as Nanos);
                true
            }
            _ => false,
        }
    }

    fn get(&self, c: &C) -> Option<String> {
        Some(((self.get)(c) as f64 / 1e3).to_string())
    }

    fn accepts(&self) -> Accepts {
        Accepts::Real(ParamRange {
            unit: " us",
            ..self.range
        })
    }
}

/// One of the named `options`.
pub struct Pick<C: 'static, T: 'static> {
    /// Every accepted name with its value.
    pub options: &'static [(&'static str, T)],
    /// Reads the field (`None`: unset, for an optional field).
    pub get: fn(&C) -> Option<T>,
    /// Writes the field.
    pub set: fn(&mut C, T),
}

impl<C, T: Copy + PartialEq> Value<C> for Pick<C, T> {
    fn set(&self, c: &mut C, text: &str) -> bool {
        match self.options.iter().find(|(name, _)| *name == text) {
            Some(&(_, v)) => {
                (self.set)(c, v);
                true
            }
            None => false,
        }
    }

    fn get(&self, c: &C) -> Option<String> {
        let v = (self.get)(c)?;
        let (name, _) = self.options.iter().find(|(_, o)| *o == v)?;
        Some((*name).to_string())
    }

    fn accepts(&self) -> Accepts {
        Accepts::Names(self.options.iter().map(|(name, _)| *name).collect())
    }
}

/// One parameter of a configuration `C`.
pub struct Param<C: 'static> {
    /// Its name (`quantum`; for a leading one, the placeholder: `N`).
    pub key: &'static str,
    /// How it is written.
    pub form: Form,
    /// What it sets, in one line.
    pub doc: &'static str,
    /// Its values, and the field they go to.
    pub value: &'static dyn Value<C>,
    /// A time constant of the policy's decisions (a quantum, a threshold),
    /// whose default follows a workload's time scale
    /// ([`Configure::scale_times`]); a mechanism's cost is the machine's and
    /// does not.
    pub workload_time: bool,
}

impl<C> Param<C> {
    /// A `key=value` parameter.
    pub const fn keyed(key: &'static str, doc: &'static str, value: &'static dyn Value<C>) -> Self {
        Self {
            key,
            form: Form::Keyed,
            doc,
            value,
            workload_time: false,
        }
    }

    /// The required first parameter, written as its value alone.
    pub const fn leading(
        key: &'static str,
        doc: &'static str,
        value: &'static dyn Value<C>,
    ) -> Self {
        Self {
            key,
            form: Form::Leading,
            doc,
            value,
            workload_time: false,
        }
    }

    /// A choice written as one of its names alone.
    pub const fn bare(key: &'static str, doc: &'static str, value: &'static dyn Value<C>) -> Self {
        Self {
            key,
            form: Form::Bare,
            doc,
            value,
            workload_time: false,
        }
    }

    /// The same parameter, as a time constant whose default follows a
    /// workload's time scale.
    pub const fn in_workload_time(self) -> Self {
        Self {
            workload_time: true,
            ..self
        }
    }

    /// `key must be <what it accepts>, not 'text'`.
    fn rejects(&self, text: &str) -> String {
        format!(
            "{} must be {}, not '{text}'",
            self.key,
            self.value.accepts()
        )
    }
}

/// A policy configuration with its parameter table.
pub trait Params: Sized + 'static {
    /// Every parameter, in the order of the canonical name (a leading one first).
    const PARAMS: &'static [Param<Self>];
}

/// One parameter as documented: a row of the reference's list (docs/guide/reference.md).
#[derive(Debug, Clone, PartialEq)]
pub struct ParamInfo {
    /// The policy's name.
    pub policy: &'static str,
    /// The parameter's name.
    pub key: &'static str,
    /// How it is written.
    pub form: Form,
    /// What it accepts.
    pub accepts: Accepts,
    /// Its value in the policy's defaults (`None`: required, or unset).
    pub default: Option<String>,
    /// What it sets.
    pub doc: &'static str,
}

/// A configuration read and written through its [`Params`] table; object-safe,
/// so that `PolicySpec` reaches every policy's configuration through its
/// registry entry.
pub trait Configure {
    /// Reads `args` (the comma-separated pieces after `name:` of `spec`) over the
    /// current values.
    ///
    /// # Errors
    /// A missing leading parameter, an unknown one, or a value it does not
    /// accept, naming the parameter and what it accepts.
    fn read(&mut self, spec: &str, args: &[&str]) -> Result<(), PolicyError>;

    /// Each parameter's value as written, in table order (`None`: unset).
    fn values(&self) -> Vec<Option<String>>;

    /// The parameters of the canonical name: a leading one always, the others
    /// where they differ from `base` (the values of the policy's defaults).
    fn written(&self, base: &[Option<String>]) -> Vec<String>;

    /// The table, with `self`'s values as the defaults.
    fn describe(&self, policy: &'static str) -> Vec<ParamInfo>;

    /// The leading parameter's key, if the table has one.
    fn leading_key(&self) -> Option<&'static str>;

    /// Multiplies each time constant of the policy's decisions (parameters
    /// marked [`Param::in_workload_time`]) by `factor`: a workload slowed down
    /// `factor` times keeps its proportions to the policy's quanta and
    /// thresholds.
    ///
    /// # Errors
    /// A value the factor puts out of its parameter's range, named.
    fn scale_times(&mut self, factor: f64) -> Result<(), String>;
}

impl<C: Params> Configure for C {
    fn read(&mut self, spec: &str, args: &[&str]) -> Result<(), PolicyError> {
        let bad = |msg: String| PolicyError::BadParameter {
            policy: spec.to_string(),
            msg,
        };
        let table = C::PARAMS;
        let lead = table.iter().find(|p| p.form == Form::Leading);
        if let Some(lead) = lead {
            // The one piece without `=`, wherever it is.
            let name = spec.split(':').next().unwrap_or(spec);
            let mut alone = args.iter().filter(|a| !a.contains('='));
            let (Some(text), None) = (alone.next(), alone.next()) else {
                return Err(bad(format!("expects {name}:{} ({})", lead.key, lead.doc)));
            };
            if !lead.value.set(self, text) {
                return Err(bad(lead.rejects(text)));
            }
        }
        for &arg in args {
            let Some((key, text)) = arg.split_once('=') else {
                match table.iter().find(|p| p.form == Form::Bare) {
                    _ if lead.is_some() => continue,
                    Some(p) if p.value.set(self, arg) => continue,
                    Some(p) => {
                        return Err(bad(format!(
                            "'{arg}' is neither key=value nor a value of {} ({})",
                            p.key,
                            p.value.accepts()
                        )));
                    }
                    None => return Err(bad(format!("'{arg}' is not key=value"))),
                }
            };
            let (key, text) = (key.trim(), text.trim());
            let keyed = || table.iter().filter(|p| p.form == Form::Keyed);
            let Some(p) = keyed().find(|p| p.key == key) else {
                let known: Vec<&str> = keyed().map(|p| p.key).collect();
                return Err(bad(format!(
                    "unknown parameter '{key}' (known: {})",
                    known.join(", ")
                )));
            };
            if !p.value.set(self, text) {
                return Err(bad(p.rejects(text)));
            }
        }
        Ok(())
    }

    fn values(&self) -> Vec<Option<String>> {
        C::PARAMS.iter().map(|p| p.value.get(self)).collect()
    }

    fn written(&self, base: &[Option<String>]) -> Vec<String> {
        let mut out = Vec::new();
        for ((p, v), b) in C::PARAMS.iter().zip(self.values()).zip(base) {
            let Some(v) = v else { continue };
            match p.form {
                Form::Leading => out.push(v),
                _ if Some(&v) == b.as_ref() => {}
                Form::Bare => out.push(v),
                Form::Keyed => out.push(format!("{}={v}", p.key)),
            }
        }
        out
    }

    fn describe(&self, policy: &'static str) -> Vec<ParamInfo> {
        C::PARAMS
            .iter()
            .map(|p| ParamInfo {
                policy,
                key: p.key,
                form: p.form,
                accepts: p.value.accepts(),
                default: (p.form != Form::Leading)
                    .then(|| p.value.get(self))
                    .flatten(),
                doc: p.doc,
            })
            .collect()
    }

    fn leading_key(&self) -> Option<&'static str> {
        C::PARAMS
            .iter()
            .find(|p| p.form == Form::Leading)
            .map(|p| p.key)
    }

    fn scale_times(&mut self, factor: f64) -> Result<(), String> {
        for p in C::PARAMS.iter().filter(|p| p.workload_time) {
            let Some(v) = p.value.get(self).and_then(|t| t.parse::<f64>().ok()) else {
                continue;
            };
            let scaled = (v * factor).to_string();
            if !p.value.set(self, &scaled) {
                return Err(format!(
                    "{} = {v} times the workload's time scale {factor} is {scaled}; it must be {}",
                    p.key,
                    p.value.accepts()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PolicySpec, parameters};

    #[test]
    fn every_table_is_well_formed() {
        let params = parameters();
        for (i, p) in params.iter().enumerate() {
            let own = || params.iter().filter(|q| q.policy == p.policy);
            assert_eq!(
                own().filter(|q| q.key == p.key).count(),
                1,
                "{}: two {}",
                p.policy,
                p.key
            );
            if p.form == Form::Leading {
                let first = own().next().expect("p itself");
                assert_eq!(first.key, p.key, "{}: {} is not first", p.policy, p.key);
                assert!(p.key.chars().all(|c| c.is_ascii_uppercase()), "{}", p.key);
            }
            assert!(
                own().filter(|q| q.form == Form::Bare).count() <= 1,
                "{}",
                p.policy
            );
            assert!(
                !p.doc.is_empty() && !p.doc.contains('\n'),
                "{}: {}",
                p.policy,
                p.key
            );
            // Every default is a value the parameter accepts.
            let ok = match (&p.accepts, p.default.as_deref()) {
                (_, None) => p.form == Form::Leading || p.key == "mech",
                (Accepts::Names(n), Some(d)) => n.contains(&d),
                (Accepts::Real(r) | Accepts::Integer(r), Some(d)) => {
                    d.parse::<f64>().is_ok_and(|v| r.contains(v))
                }
            };
            assert!(
                ok,
                "{}: {} defaults to {:?} ({i})",
                p.policy, p.key, p.default
            );
        }
    }

    /// The numeric parameters and their ranges.
    fn numeric() -> Vec<(ParamInfo, ParamRange)> {
        parameters()
            .into_iter()
            .filter_map(|p| match p.accepts {
                Accepts::Real(r) | Accepts::Integer(r) => Some((p, r)),
                Accepts::Names(_) => None,
            })
            .collect()
    }

    /// The policy string setting `p` to `v` (a leading parameter, if the
    /// policy has one, at its lowest value otherwise).
    fn with_param(p: &ParamInfo, v: &str) -> String {
        let lead = numeric()
            .into_iter()
            .find(|(q, _)| q.policy == p.policy && q.form == Form::Leading);
        match (p.form, lead) {
            (Form::Leading | Form::Bare, _) => format!("{}:{v}", p.policy),
            (Form::Keyed, Some((_, r))) => format!("{}:{},{}={v}", p.policy, r.lo, p.key),
            (Form::Keyed, None) => format!("{}:{}={v}", p.policy, p.key),
        }
    }

    #[test]
    fn every_numeric_parameter_rejects_nan_infinities_and_out_of_range_values() {
        let params = numeric();
        assert!(params.len() > 30, "{} numeric parameters", params.len());
        for (p, range) in params {
            let below = if range.lo_open {
                range.lo
            } else {
                range.lo - 1.0
            };
            for v in [
                "nan".to_string(),
                "NaN".into(),
                "inf".into(),
                "-inf".into(),
                "1e300".into(),
                "-1e300".into(),
                format!("{below}"),
                format!("{}", range.hi * 1.5 + 1.0),
                "x".into(),
                String::new(),
            ] {
                if v.is_empty() && p.form == Form::Leading {
                    continue; // an empty leading parameter is a missing one
                }
                let s = with_param(&p, &v);
                match s.parse::<PolicySpec>() {
                    Err(PolicyError::BadParameter { msg, .. }) => {
                        assert!(
                            msg.contains(p.key) && msg.contains(&p.accepts.to_string()),
                            "{s}: '{msg}' names neither the parameter nor its range"
                        );
                    }
                    other => panic!("{s}: expected a range error, got {other:?}"),
                }
            }
            for v in [
                range.hi,
                if range.lo_open {
                    range.hi / 2.0
                } else {
                    range.lo
                },
            ] {
                let s = with_param(&p, &format!("{v}"));
                let spec: PolicySpec = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
                assert_eq!(spec.to_string().parse::<PolicySpec>(), Ok(spec), "{s}");
            }
        }
    }

    #[test]
    fn every_named_value_is_accepted_and_round_trips() {
        for p in parameters() {
            let Accepts::Names(names) = &p.accepts else {
                continue;
            };
            for name in names {
                let s = with_param(&p, name);
                let spec: PolicySpec = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
                let shown = spec.to_string();
                assert_eq!(shown.parse::<PolicySpec>(), Ok(spec), "{s}");
                let at_default = p.default.as_deref() == Some(name);
                let names_it = shown.split([':', ',', '=']).any(|w| w == *name);
                assert_eq!(names_it, !at_default, "{s} shows as {shown}");
            }
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn value() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<f64>().prop_map(|v| format!("{v}")),
                (-1e7f64..1e7).prop_map(|v| format!("{v}")),
                any::<u64>().prop_map(|v| v.to_string()),
                (0u64..200).prop_map(|v| v.to_string()),
                "[a-z0-9.:-]{0,6}",
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Any value for any parameter is either rejected naming the
            /// parameter, or accepted within its range and round-trips.
            #[test]
            fn parameters_are_in_range_or_rejected(i in 0..numeric().len(), v in value()) {
                let (p, range) = &numeric()[i];
                let s = with_param(p, &v);
                match s.parse::<PolicySpec>() {
                    Ok(spec) => {
                        let x: f64 = v.parse().expect("accepted values are numbers");
                        prop_assert!(range.contains(x), "{} accepted out of {}", s, range);
                        prop_assert_eq!(spec.to_string().parse::<PolicySpec>(), Ok(spec));
                    }
                    Err(PolicyError::BadParameter { msg, .. }) => {
                        prop_assert!(msg.contains(p.key), "{}: {}", s, msg);
                    }
                    Err(e) => prop_assert!(false, "{}: {}", s, e),
                }
            }
        }
    }
}
