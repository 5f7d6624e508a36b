//! The `[test]` table of a command hunt: the command, its timeout and jobs, and for a metric
//! command hunt its build, where its number is read, which way is worse and `[classify]`.

use super::classify_table::classify;
use super::raw::{RawClassify, RawMetric, RawTest};
use super::read::snippet;
use super::validate::Validator;
use super::*;
use crate::error::ConfigError;

pub(super) fn test_table(
    v: &Validator,
    mut test: RawTest,
    classify_table: Option<RawClassify>,
) -> Result<TestConfig, ConfigError> {
    if test.command.trim().is_empty() {
        return Err(v.field(
            "test.command",
            "is empty: give a shell command, e.g. \"make -s check\"",
        ));
    }
    bounds::TEST_COMMAND_BYTES
        .length(&test.command)
        .map_err(|m| v.field("test.command", m))?;
    let measure = match test.metric.take() {
        Some(metric) => Some(measure(v, &test, metric, classify_table)?),
        None => {
            // What only a metric hunt reads, set in an exit-status hunt: a hunt file that
            // means to measure and forgot the metric, not something to ignore.
            let set = [
                ("test.build", test.build.is_some()),
                ("test.build_timeout_s", test.build_timeout_s.is_some()),
                ("test.output", test.output.is_some()),
                ("test.format", test.format.is_some()),
                ("test.pattern", test.pattern.is_some()),
                ("test.direction", test.direction.is_some()),
                ("classify", classify_table.is_some()),
            ];
            if let Some((field, _)) = set.iter().find(|(_, s)| *s) {
                return Err(v.field(
                    field,
                    "is read by metric hunts only: set test.metric (e.g. metric = \"mean\") \
                     to judge each commit by a number its command prints, or remove this to \
                     judge it by the command's exit status",
                ));
            }
            None
        }
    };
    Ok(TestConfig {
        command: test.command,
        // An hour by default: a test suite that runs longer is rarely what one bisects with.
        timeout_s: v.int(&bounds::TEST_TIMEOUT_S, None, test.timeout_s)?,
        jobs: v.int(&bounds::TEST_JOBS, None, test.jobs)?,
        measure,
    })
}

/// The metric half of `[test]`, and `[classify]`.
fn measure(
    v: &Validator,
    test: &RawTest,
    metric: RawMetric,
    classify_table: Option<RawClassify>,
) -> Result<MeasureConfig, ConfigError> {
    let (benchmark, field) = match metric {
        RawMetric::Field(f) => (None, f),
        RawMetric::Table(t) => (t.benchmark, t.field),
    };
    if field.trim().is_empty() {
        return Err(v.field(
            "test.metric",
            "is empty: name the number to judge by, e.g. \"mean\" (hyperfine), \
             \"real_time\" (Google Benchmark) or a key of the JSON line the command prints",
        ));
    }
    v.one_line("test.metric", &field)?;
    if let Some(b) = &benchmark {
        v.one_line("test.metric.benchmark", b)?;
    }
    let format = crate::metric::Format::from_hunt_file(
        test.format.as_deref(),
        test.pattern.as_deref(),
        &field,
    )
    .map_err(|e| {
        let f = if test.pattern.is_some() {
            "test.pattern"
        } else {
            "test.format"
        };
        v.field(f, e)
    })?;
    let direction = match test.direction.as_deref().unwrap_or("lower-is-better") {
        "lower-is-better" => Direction::LowerIsBetter,
        "higher-is-better" => Direction::HigherIsBetter,
        other => {
            return Err(v.field(
                "test.direction",
                format!(
                    "{} is not \"lower-is-better\" or \"higher-is-better\"",
                    snippet(other)
                ),
            ))
        }
    };
    let output = match &test.output {
        None => None,
        Some(o) => {
            let p = PathBuf::from(o);
            // Read from the candidate's checkout: a path outside it would be shared by every
            // candidate, and one run could read another's result.
            // Its last word names the file: `"."`, `"d/"` or `"d/."` name a directory, which
            // no run can write a result to (issue 61, finding 6: every run failed, exit 5).
            let last = o.rsplit('/').next().unwrap_or("");
            if o.trim().is_empty()
                || p.is_absolute()
                || p.components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
                || matches!(last, "" | "." | "..")
            {
                return Err(v.field(
                    "test.output",
                    format!(
                        "{} must be the path of a file inside the checkout, relative to it \
                         (e.g. \"results.json\"), where the command writes its result",
                        snippet(o)
                    ),
                ));
            }
            Some(p)
        }
    };
    if test.build.as_deref().is_some_and(|b| b.trim().is_empty()) {
        return Err(v.field(
            "test.build",
            "is empty: give the build command (e.g. \"make -s\"), or remove it",
        ));
    }
    if let Some(build) = &test.build {
        bounds::TEST_BUILD_BYTES
            .length(build)
            .map_err(|m| v.field("test.build", m))?;
    }
    let raw_classify = classify_table.unwrap_or_default();
    let drift_set = raw_classify.drift_check_every.is_some();
    let mut classify = classify(v, raw_classify)?;
    if !drift_set {
        // A run of a command takes seconds where a kernel boot takes a minute: the good
        // endpoint is re-run twice as often, so that a machine that slows down during the
        // hunt is seen within a few verdicts.
        classify.drift_check_every = METRIC_DRIFT_CHECK_EVERY;
    }
    Ok(MeasureConfig {
        build: test.build.clone(),
        build_timeout_s: v.int(&bounds::TEST_BUILD_TIMEOUT_S, None, test.build_timeout_s)?,
        output,
        metric: crate::metric::MetricSpec {
            format,
            benchmark,
            field,
        },
        direction,
        classify,
    })
}

/// `classify.drift_check_every` of a metric command hunt that does not set it.
pub const METRIC_DRIFT_CHECK_EVERY: u32 = 2;
