//! The series database: every night, boot, regression and hunt of a series, as events in a
//! journal file (the hunt journal's SQLite store), and the series' state as their fold.
//!
//! As in a hunt, [`SeriesState::apply`] is the only code that changes the state, live and
//! when the database is read again; each event is written before what it announces is done.

use crate::journal::{HuntIdentity, Journal, JournalError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// One boot of a night, as the series keeps it (the night's own journal keeps every sample).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesBoot {
    /// The commit booted.
    pub commit: String,
    /// When the boot ended (Unix ms).
    pub at_ms: i64,
    /// The host it ran on.
    pub host: String,
    /// Hash of the kernel config it was built with.
    pub config: String,
    /// The series metric's value; `None` for a boot that failed.
    pub value: Option<f64>,
    /// Every summary metric of the workload's result.
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    /// Why the boot failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// The `[[series.workloads]]` it ran (its `value` is that workload's metric, its
    /// `metrics` are named `<workload>/<metric>`); `None`: the series' own `[workload]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
}

/// Where a regression stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum RegressionState {
    /// Detected; its hunt has not ended.
    Hunting,
    /// The hunt named and confirmed a culprit (or named one it could not confirm).
    Found {
        /// The first bad commit.
        culprit: String,
        /// Whether the final re-test confirmed it.
        confirmed: bool,
        /// The confidence stated for it.
        probability: Option<f64>,
    },
    /// The hunt did not see the regression between its two commits.
    NotReproduced {
        /// The hunt's figures.
        message: String,
    },
    /// Only skipped commits were left: the culprit is one of these.
    Ambiguous {
        /// The possible culprits.
        commits: Vec<String>,
    },
    /// The hunt spent its boot budget without an answer; a person decides.
    BudgetSpent {
        /// Boots it spent.
        boots: usize,
    },
}

/// One series event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum SeriesEvent {
    /// The reference moved: the commit each night's head is measured against.
    Reference {
        /// Its full id.
        commit: String,
        /// Why: "first night", "no regression", "acknowledged #2".
        why: String,
    },
    /// A night began: its head, booted against the reference in `dir`'s journal.
    NightStarted {
        /// Night number, from 1.
        night: u32,
        /// The branch's head that night.
        head: String,
        /// The reference booted beside it.
        reference: String,
    },
    /// A night's boots, copied from its journal once it ended.
    NightMeasured {
        /// The night.
        night: u32,
        /// Every boot of head and reference.
        boots: Vec<SeriesBoot>,
        /// The two medians, for a person.
        summary: String,
    },
    /// Tonight's boots were suspicious and not decisive: a second look of more boots of each
    /// side begins, in the night's `second-look` journal (issue 36, item 2).
    SecondLookStarted {
        /// The night.
        night: u32,
        /// What was suspicious, for a person.
        why: String,
    },
    /// The second look's boots, added to the night's.
    SecondLookMeasured {
        /// The night.
        night: u32,
        /// Every boot of head and reference of the second look.
        boots: Vec<SeriesBoot>,
        /// The two medians, or why it ended early, for a person.
        summary: String,
    },
    /// The night's head did not build or boot: recorded, no values; the next head is tested
    /// on the next night.
    NightFailed {
        /// The night.
        night: u32,
        /// Why, for a person.
        reason: String,
    },
    /// A measured night was judged by the detector (whatever it found): judged once.
    Judged {
        /// The night.
        night: u32,
        /// The detector's figures, for a person.
        summary: String,
    },
    /// A regression (or an improvement) placed among the nights.
    ChangeFound {
        /// Number of the change, from 1.
        id: u32,
        /// The first night after the change.
        night: u32,
        /// The last commit tested before the change (the hunt's good).
        good: String,
        /// The first commit tested after it (the hunt's bad).
        bad: String,
        /// The relative move, signed: > 0 is worse.
        effect: f64,
        /// Worse (a regression, hunted) or better (an improvement, recorded).
        regression: bool,
        /// The metric it is judged and hunted on: of several that moved at this change, the
        /// one that moved most (empty in databases from before several metrics: the
        /// workload's own).
        #[serde(default)]
        metric: String,
        /// The detector's figures, for a person.
        summary: String,
    },
    /// A regression's hunt ended (or stopped for a person).
    HuntEnded {
        /// The change.
        id: u32,
        /// What it found.
        outcome: RegressionState,
    },
    /// A person acknowledged a change: it stops alerting and its commit becomes the reference.
    Acknowledged {
        /// The change.
        id: u32,
    },
    /// Heads failed to build or boot this many nights in a row.
    FailureAlert {
        /// The last failed night.
        night: u32,
        /// Nights in a row.
        nights: u32,
    },
    /// People were told (mail, webhook); what each channel said.
    Notified {
        /// The change, or none for a failure alert.
        id: Option<u32>,
        /// "detected", "culprit", "failures".
        what: String,
        /// Per channel: "sent" or the error.
        results: Vec<String>,
    },
}

/// A series event as kept: (sequence number, Unix time in ms, event).
pub type Record = (i64, i64, SeriesEvent);

/// A night as the series knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Night {
    /// Its number, from 1.
    pub night: u32,
    /// The head tested.
    pub head: String,
    /// The reference booted beside it.
    pub reference: String,
    /// When it started (Unix ms).
    pub started_ms: i64,
    /// Its boots, once measured.
    pub boots: Option<Vec<SeriesBoot>>,
    /// Why it failed, when it did.
    pub failed: Option<String>,
    /// Its second look, when tonight's boots asked for one.
    pub second_look: SecondLook,
}

/// A night's second look (issue 36, item 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecondLook {
    /// None asked for.
    #[default]
    None,
    /// Begun, its boots not in yet: a cycle killed in it resumes it.
    Started,
    /// Its boots are in the night's.
    Measured,
}

impl Night {
    /// Whether the night has ended (measured or failed).
    pub fn ended(&self) -> bool {
        self.boots.is_some() || self.failed.is_some()
    }

    /// The measured values of `commit` this night (the series' own metric).
    pub fn values(&self, commit: &str) -> Vec<f64> {
        self.values_of(commit, None)
    }

    /// The measured values of `commit` this night of `metric`, or of the series' own metric.
    pub fn values_of(&self, commit: &str, metric: Option<&str>) -> Vec<f64> {
        self.boots
            .iter()
            .flatten()
            .filter(|b| b.commit == commit)
            .filter_map(|b| match metric {
                None => b.value.filter(|_| b.workload.is_none()),
                Some(m) => b.metrics.get(m).copied(),
            })
            .collect()
    }
}

/// A change found among the nights.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Its number.
    pub id: u32,
    /// First night after it.
    pub night: u32,
    /// The hunt's good and bad.
    pub good: String,
    /// The hunt's bad.
    pub bad: String,
    /// Signed relative move (> 0 worse).
    pub effect: f64,
    /// A regression (else an improvement).
    pub regression: bool,
    /// The metric it is hunted on (empty: the workload's own).
    pub metric: String,
    /// The detector's figures.
    pub summary: String,
    /// The hunt's outcome, once it ended.
    pub outcome: Option<RegressionState>,
    /// Acknowledged by a person.
    pub acknowledged: bool,
    /// Whether "detected" and "culprit" mails went out.
    pub told: Vec<String>,
}

/// The fold of a series' events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesState {
    /// The reference now.
    pub reference: Option<String>,
    /// Every night, oldest first.
    pub nights: Vec<Night>,
    /// Every change found.
    pub changes: Vec<Change>,
    /// Failure alerts given, by last failed night.
    pub failure_alerts: Vec<u32>,
    /// Notifications about failures sent, by night.
    pub failures_told: Vec<u32>,
    /// Nights the detector has judged.
    pub judged: Vec<u32>,
}

impl SeriesState {
    /// Applies one event: the only code that changes a series' state.
    pub fn apply(&mut self, event: &SeriesEvent, at_ms: i64) {
        match event {
            SeriesEvent::Reference { commit, .. } => self.reference = Some(commit.clone()),
            SeriesEvent::NightStarted {
                night,
                head,
                reference,
            } => self.nights.push(Night {
                night: *night,
                head: head.clone(),
                reference: reference.clone(),
                started_ms: at_ms,
                boots: None,
                failed: None,
                second_look: SecondLook::None,
            }),
            SeriesEvent::SecondLookStarted { night, .. } => {
                if let Some(n) = self.night_mut(*night) {
                    n.second_look = SecondLook::Started;
                }
            }
            SeriesEvent::SecondLookMeasured { night, boots, .. } => {
                if let Some(n) = self.night_mut(*night) {
                    n.second_look = SecondLook::Measured;
                    n.boots
                        .get_or_insert_with(Vec::new)
                        .extend(boots.iter().cloned());
                }
            }
            SeriesEvent::NightMeasured { night, boots, .. } => {
                if let Some(n) = self.night_mut(*night) {
                    n.boots = Some(boots.clone());
                }
            }
            SeriesEvent::NightFailed { night, reason } => {
                if let Some(n) = self.night_mut(*night) {
                    n.failed = Some(reason.clone());
                }
            }
            SeriesEvent::ChangeFound {
                id,
                night,
                good,
                bad,
                effect,
                regression,
                metric,
                summary,
            } => self.changes.push(Change {
                id: *id,
                night: *night,
                good: good.clone(),
                bad: bad.clone(),
                effect: *effect,
                regression: *regression,
                metric: metric.clone(),
                summary: summary.clone(),
                outcome: None,
                acknowledged: false,
                told: Vec::new(),
            }),
            SeriesEvent::HuntEnded { id, outcome } => {
                if let Some(c) = self.change_mut(*id) {
                    c.outcome = Some(outcome.clone());
                }
            }
            SeriesEvent::Acknowledged { id } => {
                if let Some(c) = self.change_mut(*id) {
                    c.acknowledged = true;
                }
            }
            SeriesEvent::FailureAlert { night, .. } => self.failure_alerts.push(*night),
            SeriesEvent::Judged { night, .. } => self.judged.push(*night),
            SeriesEvent::Notified { id, what, .. } => match id {
                Some(id) => {
                    if let Some(c) = self.change_mut(*id) {
                        c.told.push(what.clone());
                    }
                }
                None => {
                    if let Some(n) = self.failure_alerts.last() {
                        self.failures_told.push(*n);
                    }
                }
            },
        }
    }

    /// The fold of `events`.
    pub fn replay(events: &[Record]) -> SeriesState {
        let mut s = SeriesState::default();
        for (_, at, e) in events {
            s.apply(e, *at);
        }
        s
    }

    fn night_mut(&mut self, night: u32) -> Option<&mut Night> {
        self.nights.iter_mut().find(|n| n.night == night)
    }

    fn change_mut(&mut self, id: u32) -> Option<&mut Change> {
        self.changes.iter_mut().find(|c| c.id == id)
    }

    /// The night that started and has not ended (a cycle killed in it resumes it).
    pub fn open_night(&self) -> Option<&Night> {
        self.nights.last().filter(|n| !n.ended())
    }

    /// The newest night, when it was measured and not judged yet: a cycle stopped between the
    /// two (in its second look, or before it) left it.
    pub fn unjudged_night(&self) -> Option<&Night> {
        self.nights
            .last()
            .filter(|n| n.boots.is_some() && !self.judged.contains(&n.night))
    }

    /// Nights whose heads failed in a row, up to the newest.
    pub fn failed_in_a_row(&self) -> u32 {
        self.nights
            .iter()
            .rev()
            .take_while(|n| n.failed.is_some())
            .count() as u32
    }

    /// The open regression: found, not acknowledged, its hunt not ended or its culprit not
    /// yet acknowledged. At most one is hunted at a time.
    pub fn open_regression(&self) -> Option<&Change> {
        self.changes
            .iter()
            .find(|c| c.regression && !c.acknowledged && c.outcome.is_none())
    }

    /// Whether a regression not acknowledged holds the reference where it was.
    pub fn unacknowledged_regression(&self) -> Option<&Change> {
        self.changes
            .iter()
            .rev()
            .find(|c| c.regression && !c.acknowledged)
    }
}

/// A series database, open.
pub struct SeriesDb {
    journal: Journal,
    /// Its fold.
    pub state: SeriesState,
}

impl SeriesDb {
    /// Opens (creating) the database at `path`; an existing one must have been made by a
    /// series file that measures the same thing (`meaning`), else the changed fields are
    /// named.
    pub fn open(
        path: &Path,
        meaning: BTreeMap<String, String>,
        source: &Path,
    ) -> Result<SeriesDb, super::WatchError> {
        let journal = Journal::open(path)?;
        let identity = HuntIdentity {
            good: String::new(),
            bad: String::new(),
            fingerprint: crate::hunt::prelude::fingerprint(&meaning),
            meaning,
        };
        match journal.identity()? {
            Some(old) if old.meaning != identity.meaning => {
                let changes = crate::hunt::prelude::changed_fields(&old.meaning, &identity.meaning);
                return Err(super::WatchError::BadInput(format!(
                    "{}: the series in {} measured something else: {}; give the series \
                     another name or state_dir to start a new one (its nights stay where \
                     they are)",
                    source.display(),
                    path.display(),
                    changes.join("; ")
                )));
            }
            Some(_) => {}
            None => journal.set_identity(&identity)?,
        }
        let events = journal.bodies::<SeriesEvent>()?;
        Ok(SeriesDb {
            journal,
            state: SeriesState::replay(&events),
        })
    }

    /// Opens an existing database to read it (the dashboard, `status`).
    pub fn read(path: &Path) -> Result<(SeriesState, Vec<Record>), JournalError> {
        let journal = Journal::open_read_only(path)?;
        let events = journal.bodies::<SeriesEvent>()?;
        Ok((SeriesState::replay(&events), events))
    }

    /// Journals an event, then applies it.
    pub fn record(&mut self, event: SeriesEvent) -> Result<(), JournalError> {
        let kind = serde_json::to_value(&event).expect("events serialise")["event"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        let (_, at_ms) = self.journal.append_body(&kind, None, &event)?;
        self.state.apply(&event, at_ms);
        Ok(())
    }

    /// Every event with its sequence number and time.
    pub fn events(&self) -> Result<Vec<Record>, JournalError> {
        self.journal.bodies()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boot(commit: &str, value: f64) -> SeriesBoot {
        SeriesBoot {
            commit: commit.into(),
            at_ms: 1,
            host: "qemu0".into(),
            config: "abc".into(),
            value: Some(value),
            metrics: BTreeMap::new(),
            failed: None,
            workload: None,
        }
    }

    // One apply, live and on reopening: the state a cycle acted on is the state the next
    // cycle reads back, and a changed meaning is refused by field.
    #[test]
    fn a_series_reads_back_the_state_it_was_left_in() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("series.sqlite");
        let meaning: BTreeMap<String, String> =
            [("series.branch".to_owned(), "master".to_owned())].into();
        let mut db = SeriesDb::open(&path, meaning.clone(), Path::new("s.toml")).unwrap();
        for e in [
            SeriesEvent::Reference {
                commit: "a".into(),
                why: "first".into(),
            },
            SeriesEvent::NightStarted {
                night: 1,
                head: "b".into(),
                reference: "a".into(),
            },
            SeriesEvent::NightMeasured {
                night: 1,
                boots: vec![boot("a", 1.0), boot("b", 2.0)],
                summary: String::new(),
            },
            SeriesEvent::Judged {
                night: 1,
                summary: String::new(),
            },
            SeriesEvent::ChangeFound {
                id: 1,
                night: 1,
                good: "a".into(),
                bad: "b".into(),
                effect: 1.0,
                regression: true,
                metric: String::new(),
                summary: String::new(),
            },
        ] {
            db.record(e).unwrap();
        }
        assert_eq!(db.state.open_regression().map(|c| c.id), Some(1));
        assert_eq!(db.state.nights[0].values("b"), vec![2.0]);
        let live = db.state.clone();
        drop(db);
        let again = SeriesDb::open(&path, meaning, Path::new("s.toml")).unwrap();
        assert_eq!(again.state, live);
        let other: BTreeMap<String, String> =
            [("series.branch".to_owned(), "next".to_owned())].into();
        let e = SeriesDb::open(&path, other, Path::new("s.toml"))
            .err()
            .expect("another branch is another series")
            .to_string();
        assert!(
            e.contains("series.branch: was \"master\", now \"next\""),
            "{e}"
        );
    }
}
