//! One reader per output format; [`super::read`] picks the one to use.
//!
//! Each reader takes the parsed document (or the text), the benchmark to pick and the field,
//! and answers a [`Reading`] or a one-line reason naming what the output held instead.

use super::{one_line, quoted_list, reading, snippet, Reading};
use serde_json::Value;
use std::path::Path;

mod criterion;
mod perf;

pub(super) use criterion::criterion;
pub(super) use perf::{looks_like_perf_stat, perf_stat};

/// One benchmark of a document: `id` tells it apart from the others (repetitions of one
/// benchmark share it); `names` are what `metric.benchmark` may say to pick it.
struct Entry<'a> {
    id: &'a str,
    names: Vec<&'a str>,
    json: &'a Value,
}

/// The entries of the one benchmark the user means: the one named `benchmark`, or, with no
/// name, the only one there is. `what` names the output in messages ("hyperfine output").
fn select<'a>(
    what: &str,
    entries: Vec<Entry<'a>>,
    benchmark: Option<&str>,
) -> Result<Vec<Entry<'a>>, String> {
    let mut ids: Vec<&str> = Vec::new();
    for e in &entries {
        if !ids.contains(&e.id) {
            ids.push(e.id);
        }
    }
    if ids.is_empty() {
        return Err(format!("{what} holds no benchmarks"));
    }
    let chosen: Vec<Entry> = match benchmark {
        Some(b) => entries
            .into_iter()
            .filter(|e| e.names.contains(&b))
            .collect(),
        None if ids.len() == 1 => entries,
        None => {
            return Err(format!(
                "{what} holds {} benchmarks ({}): set metric.benchmark",
                ids.len(),
                quoted_list(&ids)
            ))
        }
    };
    let mut chosen_ids: Vec<&str> = Vec::new();
    for e in &chosen {
        if !chosen_ids.contains(&e.id) {
            chosen_ids.push(e.id);
        }
    }
    match chosen_ids.len() {
        0 => Err(format!(
            "{what} has no benchmark {:?}; it has {}",
            benchmark.unwrap_or_default(),
            quoted_list(&ids)
        )),
        1 => Ok(chosen),
        n => Err(format!(
            "{what}: {:?} names {n} benchmarks ({}): set metric.benchmark to one of these",
            benchmark.unwrap_or_default(),
            quoted_list(&chosen_ids)
        )),
    }
}

/// The keys of a JSON object that hold numbers, less `skip`, for "it has ..." messages.
fn numeric_keys<'a>(object: &'a Value, skip: &[&str]) -> Vec<&'a str> {
    object
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, v)| v.is_number() && !skip.contains(&k.as_str()))
                .map(|(k, _)| k.as_str())
                .collect()
        })
        .unwrap_or_default()
}

/// A JSON value quoted for a message: a string as itself, anything else as its JSON, shortened.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => snippet(s),
        other => snippet(&other.to_string()),
    }
}

/// An array of numbers (hyperfine's `times`, pytest-benchmark's `data`); `what` names it.
fn numbers(array: &Value, what: &str) -> Result<Vec<f64>, String> {
    let list = array
        .as_array()
        .ok_or_else(|| format!("{what} is not a list"))?;
    list.iter()
        .map(|v| {
            v.as_f64()
                .ok_or_else(|| format!("{what} holds {v}, which is not a number"))
        })
        .collect()
}

/// The list under `key` in a tool's document, or an Err naming the tool and its flag.
fn list<'a>(doc: &'a Value, key: &str, tool_flag: &str) -> Result<&'a Vec<Value>, String> {
    doc.get(key).and_then(Value::as_array).ok_or_else(|| {
        let keys: Vec<&str> = doc
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        format!(
            "no {key:?} list in the output, so it is not {tool_flag}; its keys are {}",
            quoted_list(&keys)
        )
    })
}

/// hyperfine's stats, in the order its results hold them (for messages; serde_json sorts keys).
const HYPERFINE_STATS: [&str; 7] = ["mean", "stddev", "median", "user", "system", "min", "max"];

/// hyperfine's stats of wall-clock time, whose sub-samples are the runs' `times`. `user`,
/// `system` and `stddev` are other quantities: `times` are not samples of them.
const HYPERFINE_TIMES: [&str; 4] = ["mean", "median", "min", "max"];

/// hyperfine --export-json: `results[]`, picked by `command` (which --command-name replaces).
pub(super) fn hyperfine(
    doc: &Value,
    benchmark: Option<&str>,
    field: &str,
) -> Result<Reading, String> {
    let results = list(doc, "results", "hyperfine --export-json")?;
    let entries = results
        .iter()
        .map(|r| {
            let id = r.get("command").and_then(Value::as_str).unwrap_or("");
            Entry {
                id,
                names: vec![id],
                json: r,
            }
        })
        .collect();
    let chosen = select("hyperfine output", entries, benchmark)?;
    let [entry] = chosen.as_slice() else {
        return Err(format!(
            "hyperfine output holds {} results for {:?}: give them distinct --command-name",
            chosen.len(),
            chosen[0].id
        ));
    };
    let result = entry.json;
    let value = match result.get(field) {
        Some(v) if v.is_number() => v.as_f64().unwrap_or(f64::NAN),
        Some(Value::Null) => {
            // hyperfine writes null for a stat it could not compute: stddev of a single run.
            return Err(format!(
                "hyperfine's {field} is null for {:?} (stddev needs --runs 2 or more)",
                entry.id
            ));
        }
        _ => {
            let mut has: Vec<&str> = HYPERFINE_STATS
                .into_iter()
                .filter(|k| result.get(k).is_some())
                .collect();
            has.extend(numeric_keys(result, &HYPERFINE_STATS));
            return Err(format!(
                "hyperfine result {:?} has no number {field:?}; it has {}",
                entry.id,
                has.join(", ")
            ));
        }
    };
    let samples = match result.get("times") {
        Some(times) if HYPERFINE_TIMES.contains(&field) => {
            numbers(times, &format!("hyperfine's times of {:?}", entry.id))?
        }
        _ => Vec::new(),
    };
    Ok(Reading {
        value,
        samples: if samples.len() > 1 {
            samples
        } else {
            Vec::new()
        },
        unit: Some("s".to_string()),
        format: "hyperfine",
    })
}

/// Google Benchmark's bookkeeping numbers, left out of "it has ..." lists of metrics.
const GOOGLE_BOOKKEEPING: [&str; 5] = [
    "family_index",
    "per_family_instance_index",
    "repetitions",
    "repetition_index",
    "threads",
];

/// A Google Benchmark entry's `name`.
fn name(b: &Value) -> &str {
    b.get("name").and_then(Value::as_str).unwrap_or("")
}

/// Google Benchmark JSON: `benchmarks[]`, the `iteration` runs (one per repetition), picked by
/// `name` or `run_name`. An aggregate (`BM_x_mean`) is read only when named exactly, since its
/// repetitions are already there as iteration runs.
pub(super) fn google_benchmark(
    doc: &Value,
    benchmark: Option<&str>,
    field: &str,
) -> Result<Reading, String> {
    let all = list(
        doc,
        "benchmarks",
        "Google Benchmark --benchmark_format=json",
    )?;
    if all.is_empty() {
        return Err(
            "Google Benchmark output holds no benchmarks (did --benchmark_filter match none?)"
                .to_string(),
        );
    }
    // Versions before 1.5 write no run_type: every entry is then an iteration run.
    let is_iteration = |b: &Value| {
        b.get("run_type")
            .and_then(Value::as_str)
            .unwrap_or("iteration")
            == "iteration"
    };
    let iterations: Vec<Entry> = all
        .iter()
        .filter(|b| is_iteration(b))
        .map(|b| {
            let run_name = b.get("run_name").and_then(Value::as_str);
            Entry {
                id: run_name.unwrap_or(name(b)),
                names: vec![name(b), run_name.unwrap_or(name(b))],
                json: b,
            }
        })
        .collect();
    let named_aggregate = benchmark.and_then(|wanted| {
        all.iter()
            .find(|b| !is_iteration(b) && name(b) == wanted)
            .filter(|_| !iterations.iter().any(|e| e.names.contains(&wanted)))
    });
    let chosen: Vec<Entry> = if let Some(aggregate) = named_aggregate {
        vec![Entry {
            id: name(aggregate),
            names: vec![name(aggregate)],
            json: aggregate,
        }]
    } else if iterations.is_empty() {
        let aggregates: Vec<&str> = all.iter().map(name).collect();
        return Err(format!(
            "Google Benchmark output holds only aggregates ({}): set metric.benchmark to one of \
             them, or drop --benchmark_report_aggregates_only",
            quoted_list(&aggregates)
        ));
    } else {
        select("Google Benchmark output", iterations, benchmark)?
    };
    let mut values = Vec::new();
    for entry in &chosen {
        let b = entry.json;
        if b.get("error_occurred").and_then(Value::as_bool) == Some(true) {
            let message = b.get("error_message").and_then(Value::as_str).unwrap_or("");
            return Err(format!(
                "Google Benchmark {:?} failed: {}",
                entry.id,
                one_line(message)
            ));
        }
        let value = b.get(field).and_then(Value::as_f64).ok_or_else(|| {
            format!(
                "Google Benchmark {:?} has no number {field:?}; it has {}",
                entry.id,
                numeric_keys(b, &GOOGLE_BOOKKEEPING).join(", ")
            )
        })?;
        values.push(value);
    }
    let unit = match field {
        "real_time" | "cpu_time" => chosen[0].json.get("time_unit").and_then(Value::as_str),
        _ => None,
    };
    Ok(reading(values, unit, "google-benchmark"))
}

/// pytest-benchmark's stats that are times in seconds.
const PYTEST_SECONDS: [&str; 11] = [
    "min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr", "total",
];

/// pytest-benchmark's stats of the time of one round, whose sub-samples are `stats.data`.
const PYTEST_TIMES: [&str; 4] = ["min", "max", "mean", "median"];

/// pytest-benchmark --benchmark-json: `benchmarks[]` picked by `name` or `fullname`, the field
/// in `stats`; `stats.data` (each round's time, which --benchmark-json always writes) are the
/// sub-samples.
pub(super) fn pytest_benchmark(
    doc: &Value,
    benchmark: Option<&str>,
    field: &str,
) -> Result<Reading, String> {
    let all = list(doc, "benchmarks", "pytest-benchmark --benchmark-json")?;
    let entries = all
        .iter()
        .map(|b| {
            let name = b.get("name").and_then(Value::as_str).unwrap_or("");
            let fullname = b.get("fullname").and_then(Value::as_str).unwrap_or(name);
            Entry {
                id: fullname,
                names: vec![name, fullname],
                json: b,
            }
        })
        .collect();
    let chosen = select("pytest-benchmark output", entries, benchmark)?;
    let [entry] = chosen.as_slice() else {
        return Err(format!(
            "pytest-benchmark output holds {} results for {:?}",
            chosen.len(),
            chosen[0].id
        ));
    };
    let stats = entry
        .json
        .get("stats")
        .filter(|s| s.is_object())
        .ok_or_else(|| {
            format!(
                "pytest-benchmark {:?} has no stats (was it run with --benchmark-disable?)",
                entry.id
            )
        })?;
    let value = match stats.get(field) {
        Some(v) if v.is_number() => v.as_f64().unwrap_or(f64::NAN),
        Some(other) => {
            return Err(format!(
                "pytest-benchmark {:?}'s stats.{field} is {}, not a number",
                entry.id,
                shown(other)
            ))
        }
        None => {
            return Err(format!(
                "pytest-benchmark {:?} has no stat {field:?}; it has {}",
                entry.id,
                numeric_keys(stats, &[]).join(", ")
            ))
        }
    };
    let samples = match stats.get("data") {
        Some(data) if PYTEST_TIMES.contains(&field) => numbers(
            data,
            &format!("pytest-benchmark {:?}'s stats.data", entry.id),
        )?,
        _ => Vec::new(),
    };
    Ok(Reading {
        value,
        samples: if samples.len() > 1 {
            samples
        } else {
            Vec::new()
        },
        unit: PYTEST_SECONDS.contains(&field).then(|| "s".to_string()),
        format: "pytest-benchmark",
    })
}

/// The value of `field` in a JSON line: its key, or else a dotted path (`stats.mean`).
fn lookup<'a>(object: &'a Value, field: &str) -> Option<&'a Value> {
    object.get(field).or_else(|| {
        field
            .split('.')
            .try_fold(object, |v, key| v.get(key))
            .filter(|_| field.contains('.'))
    })
}

/// JSON lines: every line that is a JSON object holding `field` as a number (or a list of
/// numbers), picked by its "name" or "benchmark" key when `benchmark` is set. A text that is
/// one pretty-printed object is read as one line.
pub(super) fn json_lines(
    text: &str,
    benchmark: Option<&str>,
    field: &str,
) -> Result<Reading, String> {
    let mut objects: Vec<Value> = text
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object)
        .collect();
    if objects.is_empty() {
        objects.extend(super::json_document(text));
    }
    if objects.is_empty() {
        return Err(format!(
            "no line of the output is a JSON object ({} lines; the first is {})",
            text.lines().count(),
            snippet(text.lines().next().unwrap_or(""))
        ));
    }
    let name_of = |o: &Value| {
        ["name", "benchmark"]
            .into_iter()
            .find_map(|k| o.get(k).and_then(Value::as_str))
            .map(str::to_string)
    };
    let (mut values, mut names, mut picked_names) = (Vec::new(), Vec::new(), Vec::new());
    let (mut keys, mut not_numbers) = (Vec::<String>::new(), Vec::new());
    for object in &objects {
        let name = name_of(object);
        if let Some(n) = &name {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
        if benchmark.is_some() && name.as_deref() != benchmark {
            continue;
        }
        match lookup(object, field) {
            Some(Value::Number(n)) => values.push(n.as_f64().unwrap_or(f64::NAN)),
            Some(Value::Array(list)) if list.iter().all(Value::is_number) && !list.is_empty() => {
                values.extend(list.iter().filter_map(Value::as_f64));
            }
            Some(other) => {
                not_numbers.push(shown(other));
                continue;
            }
            None => {
                for k in object.as_object().into_iter().flat_map(|m| m.keys()) {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
                continue;
            }
        }
        if let Some(n) = name {
            if !picked_names.contains(&n) {
                picked_names.push(n);
            }
        }
    }
    if values.is_empty() {
        let had = match (benchmark, not_numbers.first()) {
            (_, Some(first)) => format!(
                "{} JSON line(s) hold {field:?} but not as a number (e.g. {first})",
                not_numbers.len()
            ),
            (Some(b), None) if !names.contains(&b.to_string()) => format!(
                "no JSON line has \"name\" or \"benchmark\" {b:?}; the names are {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    quoted_list(&names)
                }
            ),
            _ => format!(
                "no JSON line holds {field:?}; {} object line(s) have the keys {}",
                objects.len(),
                keys.join(", ")
            ),
        };
        return Err(had);
    }
    if benchmark.is_none() && picked_names.len() > 1 {
        return Err(format!(
            "JSON lines hold {} benchmarks ({}): set metric.benchmark",
            picked_names.len(),
            quoted_list(&picked_names)
        ));
    }
    Ok(reading(values, None, "json"))
}

/// A user's regex: every match's group named `field`. With `benchmark`, only the matches whose
/// group `name` (or `benchmark`) equals it.
pub(super) fn pattern(
    regex: &regex::Regex,
    text: &str,
    benchmark: Option<&str>,
    field: &str,
) -> Result<Reading, String> {
    let groups: Vec<&str> = regex.capture_names().flatten().collect();
    if !groups.contains(&field) {
        return Err(format!(
            "pattern {:?} has no group named {field:?}",
            regex.as_str()
        ));
    }
    let name_group = ["name", "benchmark"]
        .into_iter()
        .find(|g| groups.contains(g));
    if benchmark.is_some() && name_group.is_none() {
        return Err(format!(
            "metric.benchmark needs a (?P<name>...) group in pattern {:?} to pick the benchmark",
            regex.as_str()
        ));
    }
    let (mut values, mut names) = (Vec::new(), Vec::<&str>::new());
    for caps in regex.captures_iter(text) {
        let name = name_group.and_then(|g| caps.name(g)).map(|m| m.as_str());
        if let Some(n) = name {
            if !names.contains(&n) {
                names.push(n);
            }
        }
        if benchmark.is_some() && name != benchmark {
            continue;
        }
        let Some(m) = caps.name(field) else { continue };
        let value = m.as_str().trim().parse::<f64>().map_err(|_| {
            format!(
                "pattern {:?} matched {:?} as {field}, which is not a number",
                regex.as_str(),
                m.as_str()
            )
        })?;
        values.push(value);
    }
    if values.is_empty() {
        return Err(match benchmark {
            Some(b) if !names.is_empty() => format!(
                "pattern {:?} matches no benchmark {b:?}; it matches {}",
                regex.as_str(),
                quoted_list(&names)
            ),
            _ => format!(
                "pattern {:?} matches nothing in the output ({} lines; the last is {})",
                regex.as_str(),
                text.lines().count(),
                snippet(text.lines().last().unwrap_or(""))
            ),
        });
    }
    Ok(reading(values, None, "pattern"))
}

#[cfg(test)]
mod tests {
    use super::super::{read, Format, MetricSpec};
    use super::*;

    fn read_with(format: Format, benchmark: Option<&str>, field: &str, text: &str) -> Reading {
        try_read(format, benchmark, field, text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_read(
        format: Format,
        benchmark: Option<&str>,
        field: &str,
        text: &str,
    ) -> Result<Reading, String> {
        let spec = MetricSpec {
            format,
            benchmark: benchmark.map(str::to_string),
            field: field.to_string(),
        };
        read(&spec, text, None)
    }

    const HYPERFINE: &str = r#"{"results": [
        {"command": "./a", "mean": 0.5, "stddev": 0.1, "median": 0.4, "user": 0.3,
         "system": 0.0, "min": 0.4, "max": 0.7, "times": [0.4, 0.4, 0.7], "exit_codes": [0, 0, 0]},
        {"command": "./b", "mean": 2.0, "stddev": null, "median": 2.0, "user": 1.0,
         "system": 0.1, "min": 2.0, "max": 2.0, "times": [2.0], "exit_codes": [0]}]}"#;

    #[test]
    fn hyperfine_picks_the_command_and_keeps_times() {
        let r = read_with(Format::Hyperfine, Some("./a"), "mean", HYPERFINE);
        assert_eq!((r.value, r.samples.len()), (0.5, 3));
        assert_eq!(r.unit.as_deref(), Some("s"));
        let r = read_with(Format::Hyperfine, Some("./a"), "user", HYPERFINE);
        assert_eq!(r.value, 0.3);
        assert!(r.samples.is_empty(), "times are wall-clock, not user time");
    }

    #[test]
    fn hyperfine_with_two_commands_and_no_benchmark_names_both() {
        let err = try_read(Format::Hyperfine, None, "mean", HYPERFINE).unwrap_err();
        assert_eq!(
            err,
            "hyperfine output holds 2 benchmarks (\"./a\", \"./b\"): set metric.benchmark"
        );
        let err = try_read(Format::Hyperfine, Some("./c"), "mean", HYPERFINE).unwrap_err();
        assert!(
            err.contains("no benchmark \"./c\"") && err.contains("\"./b\""),
            "{err}"
        );
    }

    #[test]
    fn hyperfine_null_stddev_of_one_run_is_explained() {
        let err = try_read(Format::Hyperfine, Some("./b"), "stddev", HYPERFINE).unwrap_err();
        assert!(err.contains("null") && err.contains("--runs 2"), "{err}");
        let err = try_read(Format::Hyperfine, Some("./b"), "mean_s", HYPERFINE).unwrap_err();
        assert!(
            err.contains("\"mean_s\"") && err.contains("mean, stddev"),
            "{err}"
        );
    }

    const GOOGLE: &str = r#"{"context": {"library_build_type": "release"}, "benchmarks": [
        {"name": "BM_a", "run_name": "BM_a", "run_type": "iteration", "repetitions": 2,
         "repetition_index": 0, "threads": 1, "iterations": 10, "real_time": 10.0,
         "cpu_time": 9.0, "time_unit": "ns", "widgets": 3},
        {"name": "BM_a", "run_name": "BM_a", "run_type": "iteration", "repetitions": 2,
         "repetition_index": 1, "threads": 1, "iterations": 10, "real_time": 14.0,
         "cpu_time": 11.0, "time_unit": "ns", "widgets": 3},
        {"name": "BM_a_mean", "run_name": "BM_a", "run_type": "aggregate",
         "aggregate_name": "mean", "iterations": 2, "real_time": 12.0, "cpu_time": 10.0,
         "time_unit": "ns"},
        {"name": "BM_b/8", "run_name": "BM_b/8", "run_type": "iteration", "iterations": 5,
         "real_time": 1.0, "cpu_time": 1.0, "time_unit": "us"},
        {"name": "BM_bad", "run_name": "BM_bad", "run_type": "iteration", "iterations": 0,
         "real_time": 0, "cpu_time": 0, "time_unit": "ns", "error_occurred": true,
         "error_message": "no device"}]}"#;

    #[test]
    fn google_benchmark_repetitions_are_samples_and_aggregates_are_skipped() {
        let r = read_with(Format::GoogleBenchmark, Some("BM_a"), "real_time", GOOGLE);
        assert_eq!((r.value, r.samples.clone()), (12.0, vec![10.0, 14.0]));
        assert_eq!(r.unit.as_deref(), Some("ns"));
        let r = read_with(Format::GoogleBenchmark, Some("BM_b/8"), "cpu_time", GOOGLE);
        assert_eq!((r.value, r.unit.as_deref()), (1.0, Some("us")));
        let r = read_with(Format::GoogleBenchmark, Some("BM_a"), "widgets", GOOGLE);
        assert_eq!((r.value, r.unit), (3.0, None));
    }

    #[test]
    fn google_benchmark_aggregate_is_read_when_named() {
        let r = read_with(
            Format::GoogleBenchmark,
            Some("BM_a_mean"),
            "real_time",
            GOOGLE,
        );
        assert_eq!((r.value, r.samples.len()), (12.0, 0));
    }

    #[test]
    fn google_benchmark_errors_name_benchmarks_counters_and_failures() {
        let err = try_read(Format::GoogleBenchmark, None, "real_time", GOOGLE).unwrap_err();
        assert!(
            err.contains("holds 3 benchmarks (\"BM_a\", \"BM_b/8\", \"BM_bad\")"),
            "{err}"
        );
        let err = try_read(Format::GoogleBenchmark, Some("BM_a"), "wall", GOOGLE).unwrap_err();
        assert!(
            err.contains("real_time, cpu_time") || err.contains("cpu_time"),
            "{err}"
        );
        assert!(!err.contains("repetition_index"), "{err}");
        let err =
            try_read(Format::GoogleBenchmark, Some("BM_bad"), "real_time", GOOGLE).unwrap_err();
        assert!(err.contains("failed: no device"), "{err}");
    }

    #[test]
    fn google_benchmark_with_only_aggregates_says_so() {
        let text = r#"{"context": {}, "benchmarks": [{"name": "BM_a_mean", "run_name": "BM_a",
            "run_type": "aggregate", "real_time": 1.0, "time_unit": "ns"}]}"#;
        let err = try_read(Format::GoogleBenchmark, None, "real_time", text).unwrap_err();
        assert!(
            err.contains("only aggregates") && err.contains("BM_a_mean"),
            "{err}"
        );
    }

    const CRITERION: &str = r#"{"mean":{"confidence_interval":{"confidence_level":0.95,
        "lower_bound":90.0,"upper_bound":110.0},"point_estimate":100.0,"standard_error":5.0},
        "median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":90.0,
        "upper_bound":100.0},"point_estimate":95.0,"standard_error":2.0},
        "median_abs_dev":{"confidence_interval":{"confidence_level":0.95,"lower_bound":1.0,
        "upper_bound":3.0},"point_estimate":2.0,"standard_error":0.5},
        "slope":null,
        "std_dev":{"confidence_interval":{"confidence_level":0.95,"lower_bound":1.0,
        "upper_bound":9.0},"point_estimate":4.0,"standard_error":1.0}}"#;

    #[test]
    fn criterion_reads_point_estimates_in_ns() {
        let r = read_with(Format::Criterion, None, "median", CRITERION);
        assert_eq!((r.value, r.unit.as_deref()), (95.0, Some("ns")));
        assert!(r.samples.is_empty(), "no sample.json without beside");
    }

    #[test]
    fn criterion_errors_name_the_estimates_in_file_order() {
        let err = try_read(Format::Criterion, None, "mean_ns", CRITERION).unwrap_err();
        assert_eq!(
            err,
            "no field \"mean_ns\" in criterion estimates; it has mean, median, std_dev, slope, \
             median_abs_dev"
        );
        let err = try_read(Format::Criterion, None, "slope", CRITERION).unwrap_err();
        assert!(err.contains("null") && err.contains("use mean"), "{err}");
        let err = try_read(Format::Criterion, Some("sum"), "mean", CRITERION).unwrap_err();
        assert!(err.contains("benchmark.json"), "{err}");
    }

    #[test]
    fn criterion_samples_are_per_iteration_times_from_sample_json() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("sample.json"),
            r#"{"sampling_mode":"Linear","iters":[1.0,2.0,4.0],"times":[100.0,220.0,360.0]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("benchmark.json"),
            r#"{"group_id":"sum","function_id":null,"full_id":"sum","title":"sum"}"#,
        )
        .unwrap();
        let spec = MetricSpec {
            format: Format::Criterion,
            benchmark: Some("sum".to_string()),
            field: "mean".to_string(),
        };
        let r = read(&spec, CRITERION, Some(dir.path())).unwrap();
        assert_eq!(r.samples, vec![100.0, 110.0, 90.0]);
        let spec = MetricSpec {
            benchmark: Some("other".to_string()),
            ..spec
        };
        let err = read(&spec, CRITERION, Some(dir.path())).unwrap_err();
        assert!(
            err.contains("of \"sum\"") && err.contains("\"other\""),
            "{err}"
        );
    }

    const PYTEST: &str = r#"{"machine_info": {}, "benchmarks": [
        {"group": null, "name": "test_small", "fullname": "t.py::test_small",
         "stats": {"min": 1.0, "max": 3.0, "mean": 2.0, "stddev": 1.0, "rounds": 3,
                   "median": 2.0, "ops": 0.5, "outliers": "0;0", "data": [1.0, 2.0, 3.0]}},
        {"group": null, "name": "test_big", "fullname": "t.py::test_big",
         "stats": {"min": 5.0, "max": 5.0, "mean": 5.0, "rounds": 1, "ops": 0.2,
                   "data": [5.0]}}]}"#;

    #[test]
    fn pytest_benchmark_picks_by_name_or_fullname_with_data_as_samples() {
        let r = read_with(Format::PytestBenchmark, Some("test_small"), "mean", PYTEST);
        assert_eq!((r.value, r.samples.len()), (2.0, 3));
        assert_eq!(r.unit.as_deref(), Some("s"));
        let r = read_with(
            Format::PytestBenchmark,
            Some("t.py::test_big"),
            "ops",
            PYTEST,
        );
        assert_eq!((r.value, r.unit, r.samples.len()), (0.2, None, 0));
    }

    #[test]
    fn pytest_benchmark_errors_name_tests_and_stats() {
        let err = try_read(Format::PytestBenchmark, None, "mean", PYTEST).unwrap_err();
        assert!(
            err.contains("holds 2 benchmarks") && err.contains("t.py::test_big"),
            "{err}"
        );
        let err = try_read(
            Format::PytestBenchmark,
            Some("test_small"),
            "outliers",
            PYTEST,
        )
        .unwrap_err();
        assert!(
            err.contains("\"0;0\"") && err.contains("not a number"),
            "{err}"
        );
        let err = try_read(Format::PytestBenchmark, Some("test_small"), "avg", PYTEST).unwrap_err();
        assert!(
            err.contains("no stat \"avg\"") && err.contains("median"),
            "{err}"
        );
    }

    #[test]
    fn json_lines_one_several_and_arrays() {
        let r = read_with(Format::JsonLines, None, "ns", "log line\n{\"ns\": 7}\n");
        assert_eq!((r.value, r.samples.len(), r.format), (7.0, 0, "json"));
        let r = read_with(Format::JsonLines, None, "ns", "{\"ns\": 1}\n{\"ns\": 3}\n");
        assert_eq!((r.value, r.samples), (2.0, vec![1.0, 3.0]));
        let r = read_with(Format::JsonLines, None, "ns", "{\"ns\": [1, 2, 6]}\n");
        assert_eq!((r.value, r.samples), (3.0, vec![1.0, 2.0, 6.0]));
        let r = read_with(
            Format::JsonLines,
            None,
            "stats.ns",
            "{\"stats\": {\"ns\": 4}}",
        );
        assert_eq!(r.value, 4.0);
        let pretty = "{\n  \"ns\": 9\n}\n";
        assert_eq!(read_with(Format::JsonLines, None, "ns", pretty).value, 9.0);
    }

    #[test]
    fn json_lines_pick_by_name_or_benchmark_key() {
        let text = "{\"name\": \"a\", \"ns\": 1}\n{\"benchmark\": \"b\", \"ns\": 5}\n";
        assert_eq!(
            read_with(Format::JsonLines, Some("b"), "ns", text).value,
            5.0
        );
        let err = try_read(Format::JsonLines, None, "ns", text).unwrap_err();
        assert!(err.contains("2 benchmarks (\"a\", \"b\")"), "{err}");
        let err = try_read(Format::JsonLines, Some("c"), "ns", text).unwrap_err();
        assert!(
            err.contains("\"c\"") && err.contains("\"a\", \"b\""),
            "{err}"
        );
    }

    #[test]
    fn json_lines_errors_name_keys_and_non_numbers() {
        let err = try_read(Format::JsonLines, None, "ns", "{\"us\": 1, \"n\": 2}\n").unwrap_err();
        assert!(
            err.contains("no JSON line holds \"ns\"") && err.contains("us"),
            "{err}"
        );
        let err = try_read(Format::JsonLines, None, "ns", "{\"ns\": \"12\"}\n").unwrap_err();
        assert!(err.contains("not as a number"), "{err}");
        let err = try_read(Format::JsonLines, None, "ns", "took 3 ns\n").unwrap_err();
        assert!(
            err.contains("no line of the output is a JSON object"),
            "{err}"
        );
    }

    fn regex(r: &str) -> Format {
        Format::Pattern(regex::Regex::new(r).unwrap())
    }

    #[test]
    fn pattern_one_and_several_matches() {
        let f = || regex(r"took (?P<ms>[0-9.]+) ms");
        assert_eq!(read_with(f(), None, "ms", "took 4.5 ms\n").value, 4.5);
        let r = read_with(f(), None, "ms", "took 1 ms\nx\ntook 3 ms\n");
        assert_eq!(
            (r.value, r.samples, r.format),
            (2.0, vec![1.0, 3.0], "pattern")
        );
        let err = try_read(f(), None, "ms", "done\nin 3 s\n").unwrap_err();
        assert!(
            err.contains("matches nothing") && err.contains("\"in 3 s\""),
            "{err}"
        );
    }

    #[test]
    fn pattern_picks_a_benchmark_by_its_name_group() {
        let f = || regex(r"(?P<name>\w+): (?P<ms>[0-9.]+) ms");
        let text = "a: 1 ms\nb: 8 ms\n";
        assert_eq!(read_with(f(), Some("b"), "ms", text).value, 8.0);
        let err = try_read(f(), Some("c"), "ms", text).unwrap_err();
        assert!(err.contains("\"a\", \"b\""), "{err}");
        let err = try_read(regex(r"(?P<ms>\d+)"), Some("b"), "ms", text).unwrap_err();
        assert!(err.contains("(?P<name>"), "{err}");
        let err = try_read(regex(r"took (?P<ms>\S+)"), None, "ms", "took 1,5").unwrap_err();
        assert!(
            err.contains("\"1,5\"") && err.contains("not a number"),
            "{err}"
        );
    }

    const PERF: &str = "# started on Wed Dec  2 05:14:37 2026\n\n\
        <not supported>,,cycles,0,100.00,,\n\
        0.79,msec,task-clock:u,790148,100.00,0.041,CPUs utilized\n\
        1,,context-switches,778291,100.00,1.285,K/sec\n";

    #[test]
    fn perf_stat_matches_the_event_with_and_without_modifier() {
        let r = read_with(Format::PerfStat, None, "task-clock", PERF);
        assert_eq!((r.value, r.unit.as_deref()), (0.79, Some("msec")));
        assert_eq!(
            read_with(Format::PerfStat, None, "task-clock:u", PERF).value,
            0.79
        );
        let r = read_with(Format::PerfStat, None, "context-switches", PERF);
        assert_eq!((r.value, r.unit), (1.0, None));
    }

    #[test]
    fn perf_stat_not_supported_and_missing_events_are_named() {
        let err = try_read(Format::PerfStat, None, "cycles", PERF).unwrap_err();
        assert!(
            err.contains("<not supported>") && err.contains("task-clock"),
            "{err}"
        );
        let err = try_read(Format::PerfStat, None, "instructions", PERF).unwrap_err();
        assert!(
            err.contains("no event \"instructions\"; it has cycles, task-clock:u"),
            "{err}"
        );
        let err = try_read(Format::PerfStat, None, "task-clock", "not,perf\n").unwrap_err();
        assert!(err.contains("no perf stat -x, counter line"), "{err}");
    }

    #[test]
    fn perf_stat_with_repeats_has_a_variance_column_and_one_value() {
        let text = "0.84,msec,task-clock,7.36%,841054,100.00,0.066,CPUs utilized\n";
        let r = read_with(Format::PerfStat, None, "task-clock", text);
        assert_eq!((r.value, r.samples.len()), (0.84, 0));
    }

    #[test]
    fn perf_stat_intervals_are_samples_and_uncounted_intervals_skipped() {
        let text = "     0.100120221,0.75,msec,task-clock,752512,100.00,0.008,CPUs utilized\n\
                    \x20    0.201371197,<not counted>,msec,task-clock,0,100.00,,\n\
                    \x20    0.361624329,0.25,msec,task-clock,55162,100.00,0.001,CPUs utilized\n";
        let r = read_with(Format::PerfStat, None, "task-clock", text);
        assert_eq!((r.value, r.samples), (0.5, vec![0.75, 0.25]));
        let err = try_read(
            Format::PerfStat,
            None,
            "task-clock",
            "0.2,<not counted>,msec,task-clock,0,100.00,,\n",
        )
        .unwrap_err();
        assert!(err.contains("all 1 intervals"), "{err}");
        let err = try_read(
            Format::PerfStat,
            None,
            "task-clock",
            "<not counted>,msec,task-clock\n",
        )
        .unwrap_err();
        assert!(err.contains("<not counted>"), "{err}");
    }
}
