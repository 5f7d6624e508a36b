//! fio job files read as fio reads them, checked against an allowlist, and written back from the
//! parsed form: fio never sees the user's text (issue 19).
//!
//! fio's reader (`__parse_jobs_ini` in fio's `init.c`) takes the file a line at a time with
//! `fgets(buf, 8192, f)`; a line whose first non-blank character is `#` or `;` is a comment, a
//! line starting with `[` opens a section, anything else in a section is an option, `key=value`
//! or a bare `key`, and a line starting with `include` pulls in another file. The allowlist and
//! the reasons for it are in `docs/agent-fio.md`.

use std::fmt::Write as _;

/// fio reads job files through `fgets` with this buffer (`OPT_LEN_MAX` in fio's `parse.h`):
/// one read takes at most 8191 bytes, and the rest of a longer line is read as a line of its
/// own. A `filename=` hidden after byte 8191 of a comment was an option to fio (issue 19).
pub const FIO_LINE_BUFFER: usize = 8192;
/// Longest line, without its newline, that fio reads in one piece together with its newline.
pub const MAX_LINE_BYTES: usize = FIO_LINE_BUFFER - 2;
/// Longest section name: fio's own limit (`%255[^\n]`); names also make the default file names.
const MAX_SECTION_NAME: usize = 64;
/// Longest option value the agent passes on: values are numbers, sizes and short words.
const MAX_VALUE_BYTES: usize = 128;

/// The I/O engines a job may use: ones built into fio that do plain I/O on the job's files.
/// Any other name is a shared object fio tries to `dlopen` (`./x.so`, `libcrypt.so.1`), a
/// program (`exec`) or the network (`net`), so it is refused.
pub const ENGINES: &[&str] = &[
    "psync", "sync", "pvsync", "pvsync2", "vsync", "libaio", "io_uring", "posixaio", "mmap",
];

/// What an option's value may look like.
#[derive(Debug, Clone, Copy)]
enum Value {
    /// No value, or `0` / `1`.
    Flag,
    /// Decimal digits.
    Int,
    /// A size, range or list of sizes and numbers: `4k`, `50%`, `4k-64k`, `4k,64k`,
    /// `4k/10:64k/90`: starts with a digit, then digits, letters and `.%:,/-` only.
    Size,
    /// A byte count the agent bounds: a size [`parse_size`] reads (`64k`, `1.5g`) or a
    /// percentage (`50%`), as [`ByteCount::parse`] reads it.
    Bytes,
    /// `filesize`: a size, or a range `low-high` / `low:high` with the low end first, as
    /// [`parse_size_range`] reads it; never a percentage.
    FileSize,
    /// A duration: digits with an optional unit (`us`, `ms`, `s`, `m`, `h`, `d`).
    Time,
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// One of these words, optionally followed by `:` and a size-like tail (`randread:8`,
    /// `zipf:1.2`).
    OneOfWithTail(&'static [&'static str]),
}

/// Checks a `filesize` value the way fio reads it (`filesize` has no callback in fio's
/// `options.c`, so `parse.c` stores the first number as the low end and the last as the
/// high end, split at `,`, else `:`, else `-`, and never swaps them).
fn file_size(value: &str) -> Result<(), String> {
    // Measured with fio 3.33: `filesize=50%` filled an 8 MiB file system, and `128k-64k` wrote
    // a file of 12.5 GB in 20 s (sizes are drawn as low + (high − low) × r, unsigned).
    let why = if value.ends_with('%') {
        "is a percentage, which fio reads as a size of 2^64 − 51 bytes"
    } else if parse_size_range(value).is_none() {
        "is not a size (64m) or a range with the low end first and one `-` or `:` (1g-2g): fio \
         does not swap the ends, and of more than two numbers takes the first and the last"
    } else {
        return Ok(());
    };
    Err(format!(
        "{why}; give each file's size (filesize=64m) or a range (filesize=1g-2g)"
    ))
}

/// The options a job may set, and the shape of their values. Every option here acts only on
/// the job's own files in the run directory (or on the agent's scratch device): none names a
/// path, a program, a log file, a cgroup, a scheduler or another file to read.
const OPTIONS: &[(&str, Value)] = &[
    // What to do.
    (
        "rw",
        Value::OneOfWithTail(&[
            "read",
            "write",
            "randread",
            "randwrite",
            "rw",
            "readwrite",
            "randrw",
        ]),
    ),
    (
        "readwrite",
        Value::OneOfWithTail(&[
            "read",
            "write",
            "randread",
            "randwrite",
            "rw",
            "readwrite",
            "randrw",
        ]),
    ),
    ("rwmixread", Value::Int),
    ("rwmixwrite", Value::Int),
    ("ioengine", Value::OneOf(ENGINES)),
    ("iodepth", Value::Int),
    ("iodepth_batch", Value::Int),
    ("iodepth_batch_submit", Value::Int),
    ("iodepth_batch_complete_min", Value::Int),
    ("iodepth_batch_complete_max", Value::Int),
    ("iodepth_low", Value::Int),
    ("numjobs", Value::Int),
    ("thread", Value::Flag),
    // Sizes and where in the file.
    ("bs", Value::Size),
    ("blocksize", Value::Size),
    ("bsrange", Value::Size),
    ("blocksize_range", Value::Size),
    ("bssplit", Value::Size),
    ("ba", Value::Size),
    ("blockalign", Value::Size),
    ("size", Value::Bytes),
    ("filesize", Value::FileSize),
    ("io_size", Value::Bytes),
    ("io_limit", Value::Bytes),
    ("offset", Value::Bytes),
    ("offset_increment", Value::Bytes),
    ("nrfiles", Value::Int),
    ("openfiles", Value::Int),
    (
        "file_service_type",
        Value::OneOfWithTail(&["random", "roundrobin", "sequential"]),
    ),
    ("loops", Value::Int),
    // Caching and syncing.
    ("direct", Value::Flag),
    ("buffered", Value::Flag),
    ("sync", Value::OneOf(&["0", "1", "none", "sync", "dsync"])),
    ("fsync", Value::Int),
    ("fdatasync", Value::Int),
    ("end_fsync", Value::Flag),
    ("fsync_on_close", Value::Flag),
    ("invalidate", Value::Flag),
    ("overwrite", Value::Flag),
    ("pre_read", Value::Flag),
    (
        "fallocate",
        Value::OneOf(&["none", "native", "posix", "keep", "truncate", "0", "1"]),
    ),
    ("unlink", Value::Flag),
    // io_uring and pvsync2 knobs.
    ("hipri", Value::Flag),
    ("fixedbufs", Value::Flag),
    ("registerfiles", Value::Flag),
    // Time and pace.
    ("runtime", Value::Time),
    ("timeout", Value::Time),
    ("time_based", Value::Flag),
    ("ramp_time", Value::Time),
    ("startdelay", Value::Time),
    ("thinktime", Value::Time),
    ("thinktime_spin", Value::Time),
    ("thinktime_blocks", Value::Int),
    ("rate", Value::Size),
    ("rate_min", Value::Size),
    ("rate_iops", Value::Size),
    ("rate_iops_min", Value::Size),
    ("rate_process", Value::OneOf(&["linear", "poisson"])),
    // Randomness.
    ("norandommap", Value::Flag),
    ("randrepeat", Value::Flag),
    ("randseed", Value::Int),
    ("percentage_random", Value::Size),
    (
        "random_distribution",
        Value::OneOfWithTail(&["random", "zipf", "pareto", "normal", "zoned"]),
    ),
    (
        "random_generator",
        Value::OneOf(&["tausworthe", "lfsr", "tausworthe64"]),
    ),
    // Buffer contents.
    ("zero_buffers", Value::Flag),
    ("refill_buffers", Value::Flag),
    ("scramble_buffers", Value::Flag),
    ("buffer_compress_percentage", Value::Int),
    ("buffer_compress_chunk", Value::Size),
    ("dedupe_percentage", Value::Int),
    // Ordering and reporting.
    ("stonewall", Value::Flag),
    ("wait_for_previous", Value::Flag),
    ("new_group", Value::Flag),
    ("group_reporting", Value::Flag),
    ("clat_percentiles", Value::Flag),
    ("lat_percentiles", Value::Flag),
    ("slat_percentiles", Value::Flag),
    ("percentile_list", Value::Size),
];

/// Why a job file was refused; the message names the line and the option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fio: job line {line}: {message}")]
pub struct JobError {
    /// 1-based line number in the user's text.
    pub line: usize,
    /// What is wrong and what to do.
    pub message: String,
}

/// A job file as fio would read it, with only allowed options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFile {
    /// The sections in order: `[global]` ones and jobs.
    pub sections: Vec<Section>,
}

/// One `[name]` section and its options in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The name between the brackets (`global...` for global sections, as fio reads it).
    pub name: String,
    /// Its options, in order (a later one overrides an earlier one, as in fio).
    pub options: Vec<JobOption>,
}

/// One option line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOption {
    /// The option's name, from the allowlist.
    pub key: &'static str,
    /// Its value, if it has one.
    pub value: Option<String>,
}

impl Section {
    /// Whether fio treats this section as global (it compares the first 6 bytes).
    pub fn is_global(&self) -> bool {
        self.name.starts_with("global")
    }
}

/// fio's blanks for comments: `isspace` or `iscntrl` in the C locale.
fn is_fio_blank(c: char) -> bool {
    c.is_ascii_whitespace() || c.is_ascii_control()
}

/// Parses `text` as fio would, refusing lines fio would split, `include`, options outside the
/// allowlist and values that do not have their option's shape.
pub fn parse(text: &str) -> Result<JobFile, JobError> {
    let mut sections: Vec<Section> = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = i + 1;
        let err = |message: String| JobError { line, message };
        if raw.len() > MAX_LINE_BYTES {
            return Err(err(format!(
                "the line is {} bytes; fio reads lines through a {FIO_LINE_BUFFER}-byte buffer \
                 and would read everything after byte {} as a line of its own: keep lines \
                 (comments too) under {} bytes",
                raw.len(),
                FIO_LINE_BUFFER - 1,
                MAX_LINE_BYTES + 1
            )));
        }
        // Comments and blank lines, exactly as fio's is_empty_or_comment() sees them.
        match raw.chars().find(|&c| !is_fio_blank(c)) {
            None | Some('#') | Some(';') => continue,
            Some(_) => {}
        }
        let content = raw.trim_matches(|c: char| c.is_ascii_whitespace());
        if let Some(c) = content.chars().find(|c| c.is_ascii_control() && *c != '\t') {
            return Err(err(format!(
                "control character {c:?}: a job file is plain text"
            )));
        }
        if content.starts_with("include") {
            return Err(err(
                "include is refused: the agent checks only the text it is given; put the \
                 included job inline"
                    .to_owned(),
            ));
        }
        if let Some(rest) = content.strip_prefix('[') {
            sections.push(Section {
                name: section_name(rest).map_err(err)?,
                options: Vec::new(),
            });
            continue;
        }
        let Some(section) = sections.last_mut() else {
            return Err(err(format!(
                "{content:?} is outside any [section]; start the job with [global] or [name]"
            )));
        };
        section.options.push(option(content).map_err(err)?);
    }
    if !sections.iter().any(|s| !s.is_global()) {
        return Err(JobError {
            line: 1,
            message: "the job file has no job section, only [global] ones: add e.g. [job]"
                .to_owned(),
        });
    }
    Ok(JobFile { sections })
}

/// The name in `[name]` (given without the `[`): letters, digits, `_`, `.`, `-`, since fio
/// also makes file names from it.
fn section_name(rest: &str) -> Result<String, String> {
    let name = rest
        .strip_suffix(']')
        .ok_or_else(|| format!("[{rest}: a section line is [name], with nothing after the ]"))?;
    let ok = !name.is_empty()
        && name.len() <= MAX_SECTION_NAME
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "section name {name:?}: use 1 to {MAX_SECTION_NAME} letters, digits, '_', '.' or \
             '-' (fio names the job's files after it)"
        ))
    }
}

/// One `key=value` or bare `key` line, checked against [`OPTIONS`].
fn option(content: &str) -> Result<JobOption, String> {
    let (key, value) = match content.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v.trim())),
        None => (content, None),
    };
    let Some(&(key, shape)) = OPTIONS.iter().find(|(name, _)| *name == key) else {
        return Err(format!(
            "option {key:?} is not allowed: the agent passes only the options listed in \
             docs/agent-fio.md, none of which names a path, a program or a log file"
        ));
    };
    let bad = |what: &str| format!("option {key}: value {value:?} {what}");
    let Some(value) = value else {
        return match shape {
            Value::Flag => Ok(JobOption { key, value: None }),
            _ => Err(format!("option {key} needs a value ({key}=...)")),
        };
    };
    if value.len() > MAX_VALUE_BYTES {
        return Err(bad(&format!("is longer than {MAX_VALUE_BYTES} bytes")));
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let size_like = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '.' | '%' | ':' | ',' | '/' | '-')
            })
    };
    match shape {
        Value::Flag if value == "0" || value == "1" => {}
        Value::Flag => return Err(bad("is not 0 or 1")),
        Value::Int if digits(value) => {}
        Value::Int => return Err(bad("is not a whole number")),
        Value::Size if size_like(value) => {}
        Value::Size => {
            return Err(bad(
                "is not a size such as 4k, 1m, 50% or 4k-64k (no $variables or expressions)",
            ))
        }
        Value::Bytes => {
            if ByteCount::parse(value).is_none() {
                return Err(bad("is not a size such as 64k, 1m, 1.5g or 50%"));
            }
        }
        Value::FileSize => file_size(value).map_err(|e| bad(&e))?,
        Value::Time => {
            let number = value.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            let unit = &value[number.len()..];
            if !digits(number) || !["", "us", "ms", "s", "m", "h", "d"].contains(&unit) {
                return Err(bad("is not a duration such as 30, 30s, 500ms or 2m"));
            }
        }
        Value::OneOf(words) => {
            if !words.contains(&value) {
                return Err(bad(&format!("is not one of {}", words.join(", "))));
            }
        }
        Value::OneOfWithTail(words) => {
            let (word, tail) = value.split_once(':').unwrap_or((value, ""));
            if !words.contains(&word) || !(tail.is_empty() || size_like(tail)) {
                return Err(bad(&format!(
                    "is not one of {} (optionally with :N)",
                    words.join(", ")
                )));
            }
        }
    }
    Ok(JobOption {
        key,
        value: Some(value.to_owned()),
    })
}

impl JobFile {
    /// The text fio runs: a leading `[global]` with `filename=<device>` when the job runs on
    /// a scratch device, then every section and option in order, one per line, no comments.
    pub fn render(&self, device: Option<&str>) -> String {
        let mut out = String::from("; written by firstbad-agent from the checked job\n");
        if let Some(device) = device {
            // Jobs inherit the global options before them, and no job can set filename.
            let _ = writeln!(out, "[global]\nfilename={device}");
        }
        for section in &self.sections {
            let _ = writeln!(out, "[{}]", section.name);
            for o in &section.options {
                match &o.value {
                    Some(v) => {
                        let _ = writeln!(out, "{}={v}", o.key);
                    }
                    None => {
                        let _ = writeln!(out, "{}", o.key);
                    }
                }
            }
        }
        out
    }
}

/// A byte count as a job gives it: bytes, or a share of the size of files or a device that
/// exists before the job (fio's `50%`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ByteCount {
    /// This many bytes.
    Bytes(u64),
    /// A share of what is there, as the job wrote it (`50%`).
    Percent(String),
}

impl ByteCount {
    /// `text` as a size [`parse_size`] reads or a whole or decimal percentage up to 100;
    /// `None` for anything else.
    pub fn parse(text: &str) -> Option<ByteCount> {
        match text.strip_suffix('%') {
            Some(n) => n
                .parse::<f64>()
                .is_ok_and(|n| (0.0..=100.0).contains(&n))
                .then(|| ByteCount::Percent(text.to_owned())),
            None => parse_size(text).map(ByteCount::Bytes),
        }
    }
}

impl std::fmt::Display for ByteCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ByteCount::Bytes(n) => write!(f, "{n}"),
            ByteCount::Percent(p) => f.write_str(p),
        }
    }
}

/// A `filesize` value's low and high ends in bytes: `64m` (both ends the same), `1g-2g` or
/// `1g:2g`; `None` for a percentage, a range given high end first, more than two numbers or a
/// `,` (fio would read those differently from what they seem to say).
pub fn parse_size_range(text: &str) -> Option<(u64, u64)> {
    let (low, high) = match text.split_once(['-', ':']) {
        Some((low, high)) => (parse_size(low)?, parse_size(high)?),
        None => {
            let size = parse_size(text)?;
            (size, size)
        }
    };
    (low <= high).then_some((low, high))
}

/// What one job section asks of the host, with the global options before it applied: the
/// figures the agent bounds (see `workloads::budget`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobShape {
    /// The section's name.
    pub name: String,
    /// `numjobs` (fio's default 1): processes or threads running this job.
    pub numjobs: u64,
    /// `iodepth` (default 1): buffers in flight per process.
    pub iodepth: u64,
    /// The largest block size any of `bs`, `bsrange`, `bssplit` names (default 4 KiB).
    pub max_bs: u64,
    /// `size`: the bytes of each process's files together, or a share of them; only the
    /// default of `io_size` when `filesize` is given.
    pub size: Option<ByteCount>,
    /// The high end of `filesize` (a size or a range): the most bytes of each file, whatever
    /// `size` says.
    pub filesize_max: Option<u64>,
    /// `offset`: where I/O starts in each file; fio writes from there to offset + the file's
    /// share of `size`.
    pub offset: Option<ByteCount>,
    /// `offset_increment`: the k-th process of the job (from 0, `numjobs`) starts at
    /// offset + k × offset_increment.
    pub offset_increment: Option<ByteCount>,
    /// `nrfiles` (default 1): files per process.
    pub nrfiles: u64,
}

/// Options whose values are block sizes, for [`JobShape::max_bs`].
const BLOCK_SIZE_KEYS: &[&str] = &["bs", "blocksize", "bsrange", "blocksize_range", "bssplit"];

impl JobFile {
    /// Every job section's shape, in order (global sections are not jobs).
    pub fn jobs(&self) -> Vec<JobShape> {
        let mut globals: Vec<&JobOption> = Vec::new();
        let mut jobs = Vec::new();
        for section in &self.sections {
            if section.is_global() {
                globals.extend(&section.options);
                continue;
            }
            let effective: Vec<&JobOption> =
                globals.iter().copied().chain(&section.options).collect();
            // The last setting wins, as in fio.
            let last = |keys: &[&str]| {
                effective
                    .iter()
                    .rev()
                    .find(|o| keys.contains(&o.key))
                    .and_then(|o| o.value.as_deref())
            };
            let count = |key: &str| {
                last(&[key])
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(1)
                    .max(1)
            };
            let max_bs = effective
                .iter()
                .filter(|o| BLOCK_SIZE_KEYS.contains(&o.key))
                .filter_map(|o| o.value.as_deref())
                .flat_map(|v| v.split([',', ':', '/', '-']))
                .filter_map(parse_size)
                .max()
                .unwrap_or(4096);
            // parse() checked these values with the same functions, so none is dropped here.
            let bytes = |key: &str| last(&[key]).and_then(ByteCount::parse);
            jobs.push(JobShape {
                name: section.name.clone(),
                numjobs: count("numjobs"),
                iodepth: count("iodepth"),
                max_bs,
                size: bytes("size"),
                filesize_max: last(&["filesize"])
                    .and_then(parse_size_range)
                    .map(|(_, high)| high),
                offset: bytes("offset"),
                offset_increment: bytes("offset_increment"),
                nrfiles: count("nrfiles"),
            });
        }
        jobs
    }
}

/// A fio size (`4k`, `1m`, `1.5g`, `64KiB`, `512`) in bytes, with fio's default `kb_base` of
/// 1024; `None` for percentages and anything else.
pub fn parse_size(text: &str) -> Option<u64> {
    let end = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(end);
    let number: f64 = number.parse().ok()?;
    let unit = unit.to_ascii_lowercase();
    let unit = unit.trim_end_matches('b').trim_end_matches('i');
    let scale: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        "p" => 1 << 50,
        "e" => 1 << 60,
        _ => return None,
    };
    // Saturating float-to-int: an absurd size becomes u64::MAX, which every bound refuses.
    Some((number * scale as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_options_and_comments_as_fio_reads_them() {
        let job = parse(
            "; leading comment\n\n[global]\n  bs = 4k \n\t# indented comment\n[w]\nrw=randwrite:8\n\
             stonewall\ntime_based=1\nruntime=30s\r\n",
        )
        .expect("valid job");
        assert_eq!(job.sections.len(), 2);
        assert!(job.sections[0].is_global() && !job.sections[1].is_global());
        assert_eq!(
            job.render(None),
            "; written by firstbad-agent from the checked job\n[global]\nbs=4k\n[w]\n\
             rw=randwrite:8\nstonewall\ntime_based=1\nruntime=30s\n"
        );
        assert!(job
            .render(Some("/dev/loop7"))
            .contains("[global]\nfilename=/dev/loop7\n[global]\nbs=4k\n"));
    }

    // issue 19: fio reads 8191 bytes at a time; the rest of a longer line is a line to fio.
    #[test]
    fn a_line_fio_would_split_is_refused_and_one_that_fits_is_not() {
        let fits = format!("[w]\n#{}\nsize=4k\n", "x".repeat(MAX_LINE_BYTES - 1));
        assert!(parse(&fits).is_ok());
        let split = format!("[w]\n#{}filename=/etc/passwd\n", "x".repeat(MAX_LINE_BYTES));
        let e = parse(&split).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("8192-byte buffer"), "{e}");
    }

    #[test]
    fn refusals_name_the_line_and_the_option() {
        for (text, line, named) in [
            ("[w]\nfilename=/dev/sda\n", 2, "\"filename\""),
            ("[w]\n Directory = /etc\n", 2, "\"Directory\""),
            ("include /etc/x.fio\n[w]\n", 1, "include"),
            ("[w]\nincludefoo\n", 2, "include"),
            ("[w]\nioengine=external:/tmp/x.so\n", 2, "ioengine"),
            ("[w]\nioengine=libcrypt.so.1\n", 2, "psync"),
            ("[w]\nioengine=exec\n", 2, "ioengine"),
            ("[w]\nprogram=/bin/sh\n", 2, "\"program\""),
            ("[w]\nwrite_bw_log=x\n", 2, "\"write_bw_log\""),
            ("[w]\nsize=${SIZE}\n", 2, "size"),
            ("[w]\nbs=$((4*1024))\n", 2, "bs"),
            ("[w]\nsize=1x\n", 2, "size"),
            ("[w]\nsize=4k-8k\n", 2, "size"),
            ("[w]\nsize=200%\n", 2, "size"),
            ("[w]\nnumjobs=\n", 2, "numjobs"),
            ("[w]\nruntime=10 years\n", 2, "runtime"),
            ("[w]\ndirect=yes\n", 2, "direct"),
            ("[w]\nrw=trim\n", 2, "rw"),
            ("[w]\nbs\n", 2, "needs a value"),
            ("rw=read\n[w]\n", 1, "outside any [section]"),
            ("[../../etc/x]\nrw=read\n", 1, "section name"),
            ("[w] x\nrw=read\n", 1, "section"),
            ("[w]\nsize=4k\u{0}filename=/x\n", 2, "control character"),
            ("[global]\nrw=read\n", 1, "no job section"),
            // fio writes until ENOSPC with these: never allowed (issue 32, finding 6).
            ("[w]\nfill_device=1\n", 2, "\"fill_device\""),
            ("[w]\nfill_fs=1\n", 2, "\"fill_fs\""),
            ("[w]\nfile_append=1\n", 2, "\"file_append\""),
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(named), "{text:?}: {e}");
            assert!(e.to_string().starts_with("fio: job line"), "{e}");
        }
    }

    #[test]
    fn job_shapes_inherit_the_global_sections_before_them() {
        let job = parse(
            "[global]\nbs=4k\nnumjobs=2\n[a]\nsize=1m\n[global]\niodepth=8\n\
             [b]\nbssplit=4k/10:1m/90\nfilesize=1g-2g\nnumjobs=3\nnrfiles=4\noffset=1m\n\
             [c]\nsize=50%\noffset_increment=10%\n",
        )
        .expect("valid");
        let jobs = job.jobs();
        let shape = |i: usize| {
            let j: &JobShape = &jobs[i];
            (
                j.numjobs,
                j.iodepth,
                j.max_bs,
                j.size.clone(),
                j.filesize_max,
                j.nrfiles,
            )
        };
        let offsets = |i: usize| (jobs[i].offset.clone(), jobs[i].offset_increment.clone());
        assert_eq!(jobs.len(), 3);
        assert_eq!(
            shape(0),
            (2, 1, 4096, Some(ByteCount::Bytes(1 << 20)), None, 1)
        );
        assert_eq!(shape(1), (3, 8, 1 << 20, None, Some(2 << 30), 4));
        assert_eq!(offsets(1), (Some(ByteCount::Bytes(1 << 20)), None));
        assert_eq!(
            shape(2),
            (
                2,
                8,
                4096,
                Some(ByteCount::Percent("50%".to_owned())),
                None,
                1
            )
        );
        assert_eq!(
            offsets(2),
            (None, Some(ByteCount::Percent("10%".to_owned())))
        );
        assert_eq!(parse_size_range("1g:2g"), Some((1 << 30, 2 << 30)));
        assert_eq!(parse_size_range("64m"), Some((64 << 20, 64 << 20)));
        assert_eq!(parse_size_range("2g-1g"), None);
        assert_eq!(parse_size("64KiB"), Some(65536));
        assert_eq!(parse_size("1.5g"), Some(3 << 29));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("10%"), None);
        assert_eq!(parse_size("1e"), Some(1 << 60));
    }

    // issue 32, finding 6: fio reads `filesize=50%` as 2^64 − 51 bytes and a range given high
    // end first unswapped (its files are drawn past the range): both filled the file system.
    #[test]
    fn filesize_is_a_size_or_a_range_low_end_first_never_a_percentage() {
        for (text, named) in [
            ("[w]\nfilesize=50%\n", "percentage"),
            ("[w]\nfilesize=2g-1g\n", "1g-2g"),
            ("[w]\nfilesize=1g,2g\n", "1g-2g"),
            ("[w]\nfilesize=1g-2g-3g\n", "1g-2g"),
        ] {
            let e = parse(text).expect_err(text);
            assert!(
                e.to_string().contains("filesize") && e.to_string().contains(named),
                "{text:?}: {e}"
            );
        }
        for text in [
            "[w]\nfilesize=64m\n",
            "[w]\nfilesize=1g-2g\n",
            "[w]\nfilesize=1g:1g\n",
        ] {
            parse(text).expect(text);
        }
    }

    #[test]
    fn every_allowed_option_is_documented() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/agent-fio.md"))
                .expect("docs/agent-fio.md");
        for name in OPTIONS.iter().map(|(name, _)| name).chain(ENGINES) {
            assert!(
                doc.contains(&format!("`{name}`")),
                "docs/agent-fio.md lacks `{name}`"
            );
        }
    }

    #[test]
    fn every_engine_in_the_allowlist_is_accepted() {
        for engine in ENGINES {
            parse(&format!("[w]\nioengine={engine}\n")).expect(engine);
        }
    }
}
