//! A reservation as result data: its groups, each with its request types, demand
//! and workers, as the point documents carry it (`reservation`,
//! `reservation_log`, the server summary's `reservation`).
//!
//! The one-line text of `psp_core::Reservation`'s `Display` is derived from the
//! data ([`ReservationLayout`]'s `Display` writes it byte for byte) and parsed
//! back into it: executors that hand over only the text, and documents saved
//! when the reservation was written as text, read as the same data.

use std::fmt;
use std::str::FromStr;

use psp_core::{TypeId, WorkerId, WorkerSet};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One group of a reservation: types of similar service time and their workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReservationGroup {
    /// Its request types (ids), in dispatch order.
    pub types: Vec<TypeId>,
    /// Its CPU demand in workers, to two decimals (the precision of the
    /// reservation's text, which some executors hand over instead of the
    /// reservation, so that every source gives the same data).
    pub demand: f64,
    /// Workers reserved for the group, ascending.
    pub reserved: Vec<WorkerId>,
    /// The group got no worker of its own: `reserved` is the spillway.
    pub spillway: bool,
    /// Workers it may steal when idle (those reserved for longer groups),
    /// ascending.
    pub stealable: Vec<WorkerId>,
}

/// A reservation's groups, shortest first. Serializes as the list of groups;
/// reads that list or the reservation's one-line text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReservationLayout {
    /// The groups, shortest first.
    pub groups: Vec<ReservationGroup>,
}

/// A demand rounded as the reservation's text writes it.
fn two_decimals(demand: f64) -> f64 {
    format!("{demand:.2}")
        .parse()
        .expect("a formatted float parses")
}

impl From<&psp_core::Reservation> for ReservationLayout {
    fn from(r: &psp_core::Reservation) -> Self {
        let groups = r
            .groups
            .iter()
            .enumerate()
            .map(|(g, grp)| ReservationGroup {
                types: r.group_types(g).to_vec(),
                demand: two_decimals(grp.demand),
                reserved: grp.reserved.iter().collect(),
                spillway: grp.on_spillway,
                stealable: grp.stealable.iter().collect(),
            })
            .collect();
        ReservationLayout { groups }
    }
}

/// Writes `workers` as `WorkerSet`'s `Display` does: compact ranges (`0-2,5`),
/// `-` when empty.
fn write_workers(f: &mut fmt::Formatter<'_>, workers: &[WorkerId]) -> fmt::Result {
    if workers.is_empty() {
        return f.write_str("-");
    }
    let mut i = 0;
    while i < workers.len() {
        let mut j = i;
        while j + 1 < workers.len() && workers[j + 1] == workers[j] + 1 {
            j += 1;
        }
        if i > 0 {
            f.write_str(",")?;
        }
        if i == j {
            write!(f, "{}", workers[i])?;
        } else {
            write!(f, "{}-{}", workers[i], workers[j])?;
        }
        i = j + 1;
    }
    Ok(())
}

impl fmt::Display for ReservationLayout {
    /// The text of `psp_core::Reservation`'s `Display`: one
    /// `types [..] demand .. reserved ..[ (spillway)] stealable ..` per group,
    /// separated by `; `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (g, grp) in self.groups.iter().enumerate() {
            if g > 0 {
                f.write_str("; ")?;
            }
            write!(
                f,
                "types {:?} demand {:.2} reserved ",
                grp.types, grp.demand
            )?;
            write_workers(f, &grp.reserved)?;
            if grp.spillway {
                f.write_str(" (spillway)")?;
            }
            f.write_str(" stealable ")?;
            write_workers(f, &grp.stealable)?;
        }
        Ok(())
    }
}

/// Text that is not a reservation's one-line form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a reservation's text ({why}): '{text}'")]
pub struct ParseReservationError {
    /// What did not match.
    pub why: &'static str,
    /// The offending part.
    pub text: String,
}

fn parse_error(why: &'static str, text: &str) -> ParseReservationError {
    ParseReservationError {
        why,
        text: text.to_string(),
    }
}

/// Reads `WorkerSet`'s text (`-`, or ranges such as `0-2,5`).
fn parse_workers(text: &str) -> Result<Vec<WorkerId>, ParseReservationError> {
    if text == "-" {
        return Ok(Vec::new());
    }
    let id = |s: &str| {
        s.parse::<WorkerId>()
            .ok()
            .filter(|&w| usize::from(w) < psp_core::MAX_WORKERS)
            .ok_or_else(|| parse_error("a worker id", s))
    };
    let mut set = WorkerSet::default();
    for part in text.split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (id(a)?, id(b)?),
            None => (id(part)?, id(part)?),
        };
        if first > last {
            return Err(parse_error("a worker range", part));
        }
        (first..=last).for_each(|w| set.insert(w));
    }
    Ok(set.iter().collect())
}

/// Reads one group's text.
fn parse_group(text: &str) -> Result<ReservationGroup, ParseReservationError> {
    let rest = text
        .strip_prefix("types [")
        .ok_or_else(|| parse_error("'types [' first", text))?;
    let (types, rest) = rest
        .split_once("] demand ")
        .ok_or_else(|| parse_error("'] demand '", text))?;
    let types = if types.is_empty() {
        Vec::new()
    } else {
        types
            .split(", ")
            .map(|t| t.parse().map_err(|_| parse_error("a type id", t)))
            .collect::<Result<_, _>>()?
    };
    let (demand, rest) = rest
        .split_once(" reserved ")
        .ok_or_else(|| parse_error("' reserved '", text))?;
    let demand = demand
        .parse()
        .map_err(|_| parse_error("a demand", demand))?;
    let (reserved, stealable) = rest
        .split_once(" stealable ")
        .ok_or_else(|| parse_error("' stealable '", text))?;
    let (reserved, spillway) = match reserved.strip_suffix(" (spillway)") {
        Some(r) => (r, true),
        None => (reserved, false),
    };
    Ok(ReservationGroup {
        types,
        demand,
        reserved: parse_workers(reserved)?,
        spillway,
        stealable: parse_workers(stealable)?,
    })
}

impl FromStr for ReservationLayout {
    type Err = ParseReservationError;

    /// Reads the text [`Display`](fmt::Display) writes (and
    /// `psp_core::Reservation`'s `Display`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.is_empty() {
            return Ok(ReservationLayout::default());
        }
        let groups = text
            .split("; ")
            .map(parse_group)
            .collect::<Result<_, _>>()?;
        Ok(ReservationLayout { groups })
    }
}

impl Serialize for ReservationLayout {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.groups.serialize(s)
    }
}

/// What a document may hold for a reservation: the groups, or the text earlier
/// documents (and executors that hand over only the text) carry.
#[derive(Deserialize)]
#[serde(untagged)]
enum LayoutRepr {
    Groups(Vec<ReservationGroup>),
    Text(String),
}

impl<'de> Deserialize<'de> for ReservationLayout {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match LayoutRepr::deserialize(d)? {
            LayoutRepr::Groups(groups) => Ok(ReservationLayout { groups }),
            LayoutRepr::Text(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use psp_core::{Reservation, ReservationConfig, TypeDemand};

    fn demands(v: &[(f64, f64)]) -> Vec<TypeDemand> {
        v.iter()
            .map(|&(mean, ratio)| TypeDemand { mean, ratio })
            .collect()
    }

    /// Reservations of several shapes: two groups, a spillway group, an absent
    /// type, non-contiguous stealable sets, a static split.
    fn reservations() -> Vec<Reservation> {
        let cfg = ReservationConfig::default();
        let mut v = vec![
            Reservation::compute(&demands(&[(1.0, 0.5), (100.0, 0.5)]), 14, &cfg),
            Reservation::compute(&demands(&[(0.5, 0.995), (500.0, 0.005)]), 16, &cfg),
            Reservation::compute(&demands(&[(1.0, 0.999), (1000.0, 0.001)]), 2, &cfg),
            Reservation::compute(&demands(&[(5.0, 0.3), (1.0, 0.0), (50.0, 0.7)]), 4, &cfg),
            Reservation::compute(
                &demands(&[(1.0, 0.25), (2.0, 0.25), (40.0, 0.25), (700.0, 0.25)]),
                64,
                &cfg,
            ),
        ];
        v.extend(Reservation::static_split(&[1.0, 100.0], 14, 2, 0.5));
        v
    }

    /// The data reproduces the reservation's text byte for byte, and the text
    /// reads back as the same data.
    #[test]
    fn text_is_derived_from_the_data_and_reads_back() {
        for r in reservations() {
            let text = r.to_string();
            let layout = ReservationLayout::from(&r);
            assert_eq!(layout.to_string(), text);
            assert_eq!(text.parse::<ReservationLayout>().unwrap(), layout, "{text}");
        }
        let spill = reservations()
            .into_iter()
            .map(|r| ReservationLayout::from(&r))
            .find(|l| l.groups.iter().any(|g| g.spillway));
        assert!(spill.is_some(), "no spillway group among the examples");
    }

    #[test]
    fn serializes_as_groups_and_reads_groups_or_text() {
        let r = &reservations()[1];
        let layout = ReservationLayout::from(r);
        let json = serde_json::to_value(&layout).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                {"types": [0], "demand": 2.66, "reserved": [0, 1, 2], "spillway": false,
                 "stealable": (3..16).collect::<Vec<_>>()},
                {"types": [1], "demand": 13.34, "reserved": (3..16).collect::<Vec<_>>(),
                 "spillway": false, "stealable": []},
            ]),
            "{layout}"
        );
        assert_eq!(
            serde_json::from_value::<ReservationLayout>(json).unwrap(),
            layout
        );
        let text = serde_json::Value::String(r.to_string());
        assert_eq!(
            serde_json::from_value::<ReservationLayout>(text).unwrap(),
            layout
        );
    }

    #[test]
    fn malformed_text_is_refused() {
        for bad in [
            "types 0 demand 1.00 reserved 0 stealable -",
            "types [0] demand x reserved 0 stealable -",
            "types [0] demand 1.00 reserved 3-1 stealable -",
            "types [0] demand 1.00 reserved 0 stealable 99999",
            "types [0] demand 1.00 reserved 0",
        ] {
            assert!(bad.parse::<ReservationLayout>().is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<ReservationLayout>("42").is_err());
    }
}
