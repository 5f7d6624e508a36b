//! criterion's estimates.json, with the sub-samples of sample.json beside it.

use super::*;

/// criterion's estimates, in the order messages list them (estimates.json sorts them).
const CRITERION_ESTIMATES: [&str; 5] = ["mean", "median", "std_dev", "slope", "median_abs_dev"];

/// criterion's estimates of the time of one iteration, whose sub-samples are sample.json's
/// per-iteration times; std_dev and median_abs_dev are spreads, not times.
const CRITERION_TIMES: [&str; 3] = ["mean", "median", "slope"];

/// criterion's estimates.json: `<field>.point_estimate` in ns; sub-samples from sample.json in
/// `beside`. The file holds one benchmark, chosen by its path; a `benchmark` is checked against
/// benchmark.json beside it, so that a wrong path is not read silently.
pub(in crate::metric) fn criterion(
    doc: &Value,
    benchmark: Option<&str>,
    field: &str,
    beside: Option<&Path>,
) -> Result<Reading, String> {
    if let Some(wanted) = benchmark {
        criterion_benchmark_is(wanted, beside)?;
    }
    let estimate = match doc.get(field) {
        Some(Value::Null) => {
            // criterion writes null for the slope when it sampled flat (long iterations).
            return Err(format!(
                "criterion's {field} estimate is null (criterion has no slope under flat \
                 sampling): use mean or median"
            ));
        }
        Some(estimate) => estimate,
        None => {
            let mut has: Vec<&str> = CRITERION_ESTIMATES
                .into_iter()
                .filter(|k| doc.get(k).is_some())
                .collect();
            if let Some(m) = doc.as_object() {
                has.extend(
                    m.keys()
                        .map(String::as_str)
                        .filter(|k| !CRITERION_ESTIMATES.contains(k)),
                );
            }
            return Err(format!(
                "no field {field:?} in criterion estimates; it has {}",
                has.join(", ")
            ));
        }
    };
    let value = estimate
        .get("point_estimate")
        .and_then(Value::as_f64)
        .ok_or_else(|| {
            format!(
                "criterion's {field} estimate has no point_estimate number: {}",
                snippet(&estimate.to_string())
            )
        })?;
    let samples = match beside {
        Some(dir) if CRITERION_TIMES.contains(&field) => criterion_samples(dir)?,
        _ => Vec::new(),
    };
    Ok(Reading {
        value,
        samples: if samples.len() > 1 {
            samples
        } else {
            Vec::new()
        },
        unit: Some("ns".to_string()),
        format: "criterion",
    })
}

/// The per-iteration times (ns) of criterion's sample.json in `dir`: each sample ran `iters[i]`
/// iterations in `times[i]` ns. Empty when there is no sample.json.
fn criterion_samples(dir: &Path) -> Result<Vec<f64>, String> {
    let path = dir.join("sample.json");
    let text = match beside_file(dir, "sample.json") {
        Ok(text) => text,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON ({e})", path.display()))?;
    let field = |key: &str| match doc.get(key) {
        Some(v) => numbers(v, &format!("{}'s {key}", path.display())),
        None => Err(format!("{} has no {key:?} list", path.display())),
    };
    let (iters, times) = (field("iters")?, field("times")?);
    if iters.len() != times.len() || iters.iter().any(|n| *n <= 0.0) {
        return Err(format!(
            "{}: {} iters for {} times, or an iteration count that is not positive",
            path.display(),
            iters.len(),
            times.len()
        ));
    }
    Ok(times.iter().zip(&iters).map(|(t, n)| t / n).collect())
}

/// The text of criterion's `name` in `dir`, the result file's directory (already walked
/// without a link): a regular file, not a link, read to the cap (issue 32, finding 2).
fn beside_file(dir: &Path, name: &str) -> Result<String, crate::files::FileError> {
    let file = crate::files::open_inside(dir, Path::new(name))?;
    let bytes = crate::files::read_capped(file, crate::metric::MAX_OUTPUT_BYTES)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Ok when benchmark.json in `beside` says the estimates are `wanted`'s.
fn criterion_benchmark_is(wanted: &str, beside: Option<&Path>) -> Result<(), String> {
    let unchecked = || {
        format!(
            "metric.benchmark {wanted:?} cannot be checked against criterion's estimates.json \
             without the benchmark.json beside it: criterion's output holds one benchmark, \
             chosen by its path; drop metric.benchmark or read the file in place"
        )
    };
    let dir = beside.ok_or_else(unchecked)?;
    let path = dir.join("benchmark.json");
    let text = beside_file(dir, "benchmark.json").map_err(|_| unchecked())?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON ({e})", path.display()))?;
    let id = |key: &str| doc.get(key).and_then(Value::as_str);
    if [id("full_id"), id("title")].contains(&Some(wanted)) {
        return Ok(());
    }
    Err(format!(
        "criterion's estimates are of {:?} (its benchmark.json), not metric.benchmark {wanted:?}",
        id("full_id").unwrap_or("")
    ))
}
