//! STUB until the metric-formats branch lands (helper): the API only.
#![allow(missing_docs, unused_variables)]

#[derive(Debug, Clone)]
pub enum Format {
    Auto,
    JsonLines,
    Pattern(regex::Regex),
    Hyperfine,
    GoogleBenchmark,
    Criterion,
    PytestBenchmark,
    PerfStat,
}

impl Format {
    pub fn from_hunt_file(
        name: Option<&str>,
        pattern: Option<&str>,
        field: &str,
    ) -> Result<Format, String> {
        match pattern {
            Some(p) => regex::Regex::new(p)
                .map(Format::Pattern)
                .map_err(|e| e.to_string()),
            None => Ok(Format::JsonLines),
        }
    }
    pub fn name(&self) -> &'static str {
        "json"
    }
}

#[derive(Debug, Clone)]
pub struct MetricSpec {
    pub format: Format,
    pub benchmark: Option<String>,
    pub field: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub value: f64,
    pub samples: Vec<f64>,
    pub unit: Option<String>,
    pub format: &'static str,
}

pub fn read(
    spec: &MetricSpec,
    text: &str,
    beside: Option<&std::path::Path>,
) -> Result<Reading, String> {
    for line in text.lines().rev() {
        if let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(line) {
            if let Some(v) = o.get(&spec.field).and_then(|v| v.as_f64()) {
                return Ok(Reading {
                    value: v,
                    samples: vec![],
                    unit: None,
                    format: "json",
                });
            }
        }
    }
    Err(format!("no JSON line holds {:?}", spec.field))
}
