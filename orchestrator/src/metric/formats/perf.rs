//! `perf stat -x,`: one counter line a metric.

use super::*;

/// One counter line of `perf stat -x,`.
struct PerfLine<'a> {
    value: &'a str,
    unit: &'a str,
    event: &'a str,
    /// `-I` interval mode, where a line is one interval's count.
    interval: bool,
}

/// A counter's value as perf prints it: a number, or `<not supported>` / `<not counted>`.
fn is_perf_value(s: &str) -> bool {
    s.trim().parse::<f64>().is_ok() || s.starts_with("<not ")
}

/// An event name: perf's (`task-clock`, `cycles:u`, `cpu/cycles/`), never a number or a unit
/// left empty.
fn is_perf_event(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic()) && !s.contains(' ')
}

/// The line as a perf counter line: `value,unit,event,...`, or with -I `time,value,unit,event,...`
/// (the unit column is never a number, which tells the two apart).
fn perf_line(line: &str) -> Option<PerfLine<'_>> {
    let line = line.trim();
    if line.starts_with('#') {
        return None;
    }
    let cols: Vec<&str> = line.split(',').map(str::trim).collect();
    if cols.len() >= 4
        && cols[0].parse::<f64>().is_ok()
        && is_perf_value(cols[1])
        && is_perf_event(cols[3])
    {
        return Some(PerfLine {
            value: cols[1],
            unit: cols[2],
            event: cols[3],
            interval: true,
        });
    }
    if cols.len() >= 3 && is_perf_value(cols[0]) && is_perf_event(cols[2]) {
        return Some(PerfLine {
            value: cols[0],
            unit: cols[1],
            event: cols[2],
            interval: false,
        });
    }
    None
}

/// Whether the text holds a `perf stat -x,` counter line (for Auto).
pub(in crate::metric) fn looks_like_perf_stat(text: &str) -> bool {
    text.lines().any(|l| perf_line(l).is_some())
}

/// `perf stat -x,`: the lines of the event `field` (with or without its `:modifier`). Several
/// lines (-I intervals) are sub-samples; `-r N` writes one line, the mean.
pub(in crate::metric) fn perf_stat(text: &str, field: &str) -> Result<Reading, String> {
    let lines: Vec<PerfLine> = text.lines().filter_map(perf_line).collect();
    if lines.is_empty() {
        return Err(format!(
            "no perf stat -x, counter line in the output (perf stat writes to stderr, or to -o \
             FILE); it begins {}",
            snippet(text)
        ));
    }
    let matches = |event: &str| event == field || event.split(':').next() == Some(field);
    let mut values = Vec::new();
    let mut unit = None;
    let mut uncounted = 0;
    for line in lines.iter().filter(|l| matches(l.event)) {
        match line.value {
            "<not supported>" => {
                return Err(format!(
                    "perf stat: {} is <not supported> on this machine (hardware counters are \
                     often missing in VMs); use a software event such as task-clock",
                    line.event
                ))
            }
            // In interval mode an interval in which the command never ran counts nothing.
            v if v.starts_with("<not ") && line.interval => uncounted += 1,
            v if v.starts_with("<not ") => {
                return Err(format!(
                    "perf stat: {} is {v} (perf never scheduled the counter: the command ended \
                     first, or counters were multiplexed)",
                    line.event
                ))
            }
            v => {
                values
                    .push(v.parse::<f64>().map_err(|_| {
                        format!("perf stat: {} is {v:?}, not a number", line.event)
                    })?);
                if unit.is_none() && !line.unit.is_empty() {
                    unit = Some(line.unit);
                }
            }
        }
    }
    if values.is_empty() {
        if uncounted > 0 {
            return Err(format!(
                "perf stat: {field} is <not counted> in all {uncounted} intervals"
            ));
        }
        let mut events: Vec<&str> = Vec::new();
        for l in &lines {
            if !events.contains(&l.event) {
                events.push(l.event);
            }
        }
        return Err(format!(
            "perf stat output has no event {field:?}; it has {}",
            events.join(", ")
        ));
    }
    Ok(reading(values, unit, "perf-stat"))
}
