//! The table: every number field of a hunt file, and the length of each command it runs,
//! with its range, default and reason. The series file's own are in `config/series.rs`.

use super::{bytes, host, int, open, Bound, Default, Range};

/// Seconds in a day and in a week, the outer limits of the timeouts.
const DAY: i64 = 24 * 3600;
const WEEK: i64 = 7 * DAY;

/// `[build] jobs`.
pub const BUILD_JOBS: Bound = Bound {
    default: Default::Text(
        "the number of CPUs plus the slots of the build.distcc hosts, at most 4096",
    ),
    ..int(
        "build.jobs",
        1,
        4096,
        0,
        "make -j; the largest machines have a few thousand CPUs",
    )
};
/// distcc's own default `/LIMIT` per host.
pub const DISTCC_SLOTS: i64 = 4;
/// distccd's default port.
pub const DISTCC_PORT: i64 = 3632;
/// The `/slots` of a `[build] distcc` entry.
pub const BUILD_DISTCC_SLOTS: Bound = int(
    "build.distcc[]/slots",
    1,
    1024,
    DISTCC_SLOTS,
    "compiles sent to one distcc host at once; 4 is distcc's own default, 1024 beyond any machine's CPUs",
);
/// The `:port` of a `[build] distcc` entry.
pub const BUILD_DISTCC_PORT: Bound = int(
    "build.distcc[]:port",
    1,
    65535,
    DISTCC_PORT,
    "a TCP port; 3632 is distccd's default",
);
/// `[build] timeout_s`.
pub const BUILD_TIMEOUT_S: Bound = int(
    "build.timeout_s",
    1,
    WEEK,
    3600,
    "seconds per build; allmodconfig from scratch on one slow core takes about a day",
);
/// `[[hosts]] memory_mb` (qemu).
pub const QEMU_MEMORY_MB: Bound = host(
    "qemu",
    int(
        "hosts[].memory_mb",
        128,
        1 << 20,
        1024,
        "guest MiB; the kernel, initramfs and agent need 128, 1 TiB is more than a test box has",
    ),
);
/// `[[hosts]] cpus` (qemu).
pub const QEMU_CPUS: Bound = host(
    "qemu",
    int(
        "hosts[].cpus",
        1,
        1024,
        1,
        "guest CPUs; qemu's x86 limit with x2apic is 1024",
    ),
);
/// `[[hosts]] scratch_mb` (qemu).
pub const QEMU_SCRATCH_MB: Bound = host(
    "qemu",
    int(
        "hosts[].scratch_mb",
        64,
        1 << 20,
        1024,
        "MiB of the ext4 scratch disk (a sparse file); ext4 wants 64 for a journal, 1 TiB caps it",
    ),
);
/// `[[hosts]] boot_timeout_s` (qemu).
pub const QEMU_BOOT_TIMEOUT_S: Bound = host(
    "qemu",
    int(
        "hosts[].boot_timeout_s",
        1,
        3600,
        180,
        "qemu start to a healthy agent; TCG boots the tiny kernel in ~3 s, an hour is a hang",
    ),
);
/// `[[hosts]] jobs` (lava).
pub const LAVA_JOBS: Bound = host(
    "lava",
    int(
        "hosts[].jobs",
        1,
        1024,
        4,
        "LAVA jobs in flight for this hunt; each is a boot on a device the scheduler picks",
    ),
);
/// `[[hosts]] job_timeout_s` (lava).
pub const LAVA_JOB_TIMEOUT_S: Bound = host(
    "lava",
    int(
        "hosts[].job_timeout_s",
        60,
        7 * 24 * 3600,
        1800,
        "submission to a finished job, queueing included; LAVA never ends a job whose worker died",
    ),
);
/// `[[hosts]] server_deadline_s` (lava).
pub const LAVA_SERVER_DEADLINE_S: Bound = host(
    "lava",
    int(
        "hosts[].server_deadline_s",
        1,
        7 * 24 * 3600,
        900,
        "how long the LAVA server may not answer (a restart, an upgrade) before the farm is a host error",
    ),
);
/// `[[hosts]] scratch_mb` (lava).
pub const LAVA_SCRATCH_MB: Bound = host(
    "lava",
    int(
        "hosts[].scratch_mb",
        64,
        1 << 16,
        256,
        "MiB of the ext4 scratch image each job deploys (copied by the worker for every job)",
    ),
);
/// `[[hosts]] boot_timeout_s` (ssh).
pub const SSH_BOOT_TIMEOUT_S: Bound = host(
    "ssh",
    int(
        "hosts[].boot_timeout_s",
        1,
        2 * 3600,
        600,
        "reboot to a healthy agent; server firmware can take 10+ min, two hours is a dead machine",
    ),
);
/// `[[hosts]] keepalive_s` (ssh).
pub const SSH_KEEPALIVE_S: Bound = host(
    "ssh",
    int(
        "hosts[].keepalive_s",
        1,
        600,
        15,
        "TCP keepalive idle seconds; a dead peer must be noticed inside any command deadline",
    ),
);
/// `[[hosts]] connect_timeout_s` (ssh).
pub const SSH_CONNECT_TIMEOUT_S: Bound = host(
    "ssh",
    int(
        "hosts[].connect_timeout_s",
        1,
        600,
        15,
        "TCP connect, handshake and authentication; ten minutes is a dead network",
    ),
);
/// `[[hosts]] command_timeout_s` (ssh).
pub const SSH_COMMAND_TIMEOUT_S: Bound = host(
    "ssh",
    int(
        "hosts[].command_timeout_s",
        1,
        DAY,
        120,
        "any one remote command (uploads get 1 s more per MiB); a day is a hung one",
    ),
);
/// `[[hosts]] agent_port` (ssh).
pub const SSH_AGENT_PORT: Bound = host(
    "ssh",
    int(
        "hosts[].agent_port",
        1,
        65535,
        firstbad_wire::GUEST_AGENT_PORT as i64,
        "a TCP port; 0 is not one",
    ),
);
/// `[workload] timeout_s`.
pub const WORKLOAD_TIMEOUT_S: Bound = int(
    "workload.timeout_s",
    1,
    DAY,
    600,
    "one run of the workload, tens of them per commit; a day is a hang",
);
/// `[classify] relative`.
pub const CLASSIFY_RELATIVE: Bound = open(
    "classify.relative",
    0.0,
    10.0,
    Default::Text("none: mode = \"relative\" needs it"),
    "share worse than good that is bad (0.2 = 20%); 10 is 1000% worse",
);
/// `[classify] threshold`.
pub const CLASSIFY_THRESHOLD: Bound = Bound {
    range: Range::Float {
        min: 0.0,
        min_open: true,
        max: 1e15,
        max_open: false,
    },
    ..open(
        "classify.threshold",
        0.0,
        0.0,
        Default::Text("none: mode = \"absolute\" needs it"),
        "a value of the metric above which a commit is bad; room for any unit (ns, bytes/s)",
    )
};
/// `[classify] min_boots`.
pub const CLASSIFY_MIN_BOOTS: Bound = int(
    "classify.min_boots",
    1,
    1000,
    1,
    "boots before a verdict, at most classify.max_boots",
);
/// `[classify] max_boots`.
pub const CLASSIFY_MAX_BOOTS: Bound = int(
    "classify.max_boots",
    1,
    1000,
    30,
    "boots before a commit is undecided; each takes minutes, 1000 is days on one commit",
);
/// `[classify] min_effect`.
pub const CLASSIFY_MIN_EFFECT: Bound = open(
    "classify.min_effect",
    0.0,
    10.0,
    Default::Float(0.05),
    "smallest relative difference between good and bad that counts (0.05 = 5%)",
);
/// `[classify] max_failed_boots`.
pub const CLASSIFY_MAX_FAILED_BOOTS: Bound = int(
    "classify.max_failed_boots",
    1,
    100,
    2,
    "failed boots before a commit is skipped; past 100 the host is broken, not the commit",
);
/// `[classify] alpha`.
pub const CLASSIFY_ALPHA: Bound = open(
    "classify.alpha",
    0.0,
    0.5,
    Default::Float(0.01),
    "chance of calling a good commit bad; under 0.5, above the baselines' floor (1.8e-22 at 64 boots)",
);
/// `[classify] beta`.
pub const CLASSIFY_BETA: Bound = open(
    "classify.beta",
    0.0,
    0.5,
    Default::Float(0.01),
    "chance of calling a bad commit good; from 0.5 on the test turns evidence around",
);
/// `[classify] confidence`.
pub const CLASSIFY_CONFIDENCE: Bound = open(
    "classify.confidence",
    0.5,
    1.0,
    Default::Float(0.95),
    "posterior on the culprit that ends the hunt; 1 is never reached, 0.5 is a coin",
);
/// `[classify] drift_check_every`.
pub const CLASSIFY_DRIFT_CHECK_EVERY: Bound = int(
    "classify.drift_check_every",
    0,
    1000,
    4,
    "verdicts between boots of the good endpoint; 0 turns the check off",
);
/// `[classify] confirm_pairs`.
pub const CLASSIFY_CONFIRM_PAIRS: Bound = int(
    "classify.confirm_pairs",
    0,
    100,
    3,
    "culprit/parent boot pairs in the final re-test; 0 turns it off",
);
/// `[classify] drift_lasts_boots`.
pub const CLASSIFY_DRIFT_LASTS_BOOTS: Bound = int(
    "classify.drift_lasts_boots",
    2,
    1000,
    6,
    "re-measurements a move of the good endpoint must last to be drift, not a burst",
);
/// `[classify] drift_lasts_minutes`.
pub const CLASSIFY_DRIFT_LASTS_MINUTES: Bound = int(
    "classify.drift_lasts_minutes",
    0,
    1440,
    3,
    "minutes of boots a move must last as well; 0: the re-measurements alone decide",
);
/// `[classify] confirm_max_pairs`.
pub const CLASSIFY_CONFIRM_MAX_PAIRS: Bound = int(
    "classify.confirm_max_pairs",
    0,
    100,
    8,
    "re-test rounds at most while the re-test cannot yet decide; below confirm_pairs: none",
);
/// `[classify] max_culprits`.
pub const CLASSIFY_MAX_CULPRITS: Bound = int(
    "classify.max_culprits",
    1,
    16,
    3,
    "culprits of one regression a run confirms (bug 12309 had two); 1: the first stage only",
);
/// `[classify] refine_boots`.
pub const CLASSIFY_REFINE_BOOTS: Bound = int(
    "classify.refine_boots",
    0,
    1000,
    60,
    "posterior-phase boots per bit of the range; 0 turns the phase off",
);
/// `[classify] max_baseline_boots`.
pub const CLASSIFY_MAX_BASELINE_BOOTS: Bound = int(
    "classify.max_baseline_boots",
    8,
    64,
    64,
    "boots of each endpoint at the baselines' last look (looks at 5, 8, 16, 32, 64); then \
     they decide",
);
/// `[test] timeout_s`.
pub const TEST_TIMEOUT_S: Bound = int(
    "test.timeout_s",
    1,
    WEEK,
    3600,
    "seconds per run of the command; a week is the outer limit of one test in a bisection",
);
/// `[test] build_timeout_s`.
pub const TEST_BUILD_TIMEOUT_S: Bound = int(
    "test.build_timeout_s",
    1,
    WEEK,
    3600,
    "seconds for a metric hunt's build of one candidate; a week is the outer limit",
);
/// `[test] jobs`.
pub const TEST_JOBS: Bound = int(
    "test.jobs",
    1,
    64,
    1,
    "checkouts tested at once, each a full worktree",
);
/// Linux's bound on one argument of `execve(2)` (`MAX_ARG_STRLEN`, 32 pages of 4 KiB), its
/// terminating NUL included: a command past it can never start (E2BIG, "Argument list too
/// long"), on any commit (issue 32, finding 8).
const MAX_ARG_STRLEN: i64 = 32 * 4096;
/// The reason of the commands' length bounds.
const ONE_ARGUMENT: &str =
    "sh -c gets it as one argument, which Linux refuses past 128 KiB (MAX_ARG_STRLEN)";
/// `[test] command`'s length.
pub const TEST_COMMAND_BYTES: Bound =
    bytes("test.command", MAX_ARG_STRLEN - 1, "required", ONE_ARGUMENT);
/// `[test] build`'s length.
pub const TEST_BUILD_BYTES: Bound = bytes(
    "test.build",
    MAX_ARG_STRLEN - 1,
    "none: the checkout is the build",
    ONE_ARGUMENT,
);
/// `hosts[].power_cycle`'s length.
pub const SSH_POWER_CYCLE_BYTES: Bound = host(
    "ssh",
    bytes(
        "hosts[].power_cycle",
        MAX_ARG_STRLEN - 1,
        "none: a person power-cycles the machine",
        ONE_ARGUMENT,
    ),
);

/// Every number field of a hunt file, and the length of each command it runs, in the order
/// of the tables.
pub const BOUNDS: &[Bound] = &[
    BUILD_JOBS,
    BUILD_DISTCC_PORT,
    BUILD_DISTCC_SLOTS,
    BUILD_TIMEOUT_S,
    QEMU_MEMORY_MB,
    QEMU_CPUS,
    QEMU_SCRATCH_MB,
    crate::config::disk::QEMU_DISK_MB_S,
    crate::config::disk::QEMU_DISK_IOPS,
    crate::config::disk::QEMU_DISK_QUEUES,
    crate::config::disk::QEMU_DISK_QUEUE_SIZE,
    QEMU_BOOT_TIMEOUT_S,
    SSH_BOOT_TIMEOUT_S,
    LAVA_JOBS,
    LAVA_JOB_TIMEOUT_S,
    LAVA_SERVER_DEADLINE_S,
    LAVA_SCRATCH_MB,
    SSH_KEEPALIVE_S,
    SSH_CONNECT_TIMEOUT_S,
    SSH_COMMAND_TIMEOUT_S,
    SSH_AGENT_PORT,
    SSH_POWER_CYCLE_BYTES,
    WORKLOAD_TIMEOUT_S,
    CLASSIFY_RELATIVE,
    CLASSIFY_THRESHOLD,
    CLASSIFY_MIN_BOOTS,
    CLASSIFY_MAX_BOOTS,
    CLASSIFY_MIN_EFFECT,
    CLASSIFY_MAX_FAILED_BOOTS,
    CLASSIFY_ALPHA,
    CLASSIFY_BETA,
    CLASSIFY_CONFIDENCE,
    CLASSIFY_DRIFT_CHECK_EVERY,
    CLASSIFY_DRIFT_LASTS_BOOTS,
    CLASSIFY_DRIFT_LASTS_MINUTES,
    CLASSIFY_CONFIRM_PAIRS,
    CLASSIFY_CONFIRM_MAX_PAIRS,
    CLASSIFY_MAX_CULPRITS,
    CLASSIFY_REFINE_BOOTS,
    CLASSIFY_MAX_BASELINE_BOOTS,
    TEST_TIMEOUT_S,
    TEST_BUILD_TIMEOUT_S,
    TEST_JOBS,
    TEST_COMMAND_BYTES,
    TEST_BUILD_BYTES,
];
