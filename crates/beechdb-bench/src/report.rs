//! Summaries of repeated runs, the printed table, and JSON records.

use serde::Serialize;

/// Mean, standard deviation, median and range of repeated measurements.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub mean: f64,
    pub stddev: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(samples: &[f64]) -> Summary {
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let var = if samples.len() > 1 {
            samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        let mut sorted = samples.to_vec();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        Summary {
            mean,
            stddev: var.sqrt(),
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        }
    }
}

/// One JSON record: an engine, mode, operation and thread count.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub engine: String,
    pub mode: String,
    pub op: String,
    pub threads: usize,
    pub ops_per_sec: f64,
    pub stddev: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: Vec<f64>,
    pub records_per_run: u64,
}

/// Formats ops/s with thousands separators.
pub fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x);
    let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

/// A markdown table cell: mean ± sd, then median and range.
pub fn cell(s: &Summary) -> String {
    format!(
        "{} ± {} (med {}, {}–{})",
        thousands(s.mean),
        thousands(s.stddev),
        thousands(s.median),
        thousands(s.min),
        thousands(s.max)
    )
}
