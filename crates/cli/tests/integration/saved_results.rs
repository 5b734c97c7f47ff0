//! Results saved under docs/ by earlier versions still load into the typed
//! schema (`psp plot` reads saved sweeps): points of every mode, sweeps, and the
//! server's summaries, including those whose reservation was written as text.

use std::path::{Path, PathBuf};

use psp_metrics::{PointResult, ServerSummary, SweepResult};
use serde_json::Value;

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            json_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

fn is_point(v: &Value) -> bool {
    v.get("mode").is_some() && v.get("overall").is_some()
}

#[test]
fn saved_points_sweeps_and_summaries_load() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let mut files = Vec::new();
    json_files(&docs, &mut files);
    let (mut points, mut sweeps, mut summaries, mut text_reservations) = (0, 0, 0, 0);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let name = f.display();
        let read = |p: &Value| -> PointResult {
            serde_json::from_value(p.clone()).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let mut check = |p: &Value| {
            let point = read(p);
            assert_eq!(point.mode(), p["mode"], "{name}");
            if p["extra"]["reservation"].is_string() {
                // The text reads as the data whose text it is.
                let r = point.extra.reservation().expect("a reservation");
                assert_eq!(r.to_string(), p["extra"]["reservation"], "{name}");
                text_reservations += 1;
            }
            points += 1;
        };
        if v.get("slo").is_some() && v.get("policies").is_some() {
            let sweep: SweepResult =
                serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
            for (policy, saved) in sweep.policies.iter().zip(v["policies"].as_array().unwrap()) {
                assert_eq!(
                    policy.points.len(),
                    saved["points"].as_array().unwrap().len()
                );
            }
            v["policies"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|p| p["points"].as_array().unwrap())
                .for_each(&mut check);
            sweeps += 1;
        } else if is_point(&v) {
            check(&v);
        } else if let Some(list) = v.as_array().filter(|a| a.iter().all(is_point)) {
            list.iter().for_each(&mut check);
        } else if v.get("server_side_latency").is_some() {
            serde_json::from_value::<ServerSummary>(v.clone())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            summaries += 1;
        }
    }
    // The walk found the saved results.
    assert!(sweeps >= 50, "{sweeps} sweeps");
    assert!(points >= 5000, "{points} points");
    assert!(summaries >= 2, "{summaries} server summaries");
    assert!(
        text_reservations >= 100,
        "{text_reservations} text reservations"
    );
}
