use super::expand::expand;
use super::*;
use firstbad_wire::Workload;
use std::path::{Path, PathBuf};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn fixture(dir: &Path, hunt_extra: &str) -> PathBuf {
    write(dir, "kernel.config", "CONFIG_64BIT=y\n");
    write(
        dir,
        "fsync.toml",
        "kind = \"fsync-latency\"\nwriters = 1\nwriter_bytes = 1048576\nwriter_block_bytes = 65536\nappend_bytes = 4096\nfsyncs = 10\ninterval_ms = 0\n",
    );
    write(
        dir,
        "hunt.toml",
        &format!(
            "[hunt]\nname = \"t\"\nrepo = \"linux\"\ngood = \"v1\"\nbad = \"v2\"\n\n[build]\nconfig = \"kernel.config\"\n\n[[hosts]]\nkind = \"qemu\"\n{hunt_extra}\n[workload]\nfile = \"fsync.toml\"\nmetric = \"fsync_latency_p50_ms\"\n"
        ),
    )
}

#[test]
fn a_good_file_validates_with_paths_relative_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let c = HuntConfig::load(&p).unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(c.repo, base.join("linux"));
    assert_eq!(c.state_dir, base.join("firstbad-state/t"));
    assert_eq!(c.hosts[0].name, "qemu0");
    assert!(matches!(c.workload.workload, Workload::FsyncLatency(ref f) if f.fsyncs == 10));
}

#[test]
fn unknown_field_names_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "memroy_mb = 512\n");
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("hunt.toml"), "{e}");
    assert!(e.contains("memroy_mb"), "{e}");
}

#[test]
fn bad_value_names_the_field_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "accel = \"hvf\"\n");
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("hosts[0].accel"), "{e}");
    assert!(e.contains("\"tcg\""), "{e}");
}

#[test]
fn unknown_metric_lists_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("fsync_latency_p50_ms", "fsync_p50");
    std::fs::write(&p, text).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("workload.metric"), "{e}");
    assert!(e.contains("fsync_latency_p99_ms"), "{e}");
}

#[test]
fn report_table_is_optional_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    assert!(HuntConfig::load(&p).unwrap().report.web_link.is_none());
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(
        &p,
        format!(
            "{text}\n[report]\nweb_link = \"https://x/c/{{commit}}\"\nbisected_by = \"A <a@b>\"\n"
        ),
    )
    .unwrap();
    let c = HuntConfig::load(&p).unwrap();
    assert_eq!(c.report.bisected_by.as_deref(), Some("A <a@b>"));
    std::fs::write(&p, format!("{text}\n[report]\nweb_link = \"https://x/\"\n")).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("report.web_link"), "{e}");
    std::fs::write(&p, format!("{text}\n[report]\nreportd_by = \"x\"\n")).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("reportd_by"), "{e}");
}

#[test]
fn classify_modes_are_checked_with_the_fix_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let text = std::fs::read_to_string(&p).unwrap();
    let with = |classify: &str| {
        std::fs::write(&p, format!("{text}\n[classify]\n{classify}\n")).unwrap();
        HuntConfig::load(&p)
    };
    let c = with("").unwrap().classify;
    assert_eq!(c.mode, ClassifyMode::Baselines);
    assert_eq!((c.alpha, c.beta, c.confidence), (0.01, 0.01, 0.95));
    assert_eq!((c.drift_check_every, c.confirm_pairs), (4, 3));
    let c = with("mode = \"relative\"\nrelative = 0.2")
        .unwrap()
        .classify;
    assert_eq!(c.mode, ClassifyMode::Relative(0.2));
    let c = with("mode = \"absolute\"\nthreshold = 500.0")
        .unwrap()
        .classify;
    assert_eq!(c.mode, ClassifyMode::Absolute(500.0));
    for (bad, field, hint) in [
        ("mode = \"relative\"", "classify.relative", "0.2 means"),
        ("mode = \"absolute\"", "classify.threshold", "500.0"),
        (
            "threshold = 5.0",
            "classify.threshold",
            "mode = \"absolute\"",
        ),
        ("mode = \"vote\"", "classify.mode", "\"relative\""),
        ("baseline_boots = 3", "classify.baseline_boots", "remove it"),
    ] {
        let e = with(bad).unwrap_err().to_string();
        assert!(e.contains(field) && e.contains(hint), "{bad}: {e}");
    }
}

#[test]
fn range_options_one_or_several_goods_paths_first_parent() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let c = HuntConfig::load(&p).unwrap();
    assert_eq!(c.goods, ["v1"]);
    assert!(c.paths.is_empty() && !c.first_parent);
    let text = std::fs::read_to_string(&p).unwrap().replace(
        "good = \"v1\"\n",
        "good = [\"v1\", \"v0.9\"]\npaths = [\"mm/\", \"fs/ext4/\"]\nfirst_parent = true\n",
    );
    std::fs::write(&p, &text).unwrap();
    let c = HuntConfig::load(&p).unwrap();
    assert_eq!(c.goods, ["v1", "v0.9"]);
    assert_eq!(c.paths, ["mm/", "fs/ext4/"]);
    assert!(c.first_parent);
    std::fs::write(&p, text.replace("\"fs/ext4/\"", "\"fs/*.c\"")).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("hunt.paths[1]") && e.contains("wildcards"),
        "{e}"
    );
    std::fs::write(&p, text.replace("[\"v1\", \"v0.9\"]", "[]")).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("hunt.good") && e.contains("at least one"), "{e}");
}

#[test]
fn a_test_table_makes_a_local_command_hunt_without_kernel_tables() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[hunt]\nname = \"l\"\nrepo = \"r\"\ngood = \"v1\"\nbad = \"v2\"\n\n[test]\ncommand = \"make -s check\"\njobs = 3\n";
    let p = write(dir.path(), "hunt.toml", text);
    let HuntFile::Local(c) = HuntFile::load(&p).unwrap() else {
        panic!("not a local hunt")
    };
    assert_eq!(c.test.command, "make -s check");
    assert_eq!((c.test.jobs, c.test.timeout_s), (3, 3600));
    // HuntConfig (kernel hunts) refuses it, naming the table.
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains(": test:"), "{e}");
    // Mixing it with a kernel table is an error that names the table.
    write(
        dir.path(),
        "hunt.toml",
        &format!("{text}\n[build]\nconfig = \"k\"\n"),
    );
    let e = HuntFile::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("hunt.toml: build:") && e.contains("[test]"),
        "{e}"
    );
    write(
        dir.path(),
        "hunt.toml",
        &text.replace("jobs = 3", "jobs = 0"),
    );
    let e = HuntFile::load(&p).unwrap_err().to_string();
    assert!(e.contains("test.jobs"), "{e}");
    write(
        dir.path(),
        "hunt.toml",
        &text.replace("jobs = 3", "job = 3"),
    );
    let e = HuntFile::load(&p).unwrap_err().to_string();
    assert!(e.contains("job"), "{e}");
    // Neither [test] nor [build]: the message says both ways.
    write(
        dir.path(),
        "hunt.toml",
        text.split("[test]").next().unwrap(),
    );
    let e = HuntFile::load(&p).unwrap_err().to_string();
    assert!(e.contains("build: missing") && e.contains("[test]"), "{e}");
}

#[test]
fn an_ssh_host_validates_and_its_errors_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let text = std::fs::read_to_string(&p).unwrap();
    let with = |host: &str| {
        std::fs::write(&p, text.replace("[[hosts]]\nkind = \"qemu\"\n", host)).unwrap();
        HuntConfig::load(&p)
    };
    let c = with("[[hosts]]\nname = \"lab1\"\nkind = \"ssh\"\naddress = \"root@lab1:2222\"\nidentity_file = \"id\"\npower_cycle = \"ipmitool power cycle\"\n").unwrap();
    let HostKind::Ssh(s) = &c.hosts[0].kind else {
        panic!("not ssh")
    };
    assert_eq!(
        (
            s.target.user.as_str(),
            s.target.host.as_str(),
            s.target.port
        ),
        ("root", "lab1", 2222)
    );
    assert_eq!(s.install, Install::Kexec { cmdline: None });
    assert_eq!(
        s.agent_url,
        format!("http://lab1:{}", firstbad_wire::GUEST_AGENT_PORT)
    );
    for (host, field, words) in [
        ("kind = \"ssh\"\naddress = \"lab1\"\n", "hosts[0].address", "user@host"),
        ("kind = \"ssh\"\naddress = \"r@h\"\ninstall = \"pxe\"\n", "hosts[0].install", "grub-reboot"),
        ("kind = \"ssh\"\naddress = \"r@h\"\ninstall = \"grub-reboot\"\n", "hosts[0].grub_entry", "menu entry"),
        ("kind = \"ssh\"\naddress = \"r@h\"\ninstall = \"commands\"\n", "hosts[0].install_commands", "{image}"),
        ("kind = \"ssh\"\naddress = \"r@h\"\nmemory_mb = 512\n", "hosts[0].memory_mb", "not read"),
        ("kind = \"qemu\"\naddress = \"r@h\"\n", "hosts[0].address", "not read"),
        ("kind = \"ssh\"\naddress = \"r@h\"\ninsecure_ignore_host_key = true\nknown_hosts = \"k\"\n", "hosts[0].insecure_ignore_host_key", "keep one"),
    ] {
        let e = with(&format!("[[hosts]]\n{host}")).unwrap_err().to_string();
        assert!(e.contains("hunt.toml") && e.contains(field) && e.contains(words), "{e}");
    }
    let e = with("[[hosts]]\nname = \"a\"\nkind = \"qemu\"\n[[hosts]]\nname = \"a\"\nkind = \"ssh\"\naddress = \"r@h\"\n").unwrap_err().to_string();
    assert!(e.contains("hosts[1].name"), "{e}");
}

#[test]
fn env_and_home_expand() {
    std::env::set_var("FIRSTBAD_TEST_EXPAND", "/x");
    assert_eq!(expand("${FIRSTBAD_TEST_EXPAND}/y").unwrap(), "/x/y");
    assert_eq!(expand("${FIRSTBAD_NOPE_NOPE:-/d}/y").unwrap(), "/d/y");
    assert!(expand("${FIRSTBAD_NOPE_NOPE}")
        .unwrap_err()
        .contains("not set"));
}
