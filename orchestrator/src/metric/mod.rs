//! The metric of a metric command hunt: one number (and its sub-samples) read from the output
//! of a user's benchmark command.
//!
//! Pure code: text in, [`Reading`] out. The only file it opens is criterion's `sample.json` and
//! `benchmark.json` beside `estimates.json`, because criterion splits one run over three files.
//! The formats are those the real tools write (hyperfine, Google Benchmark, criterion,
//! pytest-benchmark, `perf stat -x,`), plus JSON lines and a user's regex for everything else;
//! `tests/metric_formats.rs` checks each against its tool. docs/metric-formats.md is the user's
//! side of this module.

mod formats;

use serde_json::Value;
use std::path::Path;

/// How the metric is found in a run's output.
#[derive(Debug, Clone)]
pub enum Format {
    /// Recognise the formats below from the text itself; otherwise JSON lines.
    Auto,
    /// One JSON object per line (`{"ns_per_iter": 1234}`); other lines are ignored.
    JsonLines,
    /// A regex with a named group whose name is the metric's field (`took (?P<ms>[0-9.]+) ms`).
    Pattern(regex::Regex),
    /// hyperfine --export-json
    Hyperfine,
    /// Google Benchmark --benchmark_format=json (or --benchmark_out=F --benchmark_out_format=json)
    GoogleBenchmark,
    /// criterion's estimates.json (`target/criterion/<name>/new/estimates.json`)
    Criterion,
    /// pytest-benchmark --benchmark-json=F
    PytestBenchmark,
    /// perf stat -x, (CSV; software counters such as task-clock)
    PerfStat,
}

/// The names `format` accepts in a hunt file, in the order error messages list them.
const FORMAT_NAMES: [&str; 8] = [
    "auto",
    "json",
    "pattern",
    "hyperfine",
    "google-benchmark",
    "criterion",
    "pytest-benchmark",
    "perf-stat",
];

impl Format {
    /// The format named in a hunt file: "auto", "json", "hyperfine", "google-benchmark",
    /// "criterion", "pytest-benchmark", "perf-stat"; `pattern` (when set) makes it Pattern.
    /// Err is a message naming the accepted names, or the regex error, or a pattern that has no
    /// named group equal to `field`.
    pub fn from_hunt_file(
        name: Option<&str>,
        pattern: Option<&str>,
        field: &str,
    ) -> Result<Format, String> {
        if let Some(pattern) = pattern {
            // A pattern reads plain text; beside a structured format one of the two is a mistake.
            if let Some(other) = name.filter(|n| !matches!(*n, "auto" | "pattern")) {
                return Err(format!(
                    "format = {other:?} and pattern are both set: a pattern reads plain text; \
                     drop one of them"
                ));
            }
            let regex = regex::Regex::new(pattern)
                .map_err(|e| format!("pattern {pattern:?}: {}", one_line(&e.to_string())))?;
            let groups: Vec<&str> = regex.capture_names().flatten().collect();
            if !groups.contains(&field) {
                let has = if groups.is_empty() {
                    "it has no named group".to_string()
                } else {
                    format!("it has {}", groups.join(", "))
                };
                return Err(format!(
                    "pattern {pattern:?} has no group named {field:?} (the metric's field), \
                     as in (?P<{field}>[0-9.]+); {has}"
                ));
            }
            return Ok(Format::Pattern(regex));
        }
        match name.unwrap_or("auto") {
            "auto" => Ok(Format::Auto),
            "json" => Ok(Format::JsonLines),
            "pattern" => {
                Err("format = \"pattern\" needs pattern = \"...(?P<field>[0-9.]+)...\"".to_string())
            }
            "hyperfine" => Ok(Format::Hyperfine),
            "google-benchmark" => Ok(Format::GoogleBenchmark),
            "criterion" => Ok(Format::Criterion),
            "pytest-benchmark" => Ok(Format::PytestBenchmark),
            "perf-stat" => Ok(Format::PerfStat),
            other => Err(format!(
                "format {other:?} is unknown; it is one of {}",
                FORMAT_NAMES.join(", ")
            )),
        }
    }

    /// Its name as in a hunt file (for messages and the journal).
    pub fn name(&self) -> &'static str {
        match self {
            Format::Auto => "auto",
            Format::JsonLines => "json",
            Format::Pattern(_) => "pattern",
            Format::Hyperfine => "hyperfine",
            Format::GoogleBenchmark => "google-benchmark",
            Format::Criterion => "criterion",
            Format::PytestBenchmark => "pytest-benchmark",
            Format::PerfStat => "perf-stat",
        }
    }
}

/// Which number of the output is the metric.
#[derive(Debug, Clone)]
pub struct MetricSpec {
    /// How the output is read.
    pub format: Format,
    /// The benchmark, where the output holds several (hyperfine's command or --command-name,
    /// Google Benchmark's and pytest-benchmark's `name` (pytest: also `fullname`), a JSON line's
    /// "name" or "benchmark" key); None: the output must hold exactly one benchmark.
    pub benchmark: Option<String>,
    /// The field: "mean", "median", "real_time", "cpu_time", "task-clock", a JSON key, a regex group.
    pub field: String,
}

/// One run's metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The run's value (what the statistics use).
    pub value: f64,
    /// Repetitions inside the run, kept as sub-samples (hyperfine's `times`, Google Benchmark's
    /// repetitions, pytest-benchmark's `stats.data`, criterion's sample.json per-iteration times,
    /// several matches of a pattern or several JSON lines). Empty when the run gave only one.
    pub samples: Vec<f64>,
    /// The unit where the format says it ("s" for hyperfine, Google Benchmark's time_unit,
    /// "ns" for criterion, "s" for pytest-benchmark, perf's unit column such as "msec").
    pub unit: Option<String>,
    /// The format it was read in (the detected one under Auto).
    pub format: &'static str,
}

/// The most sub-samples a run keeps ([`firstbad_wire::Series::bounded`]; issue 61, finding
/// 2): the run's value is computed from all of them first.
pub const KEPT_SAMPLES: usize = firstbad_wire::KEPT_SAMPLES;

/// The largest file read for a metric (a result file, criterion's files beside it): benchmark
/// tools write kilobytes; a runaway log must not take the controller's memory.
pub const MAX_OUTPUT_BYTES: u64 = 64 << 20;

/// Reads the metric from a run's output text. `beside` is the directory of the output file,
/// when it is a file (criterion keeps sample.json beside estimates.json); None for stdout.
/// Err: why there is no metric, for a person, in one line, naming what WAS there (e.g.
/// "hyperfine output holds 2 benchmarks (\"./a\", \"./b\"): set metric.benchmark",
/// "no field \"mean_ns\" in criterion estimates; it has mean, median, std_dev, slope, median_abs_dev").
/// A value that is not finite is an Err too.
pub fn read(spec: &MetricSpec, text: &str, beside: Option<&Path>) -> Result<Reading, String> {
    if text.trim().is_empty() {
        return Err(format!(
            "the output is empty: no {} metric {:?} in it",
            spec.format.name(),
            spec.field
        ));
    }
    let reading = match &spec.format {
        Format::Auto => {
            let detected = detect(text);
            // Under Auto the user never said which tool wrote the text: say what it was taken for,
            // so that a wrong guess is visible and can be overridden with `format`.
            read_as(&detected, spec, text, beside).map_err(|e| {
                format!(
                    "output read as {} (detected; set format to override): {e}",
                    detected.name()
                )
            })?
        }
        format => read_as(format, spec, text, beside)?,
    };
    if let Some(bad) = std::iter::once(&reading.value)
        .chain(&reading.samples)
        .find(|v| !v.is_finite())
    {
        return Err(format!(
            "{} metric {:?} is {bad}, not a finite number",
            reading.format, spec.field
        ));
    }
    Ok(reading)
}

/// Reads `text` in one concrete format (never Auto).
fn read_as(
    format: &Format,
    spec: &MetricSpec,
    text: &str,
    beside: Option<&Path>,
) -> Result<Reading, String> {
    let benchmark = spec.benchmark.as_deref();
    let field = spec.field.as_str();
    match format {
        Format::Auto | Format::JsonLines => formats::json_lines(text, benchmark, field),
        Format::Pattern(regex) => formats::pattern(regex, text, benchmark, field),
        Format::Hyperfine => formats::hyperfine(&document(text, "hyperfine")?, benchmark, field),
        Format::GoogleBenchmark => {
            formats::google_benchmark(&document(text, "Google Benchmark")?, benchmark, field)
        }
        Format::Criterion => {
            formats::criterion(&document(text, "criterion")?, benchmark, field, beside)
        }
        Format::PytestBenchmark => {
            formats::pytest_benchmark(&document(text, "pytest-benchmark")?, benchmark, field)
        }
        Format::PerfStat => formats::perf_stat(text, field),
    }
}

/// Which format `text` is in, from its shape; JSON lines when nothing else fits.
fn detect(text: &str) -> Format {
    if let Some(doc) = json_document(text) {
        let entries = |key: &str| {
            doc.get(key)
                .and_then(Value::as_array)
                .filter(|a| !a.is_empty())
        };
        let all_have = |list: &Vec<Value>, keys: &[&str]| {
            list.iter().all(|e| keys.iter().all(|k| e.get(k).is_some()))
        };
        if entries("results").is_some_and(|r| all_have(r, &["command", "times"])) {
            return Format::Hyperfine;
        }
        if let Some(benchmarks) = entries("benchmarks") {
            let google = doc.get("context").is_some_and(Value::is_object)
                && benchmarks
                    .iter()
                    .all(|b| b.get("run_type").is_some() || b.get("time_unit").is_some());
            if google {
                return Format::GoogleBenchmark;
            }
            if all_have(benchmarks, &["stats"]) {
                return Format::PytestBenchmark;
            }
        }
        if doc
            .get("mean")
            .is_some_and(|m| m.get("point_estimate").is_some())
        {
            return Format::Criterion;
        }
        return Format::JsonLines;
    }
    if formats::looks_like_perf_stat(text) {
        return Format::PerfStat;
    }
    Format::JsonLines
}

/// The JSON document in `text`: the whole text, or else the first value starting at a line
/// that opens with `{`, so that a tool's document after a line of chatter (a build's progress
/// on the same stream) is still found. None when there is none.
fn json_document(text: &str) -> Option<Value> {
    if let Ok(doc) = serde_json::from_str::<Value>(text) {
        return doc.is_object().then_some(doc);
    }
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with('{') {
            let mut values =
                serde_json::Deserializer::from_str(&text[offset..]).into_iter::<Value>();
            if let Some(Ok(doc)) = values.next() {
                return Some(doc);
            }
        }
        offset += line.len();
    }
    None
}

/// The JSON document a structured format needs, or an Err saying what the text was instead.
fn document(text: &str, tool: &str) -> Result<Value, String> {
    if let Some(doc) = json_document(text) {
        return Ok(doc);
    }
    let why = match serde_json::from_str::<Value>(text) {
        Err(e) => e.to_string(),
        Ok(_) => "it is not a JSON object".to_string(),
    };
    Err(format!(
        "{tool} output is not a JSON document ({why}); it begins {}",
        snippet(text)
    ))
}

/// A one-line, shortened quotation of `text` for an error message.
fn snippet(text: &str) -> String {
    // 60 characters: enough to recognise a line, short enough to keep the message one line.
    const MAX: usize = 60;
    let text = text.trim();
    let short: String = text.chars().take(MAX).collect();
    if short.len() < text.len() {
        format!("{short:?}…")
    } else {
        format!("{short:?}")
    }
}

/// `message` with its line breaks folded, since every error here is one line.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The quoted names, at most a few of them, for "it has ..." messages.
fn quoted_list<S: AsRef<str>>(names: &[S]) -> String {
    // Five names identify the output; a Google Benchmark binary can hold hundreds.
    const SHOWN: usize = 5;
    let mut list: Vec<String> = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("{:?}", n.as_ref()))
        .collect();
    if names.len() > SHOWN {
        list.push(format!("and {} more", names.len() - SHOWN));
    }
    list.join(", ")
}

/// The Reading of one or several values: one is the value; several are the sub-samples and
/// their mean is the value.
fn reading(values: Vec<f64>, unit: Option<&str>, format: &'static str) -> Reading {
    let value = values.iter().sum::<f64>() / values.len() as f64;
    Reading {
        value,
        samples: if values.len() > 1 { values } else { Vec::new() },
        unit: unit.map(str::to_string),
        format,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(format: Format, benchmark: Option<&str>, field: &str) -> MetricSpec {
        MetricSpec {
            format,
            benchmark: benchmark.map(str::to_string),
            field: field.to_string(),
        }
    }

    #[test]
    fn kept_samples_are_evenly_spaced_and_at_most_the_bound() {
        use firstbad_wire::Series;
        let few: Vec<f64> = (0..KEPT_SAMPLES).map(|i| i as f64).collect();
        let s = Series::bounded("ms".into(), few.clone());
        assert_eq!((s.samples, s.count), (few, None));
        let many: Vec<f64> = (0..1_000_000).map(|i| i as f64).collect();
        let s = Series::bounded("ms".into(), many);
        assert_eq!((s.samples.len(), s.count), (KEPT_SAMPLES, Some(1_000_000)));
        let k = &s.samples;
        assert_eq!((k[0], k[1], k[KEPT_SAMPLES - 1]), (0.0, 244.0, 999_755.0));
    }

    #[test]
    fn every_hunt_file_name_round_trips() {
        for name in FORMAT_NAMES.iter().filter(|n| **n != "pattern") {
            let format = Format::from_hunt_file(Some(name), None, "mean").expect("a known name");
            assert_eq!(format.name(), *name);
        }
        assert_eq!(
            Format::from_hunt_file(None, None, "mean").unwrap().name(),
            "auto"
        );
    }

    #[test]
    fn an_unknown_format_name_lists_the_accepted_ones() {
        let err = Format::from_hunt_file(Some("hyperfin"), None, "mean").unwrap_err();
        assert!(err.contains("\"hyperfin\""), "{err}");
        for name in FORMAT_NAMES {
            assert!(err.contains(name), "{err}");
        }
    }

    #[test]
    fn a_pattern_makes_the_format_pattern() {
        let f = Format::from_hunt_file(None, Some(r"took (?P<ms>[0-9.]+) ms"), "ms").unwrap();
        assert_eq!(f.name(), "pattern");
        let f = Format::from_hunt_file(Some("pattern"), Some(r"(?P<ms>\d+)"), "ms").unwrap();
        assert_eq!(f.name(), "pattern");
    }

    #[test]
    fn a_pattern_without_the_fields_group_is_refused_naming_its_groups() {
        let err = Format::from_hunt_file(None, Some(r"(?P<us>\d+) (?P<n>\d+)"), "ms").unwrap_err();
        assert!(err.contains("\"ms\"") && err.contains("us, n"), "{err}");
        let err = Format::from_hunt_file(None, Some(r"took (\d+)"), "ms").unwrap_err();
        assert!(err.contains("no named group"), "{err}");
    }

    #[test]
    fn a_bad_regex_is_refused_in_one_line() {
        let err = Format::from_hunt_file(None, Some(r"took (?P<ms>[0-9.]+ ms"), "ms").unwrap_err();
        assert!(err.starts_with("pattern "), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn a_pattern_beside_a_structured_format_is_refused() {
        let err =
            Format::from_hunt_file(Some("hyperfine"), Some(r"(?P<ms>\d+)"), "ms").unwrap_err();
        assert!(
            err.contains("hyperfine") && err.contains("pattern"),
            "{err}"
        );
        let err = Format::from_hunt_file(Some("pattern"), None, "ms").unwrap_err();
        assert!(err.contains("needs pattern"), "{err}");
    }

    #[test]
    fn auto_detects_each_document_format() {
        let cases = [
            (
                r#"{"results":[{"command":"a","mean":1.0,"times":[1.0]}]}"#,
                "hyperfine",
            ),
            (
                r#"{"context":{},"benchmarks":[{"name":"BM","run_type":"iteration","real_time":1}]}"#,
                "google-benchmark",
            ),
            (
                r#"{"benchmarks":[{"name":"t","fullname":"f::t","stats":{"mean":1}}]}"#,
                "pytest-benchmark",
            ),
            (
                r#"{"mean":{"point_estimate":1.0},"median":{"point_estimate":1.0}}"#,
                "criterion",
            ),
            (
                "1.5,msec,task-clock,1500,100.00,0.5,CPUs utilized\n",
                "perf-stat",
            ),
            ("{\"mean\": 3}\n{\"mean\": 5}\n", "json"),
            ("no structure at all\n", "json"),
        ];
        for (text, name) in cases {
            assert_eq!(detect(text).name(), name, "{text}");
        }
    }

    #[test]
    fn auto_reports_the_format_it_detected_when_the_field_is_missing() {
        let text = r#"{"results":[{"command":"a","mean":1.0,"times":[1.0,1.0]}]}"#;
        let err = read(&spec(Format::Auto, None, "mean_ns"), text, None).unwrap_err();
        assert!(err.contains("read as hyperfine (detected"), "{err}");
        assert!(err.contains("\"mean_ns\"") && err.contains("mean"), "{err}");
        let err = read(&spec(Format::Auto, None, "ms"), "took 3 ms\n", None).unwrap_err();
        assert!(err.contains("read as json (detected"), "{err}");
    }

    #[test]
    fn auto_reads_a_detected_format_with_its_unit() {
        let text = r#"{"results":[{"command":"a","mean":2.0,"times":[1.0,3.0]}]}"#;
        let r = read(&spec(Format::Auto, None, "mean"), text, None).unwrap();
        assert_eq!(r.value, 2.0);
        assert_eq!(r.samples, vec![1.0, 3.0]);
        assert_eq!(r.unit.as_deref(), Some("s"));
        assert_eq!(r.format, "hyperfine");
    }

    #[test]
    fn a_document_after_chatter_lines_is_found() {
        let text = "   Compiling x v0.1\nrunning\n{\"results\":[{\"command\":\"a\",\"mean\":2.0,\
                    \"times\":[2.0]}]}\ntrailing words\n";
        let r = read(&spec(Format::Hyperfine, None, "mean"), text, None).unwrap();
        assert_eq!(r.value, 2.0);
        assert!(r.samples.is_empty(), "one time is no sub-samples");
    }

    #[test]
    fn a_structured_format_on_text_that_is_not_json_says_what_it_saw() {
        let err = read(
            &spec(Format::Hyperfine, None, "mean"),
            "Benchmark 1: x\n",
            None,
        )
        .unwrap_err();
        assert!(
            err.contains("not a JSON document") && err.contains("Benchmark 1"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn empty_output_is_an_error() {
        let err = read(&spec(Format::Auto, None, "mean"), " \n", None).unwrap_err();
        assert!(err.contains("empty"), "{err}");
    }

    #[test]
    fn a_value_that_is_not_finite_is_an_error() {
        let regex = regex::Regex::new(r"took (?P<ms>\S+) ms").unwrap();
        let err = read(
            &spec(Format::Pattern(regex), None, "ms"),
            "took inf ms",
            None,
        )
        .unwrap_err();
        assert!(err.contains("not a finite number"), "{err}");
    }

    #[test]
    fn long_lists_are_cut() {
        let names: Vec<String> = (0..8).map(|i| format!("b{i}")).collect();
        assert_eq!(
            quoted_list(&names),
            "\"b0\", \"b1\", \"b2\", \"b3\", \"b4\", and 3 more"
        );
    }
}
