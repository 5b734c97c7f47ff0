//! Microbenchmarks of DARC's reservation (Algorithm 2): one in-place update
//! (`Reservation::compute_into` on pre-allocated storage) for 2, 5 and 16 request
//! types on 14 workers, and the same update followed by the deviation test DARC
//! runs before applying a fresh reservation.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use psp_core::{Reservation, ReservationConfig, TypeDemand};

/// Workers of the paper's setup.
const WORKERS: usize = 14;

/// Extreme bimodal: 99.5% of 0.5 us, 0.5% of 500 us.
fn two_types() -> Vec<TypeDemand> {
    vec![
        TypeDemand {
            mean: 0.5,
            ratio: 0.995,
        },
        TypeDemand {
            mean: 500.0,
            ratio: 0.005,
        },
    ]
}

/// TPC-C: Payment, OrderStatus, NewOrder, Delivery, StockLevel.
fn five_types() -> Vec<TypeDemand> {
    [
        (5.7, 0.44),
        (6.0, 0.04),
        (20.0, 0.44),
        (88.0, 0.04),
        (100.0, 0.04),
    ]
    .iter()
    .map(|&(mean, ratio)| TypeDemand { mean, ratio })
    .collect()
}

/// 16 types with geometric means from 1 to 1000 and geometrically decreasing
/// ratios (factor 0.7 per type) summing to 1. Listed longest first so the sort
/// has work to do.
fn sixteen_types() -> Vec<TypeDemand> {
    let n = 16;
    let weights: Vec<f64> = (0..n).map(|i| 0.7f64.powi(i)).collect();
    let sum: f64 = weights.iter().sum();
    (0..n)
        .rev()
        .map(|i| TypeDemand {
            mean: 1000f64.powf(i as f64 / (n - 1) as f64),
            ratio: weights[i as usize] / sum,
        })
        .collect()
}

fn cases() -> [(&'static str, Vec<TypeDemand>); 3] {
    [
        ("2_types", two_types()),
        ("5_types", five_types()),
        ("16_types", sixteen_types()),
    ]
}

/// The same profile with every mean moved by `factor`: what the next profiling
/// window could measure.
fn drifted(stats: &[TypeDemand], factor: f64) -> Vec<TypeDemand> {
    stats
        .iter()
        .map(|s| TypeDemand {
            mean: s.mean * factor,
            ratio: s.ratio,
        })
        .collect()
}

fn reservation_update(c: &mut Criterion) {
    let cfg = ReservationConfig::default();
    let mut group = c.benchmark_group("reservation_update");
    for (name, stats) in cases() {
        let mut r = Reservation::with_capacity(stats.len(), WORKERS);
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                r.compute_into(black_box(&stats), black_box(&cfg));
                black_box(&r);
            })
        });
    }
    group.finish();
}

fn update_and_compare(c: &mut Criterion) {
    let cfg = ReservationConfig::default();
    let mut group = c.benchmark_group("update_and_compare");
    for (name, stats) in cases() {
        // The reservation in force was built on a slightly different profile.
        let current = Reservation::compute(&drifted(&stats, 1.05), WORKERS, &cfg);
        let mut candidate = Reservation::with_capacity(stats.len(), WORKERS);
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                candidate.compute_into(black_box(&stats), black_box(&cfg));
                black_box(current.deviates(&candidate, black_box(0.1)))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, reservation_update, update_and_compare);
criterion_main!(benches);
